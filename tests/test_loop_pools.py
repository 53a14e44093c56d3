"""The loop calibrates each unit at the pool sizes its forecast can need, places on them and simulates the plan.

Sizes: powers of two up to N_max = ceil(peak / (utilisation cap x lone rate)). Headroom and derating act on every
pool size's row of a coefficient, and keep capacity non-decreasing in the pool size.
"""

from __future__ import annotations

import pandas as pd
import pytest
from loop_fixtures import small_history, small_raw

from planner.catalog import load_catalog
from planner.forecast.run import forecast_history
from planner.loop import LoopSettings, run_loop
from planner.loop.derate import Miss, derate
from planner.loop.headroom import Headroom, non_decreasing_in_pool
from planner.loop.pool_sizes import largest_pool, pool_sizes_for, powers_of_two_up_to
from planner.placement.capacity import at_smallest_pool
from planner.placement.place import place_plan
from planner.profiles import load_profiles
from planner.scenario import parse_scenario


def test_the_largest_pool_a_plan_can_need_bounds_the_sizes_calibrated():
    assert largest_pool(100.0, 5.0, 0.8) == 25  # 100 req/s at 4 req/s per replica
    assert largest_pool(100.0, 4.0, 0.5) == 50
    assert largest_pool(0.0, 4.0, 0.5) == 0 and largest_pool(10.0, 0.0, 0.5) == 0
    assert powers_of_two_up_to(25) == (2, 4, 8, 16) and powers_of_two_up_to(1) == () and powers_of_two_up_to(2) == (2,)
    sizes = pool_sizes_for({"big": 100.0, "small": 3.0}, 0.8)
    assert sizes("big", 5.0) == (2, 4, 8, 16) and sizes("small", 5.0) == () and sizes("absent", 5.0) == ()


def _pooled_table(rates: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame({"model": "m", "sku": "H100", "tp_degree": 1, "traffic_class": "chat",
                         "pool_replicas": list(rates), "max_rps_per_replica": list(rates.values())})


def test_a_derate_scales_every_pool_size_of_the_coefficient_alike():
    table = _pooled_table({1: 4.0, 2: 6.0, 8: 9.0})
    miss = Miss("peak", "p", "r", "m", "chat", "ttft", 1.25, 1.0, 1.25, 0.0, (("H100", 1),))
    out, changes = derate(table, [miss])
    assert out["max_rps_per_replica"].tolist() == pytest.approx([3.2, 4.8, 7.2])
    assert [c["pool_replicas"] for c in changes] == [1, 2, 8]


def test_a_raise_takes_each_pool_size_towards_its_own_calibrated_value_and_a_back_off_restores_it():
    calibrated = _pooled_table({1: 4.0, 2: 6.0, 8: 9.0})
    headroom = Headroom.of(calibrated)
    lowered = calibrated.assign(max_rps_per_replica=[3.8, 4.0, 5.0])
    check = type("C", (), {"window": "peak", "period": "p", "ratio": 0.3, "describe": lambda self: "low"})()
    raised, changes = headroom.raise_coefficients(lowered, {("m", "H100", 1, "chat"): check})
    assert raised["max_rps_per_replica"].tolist() == pytest.approx([4.0, 4.6, 5.75])  # 4.0 is size 1's ceiling
    assert [(c["pool_replicas"], c["kind"]) for c in changes] == [(1, "raise"), (2, "raise"), (8, "raise")]
    miss = Miss("peak", "p", "r", "m", "chat", "ttft", 1.1, 1.0, 1.1, 0.0, (("H100", 1),))
    backed, back = headroom.adjust(raised, [miss], pd.DataFrame(columns=["region", "model", "traffic_class"]), {})
    assert backed["max_rps_per_replica"].tolist() == pytest.approx([3.8, 4.0, 5.0])
    assert {c["kind"] for c in back} == {"back off"}


def test_capacity_stays_non_decreasing_in_the_pool_size():
    table = _pooled_table({1: 5.0, 2: 4.0, 4: 7.0})
    assert non_decreasing_in_pool(table)["max_rps_per_replica"].tolist() == [4.0, 4.0, 7.0]
    lone = table[table["pool_replicas"] == 1].drop(columns="pool_replicas")
    assert non_decreasing_in_pool(lone).equals(lone)


@pytest.mark.slow
def test_the_loop_buys_for_the_pool_it_runs_and_every_slo_holds():
    """The demo's 8B on one H100 per replica at three times its us-east demand, with a 300 ms TTFT p99 for every
    class: a lone replica holds it only far below its ceiling, a pool much closer to it."""
    raw = small_raw()
    for klass in raw["classes"]:
        klass["ttft_p99_ms"] = 300.0
    scenario = parse_scenario(raw, source="loop-pools-test")
    forecast = forecast_history(small_history(scale=3.0), horizon_hours=24, quantiles=[0.5, 0.9, 0.95, 0.99],
                                backtest=False, engine="local").forecast
    settings = LoopSettings(max_rounds=3, periods="hourly", time_limit_s=60, gap=0.01, sim_duration_s=1200,
                            sim_replications=3, engine="local", seed=scenario.seeds.base, search_settings=False)
    result = run_loop(scenario, forecast, load_catalog(), load_profiles(), settings)
    table = result.calibration.table
    sizes = sorted(set(table["pool_replicas"]))
    assert sizes[:4] == [1, 2, 4, 8], sizes
    rate = table.groupby("pool_replicas")["max_rps_per_replica"].sum()
    assert rate.is_monotonic_increasing and rate.iloc[-1] > 1.5 * rate.iloc[0]
    lone = place_plan(scenario, forecast, load_catalog(), load_profiles(),
                      capacity=table[at_smallest_pool(table)].drop(columns="pool_replicas"), periods="hourly",
                      baselines=False)
    lone_gpus = int(lone.plan.groupby("period")["gpus"].sum().max())
    assert result.converged and result.slo["slo_met"].all()
    assert result.gpus_peak < lone_gpus, (result.gpus_peak, lone_gpus)
    assert result.placement.meta["capacity"]["pool_gains"]


def test_the_reports_utilisation_charges_a_pool_its_tabulated_capacity():
    from planner.report.assemble import capacity_utilisation

    table = _pooled_table({1: 4.0, 2: 6.0})  # 4 req/s alone, 6 per replica in a pool of two or more
    plan = pd.DataFrame({"period": "p", "region": "r", "model": "m", "sku": "H100", "tp_degree": 1,
                         "replicas": [1, 3]}).iloc[[1]]
    per_class = pd.DataFrame({"period": ["p"], "region": ["r"], "model": ["m"], "traffic_class": ["chat"],
                              "offered_rps": [9.0]})
    assert capacity_utilisation(per_class, plan, table).item() == pytest.approx(9.0 / (3 * 6.0))
    lone = table[table["pool_replicas"] == 1].drop(columns="pool_replicas")
    assert capacity_utilisation(per_class, plan, lone).item() == pytest.approx(9.0 / (3 * 4.0))


@pytest.mark.parametrize("pools", [True, False])
def test_lone_replica_reaches_the_loop(pools):
    from planner.cli.loop import loop_options
    from planner.workflows.plan import resolve_loop

    options = loop_options(max_rounds=2, periods="how:4", solver="highs", node_limit=100, time_limit=60.0, gap=0.02,
                           quantile=None, sim_duration="10min", replications=2, seed=1, engine="local", workers=None,
                           scheduler=None, cache_dir=None, pools=pools)
    _, settings = resolve_loop(options, parse_scenario(small_raw(), source="t"))
    assert settings.pools is pools

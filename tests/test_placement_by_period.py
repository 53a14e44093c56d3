"""A block with its core fixed, solved period by period; the plan's gap target met without branching.

* On tiny random instances (those of ``test_placement_oracle``), completing the core of
  the exact optimum period by period gives the optimum back, and completing any core
  gives exactly what the whole fixed-core MILP gives (the split is exact).
* A switching cost links the periods through the on-demand replicas: the completion sets
  the switching rows aside, then keeps replicas through dips where that is cheaper. Its
  plan breaks no row, costs no less than the optimum for the core, and no more than
  following every period's need exactly.
* On a one-week hourly instance a search allowed one branch-and-bound node proves a gap
  within 1 %, and the same inputs give the same plan twice; on the demo (4-hour blocks)
  the warm start and the cut LP prove it with no branch and bound over a block.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from placement_helpers import Region, capacity, catalog, forecast, profiles, scenario_dict
from test_placement_oracle import tiny_cases

from planner.placement import by_period, highs_backend, solve
from planner.placement.by_period import PeriodSplit
from planner.placement.instance import build_instance
from planner.placement.limits import SafetyNet
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.placement.problem import formulate
from planner.placement.strengthen import group_cuts
from planner.scenario import parse_scenario

PRICES = {("L4", "reserved"): 0.5, ("L4", "on_demand"): 1.0, ("L4", "spot"): 0.3,
          ("H100", "reserved"): 2.5, ("H100", "on_demand"): 4.0, ("H100", "spot"): 1.5}


def _fixed(milp, core: np.ndarray, values: np.ndarray):
    lo, hi = milp.col_lo.copy(), milp.col_hi.copy()
    lo[core] = hi[core] = values
    return replace(milp, col_lo=lo, col_hi=hi, _names={})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases())
def test_period_by_period_completion_is_the_fixed_core_optimum(inst):
    milp = group_cuts(formulate(inst, budget=False, cuts=False))
    split = PeriodSplit.of(milp)
    assert split is not None
    exact = highs_backend.solve(milp, time_limit_s=30, gap=0.0)
    if exact.x is None:
        return
    core_values = np.rint(exact.x[split.core])
    completed = split.complete(core_values, SafetyNet.starting_now(60))
    assert completed.status.has_solution
    assert np.all(milp.A @ completed.x <= milp.row_hi + 1e-6)
    assert np.all(milp.A @ completed.x >= milp.row_lo - 1e-6)
    assert completed.objective == pytest.approx(float(milp.c @ completed.x) + milp.offset, rel=1e-9, abs=1e-9)
    if split.switching:  # the switching rows set aside: a plan, at least the optimum's cost
        assert completed.objective >= exact.objective - 1e-4 * abs(exact.objective) - 1e-6
        return
    assert completed.objective == pytest.approx(exact.objective, rel=1e-4, abs=1e-6)
    # another core: one more replica of every reserved unit
    if "R" in milp.cols:
        other = core_values.copy()
        reserved = np.isin(split.core, np.arange(milp.cols["R"].start, milp.cols["R"].stop))
        other[reserved] = np.minimum(other[reserved] + 1, milp.col_hi[split.core][reserved])
        whole = highs_backend.solve(_fixed(milp, split.core, other), time_limit_s=30, gap=0.0)
        again = split.complete(other, SafetyNet.starting_now(60))
        assert again.status.has_solution == whole.status.has_solution
        if whole.status.has_solution:
            assert again.objective == pytest.approx(whole.objective, rel=1e-4, abs=1e-6)


def week_instance(switching_cost: float = 0.0, days: int = 7):
    """Two zones, two models, hourly periods of a daily wave with a weekly swing."""
    regions = [
        Region("aws:us-east-1", "us", {"us-east": 10.0, "eu-west": 80.0}, dict(PRICES), quota=256),
        Region("gcp:us-central1", "us", {"us-east": 30.0, "eu-west": 100.0},
               {key: 0.95 * value for key, value in PRICES.items()}, quota=256),
        Region("gcp:europe-west4", "eu", {"us-east": 90.0, "eu-west": 12.0},
               {key: 0.9 * value for key, value in PRICES.items()}, quota=256),
    ]
    scenario = parse_scenario(scenario_dict(
        regions,
        {"us-east": ("us", ["us"]), "eu-west": ("eu", ["eu"])},
        {"llama-3.1-8b": ["L4", "H100"], "llama-3.1-70b": ["H100"]},
        {"interactive": {"latency_budget_ms": 50.0}, "batch": {"latency_budget_ms": 200.0, "spot_tolerant": True}},
        capacity={"utilisation_cap": 0.8, "redundancy": 1, "switching_cost_usd": switching_cost},
        horizon=f"{days}d",
    ))
    hours = np.arange(24 * days)
    wave = 6.0 + 5.0 * np.sin(2 * np.pi * hours / 24) + 1.5 * np.sin(2 * np.pi * hours / 168) + 0.37 * (hours % 7)
    demand = {}
    for origin, scale in (("us-east", 1.0), ("eu-west", 0.6)):
        for model, factor in (("llama-3.1-8b", 1.0), ("llama-3.1-70b", 0.3)):
            demand[(origin, model, "interactive")] = list(scale * factor * wave)
            demand[(origin, model, "batch")] = list(scale * factor * 0.5 * wave[::-1])
    rows = [("llama-3.1-8b", "L4", 1), ("llama-3.1-8b", "H100", 1), ("llama-3.1-70b", "H100", 2)]
    caps = capacity([(m, s, tp, k, rate * (3.0 if s == "H100" else 1.0) * (0.25 if m == "llama-3.1-70b" else 1.0))
                     for m, s, tp in rows for k, rate in (("interactive", 1.3), ("batch", 2.1))])
    frame = demand_from_forecast(forecast(demand), scenario, 0.95, parse_periods("hourly"))
    return build_instance(scenario, frame, catalog(regions), profiles(rows), caps)


def test_switching_is_set_aside_and_dips_are_kept_where_cheaper(monkeypatch):
    assert not PeriodSplit.of(formulate(week_instance(), budget=False, cuts=False)).switching
    milp = group_cuts(formulate(week_instance(switching_cost=2.0, days=2), budget=False, cuts=False))
    split = PeriodSplit.of(milp)
    assert split is not None and split.switching == (("D", "wD"),)
    exact = highs_backend.solve(milp, time_limit_s=300, gap=1e-4)
    core_values = np.rint(exact.x[split.core])
    completed = split.complete(core_values, SafetyNet.starting_now(120))
    print(f"completed {completed.objective:.2f}, MILP {exact.objective:.2f} (bound {exact.bound:.2f})")
    x = completed.x
    assert np.all(milp.A @ x <= milp.row_hi + 1e-6) and np.all(milp.A @ x >= milp.row_lo - 1e-6)
    w = milp.cols["wD"]
    assert float(x[w.start:w.stop].sum()) > 0  # the week's wave moves the on-demand fleet
    # following every period's need exactly, each step paid: what keeping replicas improves on
    monkeypatch.setattr(by_period, "smooth_trajectory", lambda rental, lower, upper, switch_cost: lower)
    followed = split.complete(core_values, SafetyNet.starting_now(120))
    assert np.all(milp.A @ followed.x >= milp.row_lo - 1e-6)
    assert completed.objective < followed.objective
    assert exact.bound - 1e-6 <= completed.objective <= 1.01 * exact.objective


def _no_branching(monkeypatch) -> None:
    """Fail on any branch and bound over a whole block; keep the blocks in this process to see it."""
    def refuse(*args, **kwargs):
        raise AssertionError("the block was searched by branch and bound")

    monkeypatch.setattr(solve, "run_backend", refuse)
    monkeypatch.setattr(solve, "available_cores", lambda: 1)


@pytest.mark.slow
def test_a_long_horizon_reaches_its_gap_on_one_node_and_repeats():
    inst = week_instance()
    first = solve.solve_instance(inst, backend="highs", node_limit=1, time_limit_s=600, gap=0.01)
    assert first.status.has_solution and not first.time_limit_hits
    assert first.gap <= 0.01
    second = solve.solve_instance(inst, backend="highs", node_limit=1, time_limit_s=600, gap=0.01)
    assert second.objective == first.objective and second.bound == first.bound
    assert np.array_equal(second.fleet.replicas, first.fleet.replicas)
    assert np.array_equal(second.fleet.flows, first.fleet.flows)

def demo_instance():
    """The demo scenario on its history's last two weeks moved two weeks ahead, in 4-hour hour-of-week blocks."""
    from planner.catalog import load_catalog
    from planner.paths import PROJECT_ROOT, data_dir
    from planner.placement.capacity import analytic_capacity
    from planner.placement.place import analytic_lengths
    from planner.profiles import load_profiles
    from planner.scenario import load_scenario, usable_profiles

    scenario = load_scenario(PROJECT_ROOT / "scenarios" / "demo.toml")
    history = pd.read_parquet(data_dir() / "history" / "demo_history.parquet")
    stamps = pd.to_datetime(history["ts"], utc=True)
    window = history[stamps > stamps.max() - pd.Timedelta(hours=336)].copy()
    window["ts"] = (pd.to_datetime(window["ts"], utc=True) + pd.Timedelta(hours=336)).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    frame = window.groupby(["region", "model", "traffic_class", "ts"], as_index=False)["requests"].sum()
    frame = frame.rename(columns={"requests": "mean"})
    frame["mean"] = frame["mean"].astype(float)
    for column, factor in (("q50", 1.0), ("q90", 1.15), ("q95", 1.25), ("q99", 1.45)):
        frame[column] = frame["mean"] * factor
    frame["model_used"] = "history"
    usable = usable_profiles(scenario, load_profiles())
    table = analytic_capacity(usable, analytic_lengths(scenario)[0], kv_fraction=scenario.policy.admission.kv_fraction,
                              policy=scenario.policy.name)
    demand = demand_from_forecast(frame, scenario, scenario.capacity.forecast_quantile, parse_periods("how:4"))
    return build_instance(scenario, demand, load_catalog(), usable, table)


@pytest.mark.slow
def test_the_demo_reaches_one_percent_without_branching(monkeypatch):
    _no_branching(monkeypatch)
    summary = solve.solve_instance(demo_instance(), backend="highs", node_limit=50, time_limit_s=600, gap=0.01)
    assert not summary.time_limit_hits
    assert summary.gap <= 0.01

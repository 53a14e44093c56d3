"""Tensor parallelism as a placement decision: a unit per TP degree, exact dominance, GPUs in the quota.

One region, one origin and one SKU (H100) whose replicas may use 1, 2 or 4 GPUs. Capacities
are table rates before the utilisation cap of 0.5, so a TP 1 replica carries 2 interactive
and 4 batch req/s after it.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pandas as pd
import pytest
from placement_helpers import Case, Region, capacity, catalog, forecast, profiles, scenario_dict

from planner.errors import InfeasibleError
from planner.placement import place_plan
from planner.placement.problem import formulate
from planner.placement.result import plan_frames
from planner.placement.solve import solve_instance
from planner.scenario import parse_scenario, usable_profiles

MODEL = "llama-3.1-8b"
TP1 = {"interactive": 4.0, "batch": 8.0}
PRICES = {("H100", "reserved"): 2.0, ("H100", "on_demand"): 3.0, ("H100", "spot"): 1.0}


def tp_case(caps: dict[int, dict[str, float]], demand: dict[str, list[float]], *, quota: int = 16,
            rules: dict | None = None, tps: list[int] | None = None, prices: dict | None = None) -> Case:
    """H100 replicas of the TP degrees in ``caps`` (table rates per class) in one US region."""
    regions = [Region("aws:us-east-1", "us", {"us-east": 10.0}, dict(prices or PRICES), quota=quota)]
    hours = max(len(v) for v in demand.values())
    scenario = parse_scenario(scenario_dict(
        regions, {"us-east": ("us", ["us"])}, {MODEL: ["H100"]},
        {"interactive": {"latency_budget_ms": 50.0}, "batch": {"latency_budget_ms": 100.0, "spot_tolerant": True}},
        capacity={"utilisation_cap": 0.5, "redundancy": 1, **(rules or {})}, horizon=f"{hours}h",
        tps={MODEL: tps} if tps else None))
    table = capacity([(MODEL, "H100", tp, k, rate) for tp, rates in sorted(caps.items()) for k, rate in rates.items()])
    series = {("us-east", MODEL, k): v for k, v in demand.items()}
    return Case(scenario, forecast(series), catalog(regions), profiles([(MODEL, "H100", tp) for tp in sorted(caps)]),
                table)


def _every_unit(case: Case):
    """The instance with the dominance rule switched off: every TP unit kept."""
    with mock.patch("planner.placement.instance._dominating_tp", return_value=None):
        return case.instance()[0]


def _optimum(inst) -> tuple[str, float]:
    summary = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    return summary.status.value, summary.objective


def _tps(inst) -> list[int]:
    return [int(g) for g in inst.unit_gpus]


# --------------------------------------------------------------------------- a unit per TP degree
def test_each_tp_degree_of_a_region_sku_and_model_is_its_own_unit():
    caps = {1: TP1, 2: {"interactive": 10.0, "batch": 16.0}, 4: {"interactive": 24.0, "batch": 32.0}}
    inst, _ = tp_case(caps, {"interactive": [3.0]}, quota=10).instance()
    assert _tps(inst) == [1, 2, 4] and not inst.excluded
    assert [inst.unit_name(u) for u in range(3)] == [("aws:us-east-1", "H100", f"tp{g}", MODEL) for g in (1, 2, 4)]
    assert inst.unit_max_replicas.tolist() == [10, 5, 2]  # ⌊quota / TP⌋
    assert inst.unit_cap_rps.tolist() == [[0.5 * caps[g][k] for k in inst.classes] for g in (1, 2, 4)]
    # one price per GPU-hour: a replica of TP g costs g times as much
    assert np.array_equal(inst.unit_price[0], inst.unit_price[1]) and np.array_equal(inst.unit_price[0],
                                                                                     inst.unit_price[2])


def test_the_scenario_s_tp_degrees_and_engine_choose_the_profile_rows():
    case = tp_case({1: TP1, 2: TP1, 4: TP1, 8: TP1}, {"interactive": [1.0]}, tps=[1, 4])
    other_engine = profiles([(MODEL, "H100", 2)], engine="sglang")
    rows = usable_profiles(case.scenario, pd.concat([case.profiles, other_engine], ignore_index=True))
    assert rows[["tp_degree", "engine"]].values.tolist() == [[1, "vllm"], [4, "vllm"]]


def test_profile_rows_of_several_engines_give_one_unit_per_tp_degree():
    # Identical units would only repeat columns: a larger program with symmetric optima.
    case = tp_case({1: TP1, 2: {"interactive": 10.0, "batch": 16.0}}, {"interactive": [3.0]})
    both = pd.concat([case.profiles, profiles([(MODEL, "H100", 1), (MODEL, "H100", 2)], engine="sglang")],
                     ignore_index=True)
    inst, _ = Case(case.scenario, case.forecast, case.catalog, both, case.capacity).instance()
    assert _tps(inst) == [1, 2] and not inst.excluded


# --------------------------------------------------------------------------- dominance
DOMINATED = {1: TP1, 2: {"interactive": 8.0, "batch": 12.0}}  # two TP 1 replicas carry at least as much
STRONGER = {1: TP1, 2: {"interactive": 10.0, "batch": 12.0}}  # more interactive per GPU than two TP 1 replicas


def test_a_dominated_tp_unit_is_left_out_and_named():
    inst, _ = tp_case(DOMINATED, {"interactive": [3.0]}).instance()
    assert _tps(inst) == [1]
    assert len(inst.excluded) == 1
    region, unit, model, reason = inst.excluded[0]
    assert (region, unit, model) == ("aws:us-east-1", "H100 x2", MODEL)
    assert "dominated by 1 x H100" in reason


@pytest.mark.parametrize("rules", [
    {},
    {"redundancy": 2},
    {"redundancy": 0, "tiers": ["on_demand", "spot"]},
    {"tiers": ["reserved", "spot"], "spot_reliable_fraction": 1.0},
], ids=["base", "redundancy-2", "no-reserved", "reserved-and-spot"])
@pytest.mark.parametrize("demand", [
    {"interactive": [3.0, 7.5, 1.0], "batch": [6.0, 0.0, 11.0]},
    {"interactive": [0.0, 0.0, 0.0], "batch": [5.0, 12.0, 3.0]},
], ids=["mixed", "batch-only"])
def test_leaving_out_a_dominated_tp_unit_keeps_the_optimum(rules, demand):
    case = tp_case(DOMINATED, demand, quota=7, rules=rules)
    inst, every = case.instance()[0], _every_unit(case)
    assert (_tps(inst), _tps(every)) == ([1], [1, 2])
    with_it, without = _optimum(every), _optimum(inst)
    assert with_it[0] == without[0] == "optimal"
    assert without[1] == pytest.approx(with_it[1], rel=1e-9, abs=1e-9)


def test_switching_cost_keeps_a_larger_tp_unit_that_switches_fewer_replicas():
    """Switching is charged per on-demand replica: one TP 2 replica switches once where the two
    TP 1 replicas that carry as much switch twice, so a plan with the larger replica can be
    cheaper and the dominance rule must not leave it out."""
    exactly_double = {1: TP1, 2: {"interactive": 8.0, "batch": 16.0}}
    rules = {"tiers": ["on_demand"], "redundancy": 0, "switching_cost_usd": 0.5, "min_replicas_per_pool": 1}
    case = tp_case(exactly_double, {"batch": [8.0, 0.0, 8.0, 0.0]}, rules=rules)
    inst, every = case.instance()[0], _every_unit(case)
    # TP 1: 2 + 0 + 2 + 0 replicas, 6 switched: 4 GPU-h x 3 USD + 6 x 0.5 = 15 USD;
    # TP 2: 1 + 0 + 1 + 0 replicas, 3 switched: 12 + 1.5 = 13.5 USD (plus under a cent of latency tie-break)
    assert _optimum(every)[1] == pytest.approx(13.5, abs=0.01)
    assert _tps(inst) == [1, 2]
    assert _optimum(inst)[1] == pytest.approx(13.5, abs=0.01)
    # without switching cost (or without the on-demand tier) the rule applies again
    free = tp_case(exactly_double, {"batch": [8.0, 0.0, 8.0, 0.0]}, rules={**rules, "switching_cost_usd": 0.0})
    assert _tps(free.instance()[0]) == [1]
    reserved = tp_case(exactly_double, {"batch": [8.0, 0.0, 8.0, 0.0]}, rules={**rules, "tiers": ["reserved"]})
    assert _tps(reserved.instance()[0]) == [1]


def test_a_tp_unit_that_carries_more_per_gpu_stays_and_is_used():
    case = tp_case(STRONGER, {"interactive": [5.0, 5.0]}, rules={"min_replicas_per_pool": 1})
    inst, _ = case.instance()
    assert _tps(inst) == [1, 2] and not inst.excluded
    # 5 interactive req/s: one TP 2 replica (5 after the cap, 2 GPUs) instead of three TP 1 replicas (3 GPUs)
    status, cost = _optimum(inst)
    tp1_only = _optimum(inst.restricted(inst.unit_gpus == 1))
    assert status == tp1_only[0] == "optimal" and cost < tp1_only[1]
    summary = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    plan, _, _ = plan_frames(inst, summary.fleet)
    assert set(plan["tp_degree"]) == {2} and set(plan["gpus"]) == {2}


# --------------------------------------------------------------------------- the quota is in GPUs
def test_the_quota_counts_tp_times_replicas_gpus():
    only_tp2 = {2: {"interactive": 8.0, "batch": 16.0}}  # one replica carries 4 interactive req/s after the cap
    inst, _ = tp_case(only_tp2, {"interactive": [8.0]}, quota=5).instance()
    assert inst.unit_max_replicas.tolist() == [2]  # ⌊5 / 2⌋
    quota_rows = (milp := formulate(inst, budget=False, cuts=False)).rows["quota"]
    assert set(milp.A[quota_rows.start:quota_rows.stop].data.tolist()) == {2.0}  # TP GPUs per replica
    # two replicas (4 GPUs) fit the quota of 5 GPUs ...
    case = tp_case(only_tp2, {"interactive": [8.0]}, quota=5)
    result = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                        gap=0.0, baselines=False, periods="hourly")
    assert result.plan[["replicas", "gpus"]].sum().tolist() == [2, 4]
    # ... a third (6 GPUs) does not, though 3 replicas are below 5
    more = tp_case(only_tp2, {"interactive": [9.0]}, quota=5)
    with pytest.raises(InfeasibleError, match="quota"):
        place_plan(more.scenario, more.forecast, more.catalog, more.profiles, capacity=more.capacity, gap=0.0,
                   baselines=False, periods="hourly")


def test_tp_units_of_one_region_and_sku_share_its_quota():
    inst, _ = tp_case(STRONGER, {"interactive": [6.0], "batch": [3.0]}, quota=4).instance()
    summary = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    assert summary.status.value == "optimal"
    gpus = summary.fleet.replicas.sum(axis=1) * inst.unit_gpus[:, None]  # [u, t]
    assert gpus.sum(axis=0).max() <= 4
    plan, _, _ = plan_frames(inst, summary.fleet)
    assert (plan["gpus"] == plan["replicas"] * plan["tp_degree"]).all()
    # 11 interactive req/s needs more than 4 GPUs (two TP 2 replicas carry 10), though each unit
    # alone could use the whole quota: the 4 GPUs are shared
    crowded, _ = tp_case(STRONGER, {"interactive": [11.0]}, quota=4).instance()
    assert crowded.unit_max_replicas.tolist() == [4, 2]
    assert solve_instance(crowded, backend="highs", time_limit_s=30, gap=0.0,
                          strategy="direct").status.value == "infeasible"

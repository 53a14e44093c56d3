"""Blocks by model and component: the split is exact, and the cut rows keep every plan.

* The components of a model's origin–region graph follow residency and latency.
* Solved as components (side by side, with the rounded capacity cuts in the search and
  the cut-LP-guided warm start), a two-zone instance has the same optimum as the single
  joint MILP, and the proven bound never exceeds it.
* On tiny random instances (those of ``test_placement_oracle``), the MILP with the cut
  rows has the exact optimum of the MILP without them (solved to a zero gap), its LP
  relaxation stays at or below it, and the warm start returns a feasible plan that costs
  at least that much. The cut LP also stays
  at or below the exhaustive oracle's optimum. (The reference is the exact MILP optimum
  because on a few instances with redundancy 0 the MILP asks for a steady replica in
  every period of a serving region, where the oracle asks for one only when N ≥ 1.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from placement_helpers import Region, capacity, catalog, forecast, profiles, scenario_dict
from test_placement_oracle import oracle, tiny_cases

from planner.placement import highs_backend
from planner.placement import solve as solve_module
from planner.placement.components import components, split
from planner.placement.heuristics import warm_start
from planner.placement.instance import build_instance
from planner.placement.limits import SafetyNet
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.placement.problem import formulate
from planner.placement.result import fleet_cost
from planner.placement.solve import solve_instance
from planner.placement.strengthen import group_cuts
from planner.scenario import parse_scenario

PRICES = {("L4", "reserved"): 0.5, ("L4", "on_demand"): 1.0, ("L4", "spot"): 0.3,
          ("H100", "reserved"): 2.5, ("H100", "on_demand"): 4.0, ("H100", "spot"): 1.5}


def two_zone_instance(eu_residency: list[str], hours: int = 6):
    """us-east users (US only) and eu-west users (``eu_residency``), one region per zone, two models."""
    regions = [
        Region("aws:us-east-1", "us", {"us-east": 10.0, "eu-west": 80.0}, dict(PRICES), quota=64),
        Region("gcp:europe-west4", "eu", {"us-east": 90.0, "eu-west": 12.0},
               {key: 0.9 * value for key, value in PRICES.items()}, quota=64),
        Region("nebius:eu-north1", "eu", {"us-east": 110.0, "eu-west": 38.0},
               {key: 0.8 * value for key, value in PRICES.items() if key[0] == "H100"}, quota=16),
    ]
    scenario = parse_scenario(scenario_dict(
        regions,
        {"us-east": ("us", ["us"]), "eu-west": ("eu", eu_residency)},
        {"llama-3.1-8b": ["L4", "H100"], "llama-3.1-70b": ["H100"]},
        {"interactive": {"latency_budget_ms": 50.0}, "batch": {"latency_budget_ms": 200.0, "spot_tolerant": True}},
        capacity={"utilisation_cap": 0.5, "redundancy": 2, "switching_cost_usd": 3.0},
        horizon=f"{hours}h",
    ))
    wave = [1.0, 2.5, 4.0, 3.0, 1.5, 0.5][:hours]
    demand = {}
    for origin, scale in (("us-east", 1.0), ("eu-west", 0.7)):
        for model, factor in (("llama-3.1-8b", 1.0), ("llama-3.1-70b", 0.4)):
            demand[(origin, model, "interactive")] = [scale * factor * v for v in wave]
            demand[(origin, model, "batch")] = [scale * factor * 0.6 * v for v in reversed(wave)]
    profile_rows = [("llama-3.1-8b", "L4", 1), ("llama-3.1-8b", "H100", 1), ("llama-3.1-70b", "H100", 2)]
    caps = capacity([(m, s, tp, k, rate * (3.0 if s == "H100" else 1.0) * (0.25 if m == "llama-3.1-70b" else 1.0))
                     for m, s, tp in profile_rows for k, rate in (("interactive", 2.0), ("batch", 4.0))])
    frame = demand_from_forecast(forecast(demand), scenario, 0.95, parse_periods("hourly"))
    return build_instance(scenario, frame, catalog(regions), profiles(profile_rows), caps)


def test_components_follow_residency():
    inst = two_zone_instance(["eu"])
    m = inst.models.index("llama-3.1-8b")
    found = components(inst, m)
    assert [tuple(inst.regions[r] for r in regions) for regions, _ in found] == [
        ("aws:us-east-1",), ("gcp:europe-west4", "nebius:eu-north1")]
    assert [[inst.origins[o] for o, _ in pairs] for _, pairs in found] == [["us-east"] * 2, ["eu-west"] * 2]
    parts = split(inst, m)
    assert [len(p.units) for p in parts] == [2, 3]
    assert sum(p.inst.demand_rps.sum() for p in parts) == pytest.approx(inst.demand_rps[:, m].sum())
    # EU users that may also be served in the US join the two zones into one block
    joined = two_zone_instance(["eu", "us"])
    assert len(components(joined, m)) == 1
    assert len(split(joined, m)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("eu_residency", [["eu"], ["eu", "us"]])
def test_components_have_the_joint_optimum(eu_residency):
    inst = two_zone_instance(eu_residency)
    joint = solve_instance(inst, backend="highs", time_limit_s=60, gap=0.0, strategy="direct")
    parts = solve_instance(inst, backend="highs", time_limit_s=60, gap=0.0, strategy="decomposed")
    assert joint.status.value == "optimal" and parts.status.value == "optimal"
    assert parts.objective == pytest.approx(joint.objective, rel=1e-6)
    assert parts.bound <= joint.objective * (1 + 1e-6)
    assert sum(fleet_cost(inst, parts.fleet)) == pytest.approx(sum(fleet_cost(inst, joint.fleet)), rel=1e-4)
    if eu_residency == ["eu"]:
        assert len(parts.blocks) == 4 and all(block.regions for block in parts.blocks)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases())
def test_cut_rows_and_warm_start_keep_the_exact_optimum(inst):
    milp = formulate(inst, budget=False, cuts=False)
    exact = highs_backend.solve(milp, time_limit_s=30, gap=0.0)
    cut = group_cuts(milp)
    solved = highs_backend.solve(cut, time_limit_s=30, gap=0.0)
    if exact.status.value == "infeasible":
        assert solved.status.value == "infeasible"
        return
    assert exact.status.value == "optimal"
    expected = exact.objective
    tol = 1e-6 * max(1.0, expected)
    assert solved.objective == pytest.approx(expected, rel=1e-6, abs=1e-6)
    lp = highs_backend.solve(cut.relaxed(), time_limit_s=30, gap=0.0)
    assert lp.objective <= expected + tol
    plain_lp = highs_backend.solve(milp.relaxed(), time_limit_s=30, gap=0.0)
    if "y" not in milp.cols:
        return
    start = warm_start(milp, plain_lp, "highs", 0.0, 200, SafetyNet.starting_now(60))
    if start is None:
        return
    assert start.objective >= expected - tol
    assert np.all(milp.A @ start.x <= milp.row_hi + 1e-6)
    assert np.all(milp.A @ start.x >= milp.row_lo - 1e-6)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases())
def test_cut_lp_bound_is_below_the_exhaustive_optimum(inst):
    expected = oracle(inst)
    if math.isinf(expected):
        return
    cut = group_cuts(formulate(inst, budget=False, cuts=False))
    lp = highs_backend.solve(cut.relaxed(), time_limit_s=30, gap=0.0)
    assert lp.objective <= expected + 1e-6 * max(1.0, expected)


def test_a_branch_the_safety_net_stops_keeps_the_warm_start(monkeypatch):
    """Branch and bound runs where the net can stop it; a stopped search keeps the block's
    warm start and says so, as a plan that may not reproduce."""
    deadlines = []

    def stopped_at_deadline(fn, tasks, workers, progress, deadline=None):
        if deadline is None:  # the warm starts: run here
            return [fn(task) for task in tasks]
        deadlines.append(deadline)
        return [None] * len(tasks)  # every search still running when the net expired

    monkeypatch.setattr(solve_module, "run_processes", stopped_at_deadline)
    monkeypatch.setattr(solve_module, "SUPERVISED_INTEGERS", 0)
    inst = two_zone_instance(["eu"])
    net = SafetyNet.starting_now(600)
    summary = solve_instance(inst, backend="highs", gap=0.0, strategy="decomposed", net=net)
    assert deadlines == [net.deadline + solve_module.STOP_GRACE_S]
    stopped = [block for block in summary.blocks if solve_module.BRANCH_HIT in block.time_limit_hits]
    assert stopped and summary.status.value == "time_limit_with_incumbent"
    assert all(block.objective == block.heuristic_objective for block in stopped)
    assert all(block.status.value == "time_limit_with_incumbent" for block in stopped)
    assert summary.fleet is not None and not summary.reproducible

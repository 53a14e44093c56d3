"""The period relaxation: a valid lower bound, a feasible plan, and a plan for every block the net cuts short.

Oracles: the relaxation is a relaxation of the block's LP relaxation, so its value is at
most the LP's optimum, itself at most the MILP's; the plan it guides must keep every row
and integer and cost at least the MILP's optimum. A block whose LP the safety net stops,
or whose warm start the net leaves no time to price, must still come back with a plan.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_placement_decomposition import two_zone_instance
from test_placement_oracle import tiny_cases
from test_placement_steady import _holds

from planner.placement import highs_backend
from planner.placement.limits import SafetyNet
from planner.placement.period_relaxation import plan_by_period
from planner.placement.problem import formulate
from planner.placement.solve import solve_block
from planner.placement.status import SolveOutcome, SolveStatus


def _all_models(inst):
    return formulate(inst, tuple(range(len(inst.models))), budget=False, cuts=False)


def _tolerance(value: float) -> float:
    return 1e-6 * max(1.0, abs(value))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases())
def test_on_tiny_instances_the_bound_is_under_the_lp_and_the_plan_keeps_every_row(inst):
    milp = _all_models(inst)
    exact = highs_backend.solve(milp, time_limit_s=60, gap=0.0)
    lp = highs_backend.solve(milp.relaxed(), time_limit_s=60, gap=0.0)
    plan, bound = plan_by_period(milp, SafetyNet.starting_now(60))
    if bound == math.inf:  # a period alone is infeasible: so is the block
        assert exact.x is None and plan is None
        return
    if exact.x is None:
        assert plan is None  # no plan where the block has none
        return
    assert bound <= lp.objective + _tolerance(lp.objective)
    assert lp.objective <= exact.objective + _tolerance(exact.objective)
    if plan is not None:
        assert _holds(milp, plan.x)
        assert plan.objective == pytest.approx(float(milp.c @ plan.x) + milp.offset)
        assert plan.objective >= exact.objective - _tolerance(exact.objective)


def test_the_bound_is_finite_and_the_plan_is_found_on_two_zones():
    milp = _all_models(two_zone_instance(["eu"]))
    exact = highs_backend.solve(milp, time_limit_s=60, gap=0.0)
    plan, bound = plan_by_period(milp, SafetyNet.starting_now(60))
    assert plan is not None and _holds(milp, plan.x)
    assert 0.5 * exact.objective < bound <= exact.objective <= plan.objective + _tolerance(plan.objective)


def test_a_block_whose_lp_the_net_stops_is_planned_by_period(monkeypatch):
    milp = _all_models(two_zone_instance(["eu"]))
    exact = highs_backend.solve(milp, time_limit_s=60, gap=0.0)
    solve = highs_backend.LoadedLp.solve
    calls = []

    def first_stopped(self, time_limit_s):
        calls.append(time_limit_s)
        if len(calls) == 1:  # the block's LP relaxation, stopped with no point
            return SolveOutcome(SolveStatus.ERROR, "highs", message="Time limit reached", hit_time_limit=True)
        return solve(self, time_limit_s)

    monkeypatch.setattr(highs_backend.LoadedLp, "solve", first_stopped)
    outcome = solve_block(milp, ("m",), backend="highs", gap=0.0, node_limit=100, net=SafetyNet.starting_now(600))
    assert outcome.status == SolveStatus.TIME_LIMIT_WITH_INCUMBENT
    assert "the LP relaxation" in outcome.time_limit_hits
    assert _holds(milp, outcome.x)
    assert outcome.bound <= exact.objective + _tolerance(exact.objective) <= outcome.objective + 1e-3


def test_a_block_the_net_leaves_no_time_to_price_still_gets_a_plan():
    milp = _all_models(two_zone_instance(["eu"]))
    expired = SafetyNet(deadline=time.monotonic() - 1.0)
    outcome = solve_block(milp, ("m",), backend="highs", gap=0.0, node_limit=100, net=expired, branch=False)
    assert outcome.x is not None and outcome.status.has_solution
    assert _holds(milp, outcome.x)
    assert any(hit.endswith("skipped") for hit in outcome.time_limit_hits)
    assert np.isfinite(outcome.bound) and outcome.bound <= outcome.objective

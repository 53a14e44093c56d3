"""One test class, run against every registered backend (hidden ones too): same problems,
objectives agree within the gap.

The reference is the direct HiGHS path. Each backend also has to report infeasibility as
a status value (never an exception or an assert), and its plan has to pass check_plan. One
case has two TP degrees of one (region, SKU) sharing its quota.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from placement_helpers import two_region_case

from planner.placement.backends import BACKENDS, HIDDEN_BACKENDS
from planner.placement.check import check_plan
from planner.placement.result import plan_frames
from planner.placement.solve import solve_instance
from planner.placement.status import SolveStatus

GAP = 1e-4
CASES = {
    "basic": {},
    "redundancy-2": {"capacity_rules": {"redundancy": 2}},
    "switching": {"capacity_rules": {"switching_cost_usd": 1.5}},
    "no-spot": {"capacity_rules": {"tiers": ["reserved", "on_demand"]}},
    "tight-quota": {"quota": 3},
    # replicas of two H100s that carry more per GPU than one: a second unit of the same (region,
    # SKU), sharing its quota of 3 GPUs with the one-GPU replicas
    "two-tp": {"demand": {("us-east", "llama-3.1-8b", "interactive"): [10.0, 14.0, 6.0],
                          ("us-east", "llama-3.1-8b", "batch"): [8.0, 0.0, 12.0]},
               "h100_tp2": (24.0, 40.0), "capacity_rules": {"switching_cost_usd": 1.5}, "quota": 3},
}


def _solve(case_name: str, backend: str):
    case = two_region_case(**CASES[case_name])
    inst, demand = case.instance()
    return case, demand, inst, solve_instance(inst, backend=backend, time_limit_s=60, gap=GAP, strategy="direct")


@pytest.fixture(scope="module")
def reference() -> dict[str, float]:
    return {name: _solve(name, "highs")[3].objective for name in CASES}


@pytest.mark.parametrize("backend", [*BACKENDS, *HIDDEN_BACKENDS])
class TestEveryBackend:
    @pytest.mark.parametrize("case_name", sorted(CASES))
    def test_objective_agrees_with_the_reference(self, backend, case_name, reference):
        case, demand, inst, summary = _solve(case_name, backend)
        assert summary.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE_WITHIN_GAP), summary.message
        assert summary.objective == pytest.approx(reference[case_name], rel=2 * GAP, abs=1e-6)
        plan, flows, loads = plan_frames(inst, summary.fleet)
        if case_name == "two-tp":
            assert 2 in set(plan["tp_degree"])
        report = check_plan(plan, flows, loads, scenario=case.scenario, catalog=case.catalog,
                            profiles=case.profiles, capacity=case.capacity, demand=demand)
        assert report.ok, report.violations

    def test_infeasible_is_a_status(self, backend):
        case = two_region_case(quota=1)
        inst, _ = case.instance()
        crowded = replace(inst, demand_rps=inst.demand_rps * 50)
        summary = solve_instance(crowded, backend=backend, time_limit_s=30, gap=GAP, strategy="direct")
        assert summary.status == SolveStatus.INFEASIBLE
        assert summary.fleet is None

    def test_bound_never_exceeds_the_objective(self, backend):
        _, _, _, summary = _solve("switching", backend)
        assert np.isfinite(summary.bound)
        assert summary.bound <= summary.objective + 1e-6

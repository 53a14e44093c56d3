"""Steady on-demand replicas made reserved: never dearer, never infeasible, and it finds them.

An optimal plan's reserved replicas, moved to on-demand in every period, leave a plan with
the same replicas at a higher price and the same rows. Moving them back is what
:func:`reserve_steady_replicas` is for: it must recover at least the optimum's saving,
keep every row and integer, and leave an optimal plan no dearer. Where the sustained
commitment row forbids a reserved replica that only an idle floor would use, it must not
add one.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_placement_decomposition import two_zone_instance
from test_placement_oracle import tiny_cases

from planner.placement import highs_backend
from planner.placement.milp import Milp
from planner.placement.problem import formulate
from planner.placement.solve import solve_instance
from planner.placement.steady import reserve_steady_replicas


def _holds(milp: Milp, x: np.ndarray) -> bool:
    level = milp.A @ x
    rows = (level >= milp.row_lo - 1e-6) & (level <= milp.row_hi + 1e-6)
    cols = (x >= milp.col_lo - 1e-6) & (x <= milp.col_hi + 1e-6)
    whole = np.abs(x[milp.integer] - np.rint(x[milp.integer])) <= 1e-9
    return bool(rows.all() and cols.all() and whole.all())


def _reserved_moved_to_on_demand(milp: Milp, x: np.ndarray) -> np.ndarray:
    R, D = milp.cols["R"], milp.cols["D"]
    moved = x.copy()
    for i, u in enumerate(R.index["u"]):
        on_demand = D.start + np.flatnonzero(D.index["u"] == u)
        if on_demand.size == milp.instance.n_periods:  # offered on demand in every period
            moved[on_demand] += x[R.start + i]
            moved[R.start + i] = 0.0
    return moved


@pytest.fixture(scope="module")
def solved():
    summary = solve_instance(two_zone_instance(["eu"]), backend="highs", time_limit_s=60, gap=0.0,
                             strategy="direct")
    (block,) = summary.blocks
    return block.milp, block.x


def test_an_optimal_plan_is_left_no_dearer(solved):
    milp, x = solved
    again = reserve_steady_replicas(milp, x)
    assert _holds(milp, again)
    assert milp.c @ again <= milp.c @ x + 1e-6


def test_reserved_replicas_run_on_demand_are_bought_back(solved):
    milp, x = solved
    R = milp.cols["R"]
    assert x[R.start:R.stop].sum() >= 1  # the optimum reserves, so there is something to move
    on_demand = _reserved_moved_to_on_demand(milp, x)
    assert _holds(milp, on_demand) and milp.c @ on_demand > milp.c @ x + 1.0
    back = reserve_steady_replicas(milp, on_demand)
    assert _holds(milp, back)
    assert milp.c @ back <= milp.c @ x + 1e-6
    assert (back[R.start:R.stop] >= x[R.start:R.stop]).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases())
def test_on_tiny_instances_every_row_holds_and_no_plan_gets_dearer(inst):
    milp = formulate(inst, tuple(range(len(inst.models))), budget=False, cuts=False)
    exact = highs_backend.solve(milp, time_limit_s=60, gap=0.0)
    if exact.x is None:
        return  # infeasible instance: no plan to improve
    for plan in (exact.x, _reserved_moved_to_on_demand(milp, exact.x)):
        assert _holds(milp, plan)
        improved = reserve_steady_replicas(milp, plan)
        assert _holds(milp, improved)
        assert milp.c @ improved <= milp.c @ plan + 1e-6
        assert milp.c @ improved >= exact.objective - milp.offset - 1e-6 * max(1.0, abs(exact.objective))

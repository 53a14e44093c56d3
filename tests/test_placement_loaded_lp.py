"""The LP kept loaded in HiGHS: re-solves from a basis give the cold optimum, and its
reduced costs bound the reserved-vector descent's moves.

* Adding the rounded capacity cuts to the solved LP and re-solving gives the cut LP's
  optimum, as solving the cut LP from scratch does.
* With R fixed, the reduced cost g_i of R_i is a subgradient of the LP's value V (convex
  in R): it lies between V's one-sided derivatives, and V(R ± e_i) ≥ V(R) ± g_i for every
  unit, the rule by which the descent skips moves it need not price (``heuristics._descend``).
* Each re-solve gets the whole time limit it is handed, although HiGHS counts its limit
  on one clock over all of the object's solves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from test_placement_decomposition import two_zone_instance
from test_placement_oracle import tiny_cases

from planner.placement import highs_backend
from planner.placement.problem import formulate
from planner.placement.status import SolveStatus
from planner.placement.strengthen import group_cuts


def _value(outcome) -> float:
    return outcome.objective if outcome.status == SolveStatus.OPTIMAL else math.inf


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases())
def test_rows_added_to_a_solved_lp_give_the_cold_optimum(inst):
    milp = formulate(inst, budget=False, cuts=False)
    cold_lp = highs_backend.solve(milp.relaxed(), time_limit_s=30, gap=0.0)
    cold_cut = highs_backend.solve(group_cuts(milp).relaxed(), time_limit_s=30, gap=0.0)
    loaded = highs_backend.LoadedLp(milp.relaxed())
    lp = loaded.solve(30)
    assert lp.status == cold_lp.status
    if cold_lp.status != SolveStatus.OPTIMAL:
        return
    assert lp.objective == pytest.approx(cold_lp.objective, rel=1e-7, abs=1e-7)
    loaded.add_rows(group_cuts(milp).relaxed())
    cut = loaded.solve(30)
    assert cut.status == cold_cut.status == SolveStatus.OPTIMAL
    assert cut.objective == pytest.approx(cold_cut.objective, rel=1e-7, abs=1e-7)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases())
def test_reduced_costs_of_fixed_reserved_columns_bound_each_move(inst):
    milp = formulate(inst, budget=False, cuts=False)
    if "R" not in milp.cols:
        return
    loaded = highs_backend.LoadedLp(group_cuts(milp).relaxed())
    lp = loaded.solve(30)
    if lp.status != SolveStatus.OPTIMAL:
        return
    r = milp.cols["R"]
    index = np.arange(r.start, r.stop)
    lo, hi = milp.col_lo[index], milp.col_hi[index]
    rounded = np.clip(np.ceil(lp.x[index] - 0.35), lo, hi)
    checked = 0
    # the LP's rounding, and one replica more of every unit: there reserving is dear, slopes positive
    for reserved in (rounded, np.minimum(rounded + 1, hi)):
        loaded.set_bounds(index, reserved, reserved)
        base = _value(loaded.solve(30))
        if math.isinf(base):
            continue
        slope = loaded.reduced_costs(index)
        for i in range(r.size):
            # one-sided derivatives of V around R, from a small fractional step: d⁻ ≤ g_i ≤ d⁺
            for side in (-1.0, 1.0):
                moved = reserved.copy()
                moved[i] += side * 1e-3
                if not lo[i] <= moved[i] <= hi[i]:
                    continue
                loaded.set_bounds(index, moved, moved)
                value = _value(loaded.solve(30))
                if math.isfinite(value):
                    assert (value - base) / 1e-3 >= side * slope[i] - 1e-4 * max(1.0, abs(slope[i]))
            for step in (-1.0, 1.0):
                moved = reserved.copy()
                moved[i] += step
                if not lo[i] <= moved[i] <= hi[i]:
                    continue
                loaded.set_bounds(index, moved, moved)
                value = _value(loaded.solve(30))
                assert value >= base + step * slope[i] - 1e-6 * max(1.0, abs(base))
                checked += 1
    assume(checked > 0)  # hypothesis fails the test if no example had a move to check


def test_each_solve_gets_its_own_time_limit_not_what_is_left_of_the_first():
    """HiGHS counts its time limit from the object's first solve; a loaded LP solved many times
    must still give each solve the whole limit it is handed."""
    milp = group_cuts(formulate(two_zone_instance(["eu"], hours=6), (0, 1), budget=False, cuts=False)).relaxed()
    loaded = highs_backend.LoadedLp(milp)
    R = milp.cols["R"]
    for turn in range(300):  # build up the object's run time (about 0.5 s), moving the LP each time
        upper = milp.col_hi[R.start:R.stop] if turn % 2 else np.zeros(R.size)  # no reserved: all on demand
        loaded.set_bounds(np.arange(R.start, R.stop), np.zeros(R.size), upper)
        assert loaded.solve(60.0).status == SolveStatus.OPTIMAL
    used = loaded.highs.getRunTime()
    assert used > 0
    loaded.set_bounds(np.arange(R.start, R.stop), np.zeros(R.size), np.zeros(R.size))
    again = loaded.solve(used / 2)  # one of the 300 moves again: far quicker than half their time
    assert again.status == SolveStatus.OPTIMAL and not again.hit_time_limit

"""The LP kept loaded in HiGHS: re-solves from a basis give the cold optimum, and its
reduced costs bound the reserved-vector descent's moves.

* Adding the rounded capacity cuts to the solved LP and re-solving gives the cut LP's
  optimum, as solving the cut LP from scratch does.
* With R fixed, the reduced cost g_i of R_i is a subgradient of the LP's value V (convex
  in R): it lies between V's one-sided derivatives, and V(R ± e_i) ≥ V(R) ± g_i for every
  unit, and V(R − e_i + e_j) ≥ V(R) − g_i + g_j for a replica moved between two units of a region:
  the rule by which the descent skips moves it need not price (``heuristics._descend``).
* Each re-solve gets the whole time limit it is handed, although HiGHS counts its limit
  on one clock over all of the object's solves.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from test_placement_decomposition import two_zone_instance
from test_placement_oracle import tiny_cases

from planner.placement import highs_backend
from planner.placement.heuristics import _descend, _moves
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
        for move in _moves(milp, np.ones(r.size, dtype=bool)):
            moved = reserved + move
            if (moved < lo).any() or (moved > hi).any():
                continue
            loaded.set_bounds(index, moved, moved)
            value = _value(loaded.solve(30))
            # a swap moves two units at once: V(R + δ) ≥ V(R) + g · δ all the same
            assert value >= base + float(slope @ move) - 1e-6 * max(1.0, abs(base))
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


class _ConvexValue:
    """A stand-in for the reserved-vector LP: a convex V(R) with its gradient as the slope."""

    def __init__(self, value) -> None:
        self.f = value
        self.priced: list[tuple[float, ...]] = []

    exhausted = False

    def value(self, reserved: np.ndarray) -> float:
        self.priced.append(tuple(reserved))
        return float(self.f(reserved))

    def slope(self, reserved: np.ndarray) -> None:
        return None  # every move is priced


def _reserved_block(regions: list[int], hi: float = 8.0) -> SimpleNamespace:
    n = len(regions)
    R = SimpleNamespace(start=0, stop=n, size=n, index={"u": np.arange(n)})
    return SimpleNamespace(cols={"R": R}, col_lo=np.zeros(n), col_hi=np.full(n, hi),
                           instance=SimpleNamespace(unit_region=np.array(regions)))


def test_the_descent_moves_a_replica_between_two_units_of_a_region_where_no_single_step_improves():
    """A region's floor of two replicas met by one small and one large unit: from two small ones,
    adding or removing one replica costs more, and only the swap reaches the optimum (1, 1)."""
    def value(r: np.ndarray) -> float:
        return 10 * abs(r[0] + r[1] - 2) + (r[0] - 1) ** 2 + (r[1] - 1) ** 2

    lp = _ConvexValue(value)
    best = _descend_to_rest(_reserved_block([0, 0]), lp, np.array([2.0, 0.0]))
    assert tuple(best) == (1.0, 1.0)
    # units of different regions never swap: each region keeps its own replicas
    lp = _ConvexValue(value)
    assert tuple(_descend_to_rest(_reserved_block([0, 1]), lp, np.array([2.0, 0.0]))) == (2.0, 0.0)
    assert (1.0, 1.0) not in lp.priced


def _descend_to_rest(milp, lp: _ConvexValue, start: np.ndarray) -> np.ndarray:
    """The reserved vector with the lowest value the descent priced."""
    _descend(milp, lp, start, np.ones(start.size, dtype=bool))
    return np.array(min(lp.priced, key=lambda r: lp.f(np.array(r))))

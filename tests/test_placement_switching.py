"""On-demand trajectories that keep replicas through dips: the dynamic programme against brute force.

Every integer trajectory within [lower, upper] is enumerated on small cases; the programme's
cost must equal the least of them, and its trajectory must stay within the bounds.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.placement.switching import smooth_trajectory


def _cost(path: np.ndarray, rental: np.ndarray, switch_cost: float) -> float:
    return float(rental @ path + switch_cost * np.abs(np.diff(path)).sum())


def _brute_force(rental: np.ndarray, lower: np.ndarray, upper: np.ndarray, switch_cost: float) -> float:
    ranges = [range(int(lo), int(hi) + 1) for lo, hi in zip(lower, upper, strict=True)]
    return min(_cost(np.array(path), rental, switch_cost) for path in itertools.product(*ranges))


@st.composite
def cases(draw):
    T = draw(st.integers(1, 6))
    lower = np.array(draw(st.lists(st.integers(0, 4), min_size=T, max_size=T)))
    extra = np.array(draw(st.lists(st.integers(0, 3), min_size=T, max_size=T)))
    rental = np.array(draw(st.lists(st.floats(0.0, 5.0, allow_nan=False), min_size=T, max_size=T)))
    switch_cost = draw(st.sampled_from([0.0, 0.5, 1.0, 2.5, 10.0]))
    return rental, lower, lower + extra, switch_cost


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cases())
def test_the_trajectory_is_the_least_cost_one(case):
    rental, lower, upper, switch_cost = case
    path = smooth_trajectory(rental, lower, upper, switch_cost)
    assert np.all(path >= lower) and np.all(path <= upper)
    assert _cost(path, rental, switch_cost) <= _brute_force(rental, lower, upper, switch_cost) + 1e-9


def test_a_short_dip_is_kept_and_a_long_one_is_not():
    # one replica costs 1 per period, a start or stop 2.5: a 2-period dip costs 2 to keep, 5 to switch
    need = np.array([3, 3, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 3])
    path = smooth_trajectory(np.ones(need.size), need, np.full(need.size, 3), 2.5)
    assert path[2:4].tolist() == [3, 3]  # two periods at 2 each: kept
    assert path[6:12].tolist() == [1] * 6  # six periods: switched off and on again
    # where the quota leaves no room the need is followed
    capped = smooth_trajectory(np.ones(need.size), need, need, 2.5)
    assert capped.tolist() == need.tolist()


def test_no_switching_cost_follows_the_need():
    need = np.array([2, 0, 5, 1])
    assert smooth_trajectory(np.ones(4), need, need + 3, 0.0).tolist() == need.tolist()

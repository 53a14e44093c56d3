"""Confidence intervals and the Little's-law helper."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from planner.sim.stats import batch_means, batch_means_ci, littles_law, replication_ci, t_interval


def test_t_interval_matches_scipy() -> None:
    x = np.array([1.0, 2.5, 2.0, 4.0, 3.1])
    ci = t_interval(x)
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert ci.low == pytest.approx(lo) and ci.high == pytest.approx(hi) and ci.n == 5
    assert ci.covers(x.mean())
    assert math.isinf(replication_ci([3.0]).half_width)
    assert replication_ci([3.0, 3.0, 3.0]).half_width == 0.0  # identical replications: no spread, no width
    assert replication_ci([]).n == 0


def test_batch_means_splits_in_order_and_covers_iid_means() -> None:
    np.testing.assert_array_equal(batch_means(np.arange(10.0), 5), [0.5, 2.5, 4.5, 6.5, 8.5])
    rng = np.random.Generator(np.random.PCG64(1))
    hits = sum(batch_means_ci(rng.exponential(2.0, 4_000)).covers(2.0) for _ in range(400))
    assert 0.91 <= hits / 400 <= 0.98  # nominal 95%


def test_littles_law_on_a_deterministic_queue() -> None:
    """D/D/1 with gap 2 and service 1: one job present half of the time, T = 1, lambda = 0.5."""
    a = np.arange(0.0, 200.0, 2.0)
    check = littles_law(a, a + 1.0, 0.0, 198.0)
    assert check.l_time_avg == pytest.approx(0.5, rel=0.01)
    assert check.mean_sojourn == pytest.approx(1.0)
    assert abs(check.relative_residual) < 0.01
    assert math.isnan(littles_law(a, a + 1.0, 5.0, 5.0).relative_residual)

"""Confidence intervals for simulation output, and the Little's-law residual.

Two ways to get an interval, both Student-t at level 1 − α (default 95%):

* **Independent replications.** R runs with independent seeds give i.i.d. estimates
  X_1..X_R; the interval is  X̄ ± t_{R−1, 1−α/2} · s / √R,  s the sample standard
  deviation. Exact for normal X_i, asymptotically right otherwise.
* **Batch means** (one long run). Split the post-warm-up sequence of per-job values
  into B contiguous batches of equal size; the batch means Y_1..Y_B are nearly
  independent when a batch is much longer than the autocorrelation time, so
  Ȳ ± t_{B−1, 1−α/2} · s_Y / √B.  (Law & Kelton, *Simulation Modeling and
  Analysis*, §9.5.3.) B = 20–30 is the usual choice.

Little's law, L = λ·E[T] (Little 1961), checked on a window [t0, t1]:
L̂ = (1/(t1−t0)) ∫_{t0}^{t1} N(t) dt = Σ_j |[a_j, f_j] ∩ [t0, t1]| / (t1 − t0)
(the time-average number in system, all jobs, computed from per-job arrival a_j
and finish f_j), λ̂ = #{a_j ∈ [t0, t1)} / (t1 − t0), and Ê[T] the mean sojourn of
those jobs. The relative residual (L̂ − λ̂Ê[T]) / (λ̂Ê[T]) shrinks like
O(max T / (t1 − t0)) from edge effects; a large one means the records are wrong.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st


@dataclass(frozen=True)
class ConfidenceInterval:
    """A point estimate with its Student-t interval; ``n`` is the number of replications or batches."""

    mean: float
    half_width: float
    n: int
    level: float = 0.95

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high


def t_interval(values: np.ndarray | list[float], level: float = 0.95) -> ConfidenceInterval:
    """Mean and Student-t half-width of i.i.d. estimates (replications, or batch means).

    With a single value the half-width is infinite (no spread to estimate from).
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return ConfidenceInterval(math.nan, math.inf, 0, level)
    mean = float(x.mean())
    if n == 1:
        return ConfidenceInterval(mean, math.inf, 1, level)
    return ConfidenceInterval(mean, float(_t_upper(level, n - 1) * _st.sem(x)), n, level)


@functools.lru_cache(maxsize=256)
def _t_upper(level: float, df: int) -> float:
    """The upper end of the standard t's central interval at ``level`` (a zero spread gives a zero width); kept,
    since a calibration asks for the same few thousands of times."""
    _, upper = _st.t.interval(level, df)
    return float(upper)


def replication_ci(values: np.ndarray | list[float], level: float = 0.95) -> ConfidenceInterval:
    """Interval over independent replications (one estimate per seed)."""
    return t_interval(values, level)


def batch_means(values: np.ndarray, n_batches: int = 20) -> np.ndarray:
    """Means of ``n_batches`` contiguous equal batches (a remainder at the end is dropped)."""
    x = np.asarray(values, dtype=np.float64)
    size = x.size // n_batches
    if size == 0:
        return x.copy()
    return np.asarray(x[: size * n_batches].reshape(n_batches, size).mean(axis=1))


def batch_means_ci(values: np.ndarray, n_batches: int = 20, level: float = 0.95) -> ConfidenceInterval:
    """Batch-means interval for the mean of a single long run's per-job sequence (in job order)."""
    return t_interval(batch_means(values, n_batches), level)


@dataclass(frozen=True)
class LittleCheck:
    """L̂ (time-average number in system), λ̂, Ê[T] and the relative residual on one window."""

    l_time_avg: float
    arrival_rate: float
    mean_sojourn: float
    relative_residual: float


def littles_law(arrival: np.ndarray, finish: np.ndarray, t0: float, t1: float) -> LittleCheck:
    """Little's-law residual on [t0, t1] from per-job arrival and finish times (see module doc).

    Jobs that never finished (finish = NaN or inf) count as present until t1.
    """
    a = np.asarray(arrival, dtype=np.float64)
    f = np.asarray(finish, dtype=np.float64)
    span = t1 - t0
    if not span > 0:
        return LittleCheck(math.nan, math.nan, math.nan, math.nan)
    f_eff = np.where(np.isfinite(f), f, t1)
    overlap = np.clip(np.minimum(f_eff, t1) - np.maximum(a, t0), 0.0, None)
    l_hat = float(overlap.sum() / span)
    inside = (a >= t0) & (a < t1) & np.isfinite(f)
    count = int(inside.sum())
    lam = count / span
    mean_t = float((f[inside] - a[inside]).mean()) if count else math.nan
    target = lam * mean_t
    resid = (l_hat - target) / target if target > 0 else math.nan
    return LittleCheck(l_hat, lam, mean_t, resid)

"""Shared steps of the forecasters that model ``y = log(1 + x)`` with Gaussian forecast errors.

The trailing fit window (cut at the first observed hour), the checks that make a history
unusable, and the back-transform: with a log-scale forecast mean ``m_h`` and variance
``v_h``, the quantiles are ``Q_x(tau) = exp(m_h + z_tau sqrt(v_h)) - 1`` (``x = exp(y) - 1``
is monotone, so quantiles transform exactly), the mean is the log-normal mean
``exp(m_h + v_h / 2) - 1``; all clipped at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from planner.forecast.forecaster import FitFailure, SeriesHistory

MIN_OBSERVED_HOURS = 168


@dataclass(frozen=True)
class LogWindow:
    """The trailing window of one series on the log scale.

    ``y`` is ``log1p`` of the filled series (complete, for methods that need every hour);
    ``observed`` marks the hours really observed; ``history_max`` is the largest observed value.
    """

    y: np.ndarray
    observed: np.ndarray
    t_start_abs: int
    history_max: float

    @property
    def t_end_abs(self) -> int:
        return self.t_start_abs + self.y.size - 1


def log_window(history: SeriesHistory, window_hours: int,
               min_observed_hours: int = MIN_OBSERVED_HOURS) -> LogWindow:
    """The last ``window_hours`` hours from the first observed one; FitFailure when unusable.

    Unusable: fewer than ``min_observed_hours`` observed hours (7 days: one weekly cycle, and
    seven daily ones to estimate the daily shape from), or no variation at all.
    """
    start = max(0, history.n_hours - window_hours)
    observed = history.observed[start:]
    n_observed = int(observed.sum())
    if n_observed < min_observed_hours:
        raise FitFailure(f"only {n_observed} observed hours in the fit window, need {min_observed_hours}")
    first = start + int(np.argmax(observed))
    filled = np.asarray(history.filled[first:], dtype=float)
    observed = history.observed[first:]
    y = np.log1p(np.maximum(filled, 0.0))
    if float(np.std(y[observed])) < 1e-9:
        raise FitFailure("constant series: nothing for a seasonal model to learn")
    return LogWindow(y, observed, history.t_start_abs + first, float(np.max(filled[observed])))


def back_transform(m: np.ndarray, v: np.ndarray, levels: list[float], history_max: float,
                   max_growth_factor: float) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Mean and quantiles on the original scale from the log-scale mean and variance.

    Raises FitFailure when the forecast is not finite or implausible (median path above
    ``max_growth_factor`` times the largest value in the window).
    """
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(v))):
        raise FitFailure("forecast is not finite")
    if float(np.max(np.expm1(m))) > max_growth_factor * max(history_max, 1.0):
        raise FitFailure(f"implausible forecast: median path exceeds {max_growth_factor:g}x the window maximum")
    v = np.maximum(v, 0.0)
    sd = np.sqrt(v)
    mean = np.maximum(np.expm1(m + 0.5 * v), 0.0)
    quants = {lvl: np.maximum(np.expm1(m + float(ndtri(lvl)) * sd), 0.0) for lvl in sorted(levels)}
    return mean, quants

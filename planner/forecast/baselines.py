"""Seasonal-naive baselines (24 h and 168 h): the bar every model must clear, and the fallback.

Point forecast, for a period ``m`` and a series ``x_1..x_T``::

    xhat_{T+h} = x_{T + h - m*k},   k = ceil(h / m)

(the value one period back, or k periods back for horizons beyond one period).

Quantiles come from the in-sample seasonal-naive errors ``e_t = x_t - x_{t-m}``
over the trailing ``error_window_hours`` (pairs where both hours were observed,
not imputed), centred on their median so that the q50 is the point forecast (a
trending or recovering window otherwise shifts the whole band away from the point
forecast). A forecast k periods ahead is a k-step seasonal random walk, whose
error variance grows linearly in k, so::

    Qhat(tau)_{T+h} = max(0, xhat_{T+h} + sqrt(k) * (Q_e(tau) - median(e)))

with ``Q_e`` the empirical error quantile. With fewer than ``MIN_ERROR_PAIRS``
error pairs (a history barely one period long) there is no error distribution to
read, so the spread is relative to the history's own variability: the offsets are
``z_tau * c * xhat`` with ``c`` the coefficient of variation (standard deviation
over mean) of the observed hours, at least ``MIN_RELATIVE_SPREAD``. Either way the
q50 equals the point forecast, so the quantiles are never all zero when the point
forecast is positive. The quantiles are then made monotone in ``tau`` (a running
maximum), so q50 <= q90 <= q95 <= q99 always holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtri

from planner.forecast.forecaster import SeriesForecast, SeriesHistory

DEFAULT_ERROR_WINDOW_HOURS = 8 * 168
MIN_ERROR_PAIRS = 2
MIN_RELATIVE_SPREAD = 0.1


def naive_point(filled: np.ndarray, period: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Point forecast and the number of seasonal steps k for hours 1..horizon."""
    n = filled.size
    if n < period:
        raise ValueError(f"seasonal naive({period}) needs at least {period} hours, got {n}")
    h = np.arange(1, horizon + 1)
    k = -(-h // period)
    idx = n - 1 + h - k * period
    return filled[idx].astype(float), k


def naive_errors(filled: np.ndarray, observed: np.ndarray, period: int,
                 error_window_hours: int = DEFAULT_ERROR_WINDOW_HOURS) -> np.ndarray:
    """In-sample seasonal differences ``x_t - x_{t-period}`` where both hours were observed."""
    lo = max(period, filled.size - error_window_hours)
    t = np.arange(lo, filled.size)
    ok = observed[t] & observed[t - period]
    errors: np.ndarray = filled[t[ok]] - filled[t[ok] - period]
    return errors


def seasonal_naive(filled: np.ndarray, observed: np.ndarray, period: int, horizon: int,
                   levels: list[float],
                   error_window_hours: int = DEFAULT_ERROR_WINDOW_HOURS) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Seasonal-naive mean and quantiles (see the module docstring)."""
    point, k = naive_point(filled, period, horizon)
    errors = naive_errors(filled, observed, period, error_window_hours)
    levels = sorted(levels)
    scale = np.sqrt(k.astype(float))
    if errors.size >= MIN_ERROR_PAIRS:
        centred = np.quantile(errors, levels, method="linear") - np.median(errors)
        offsets = [scale * off for off in centred]
    else:
        spread = relative_spread(filled[observed]) * point
        offsets = [scale * float(ndtri(lvl)) * spread for lvl in levels]
    quants: dict[float, np.ndarray] = {}
    running = np.zeros(horizon)
    for i, (lvl, off) in enumerate(zip(levels, offsets, strict=True)):
        q = np.maximum(point + off, 0.0)
        running = q if i == 0 else np.maximum(running, q)
        quants[lvl] = running.copy()
    return np.maximum(point, 0.0), quants


def relative_spread(values: np.ndarray) -> float:
    """The coefficient of variation of ``values``, at least ``MIN_RELATIVE_SPREAD``."""
    mean = float(np.mean(values)) if values.size else 0.0
    cv = float(np.std(values)) / mean if values.size > 1 and mean > 0 else 0.0
    return max(cv, MIN_RELATIVE_SPREAD)


def model_used_name(period: int) -> str:
    return f"seasonal_naive({period})"


def naive_period(n_hours: int) -> int:
    """The longest seasonal-naive period the history supports: 168, 24, else 1."""
    for period in (168, 24):
        if n_hours >= period:
            return period
    return 1


@dataclass(frozen=True, eq=False)
class SeasonalNaive:
    """The seasonal naive as a :class:`~planner.forecast.forecaster.Forecaster`.

    ``period`` None takes the longest period the fitted history supports
    (:func:`naive_period`), which is what makes it a fallback for any series.
    """

    period: int | None = None
    error_window_hours: int = DEFAULT_ERROR_WINDOW_HOURS
    history: SeriesHistory | None = None

    @property
    def name(self) -> str:
        return "seasonal_naive"

    def fit(self, history: SeriesHistory) -> SeasonalNaive:
        return replace(self, history=history)

    def predict(self, horizon: int, levels: Sequence[float]) -> SeriesForecast:
        if self.history is None:
            raise RuntimeError("SeasonalNaive.predict called before fit")
        period = self.period or naive_period(self.history.filled.size)
        mean, quants = seasonal_naive(self.history.filled, self.history.observed, period, horizon, list(levels),
                                      self.error_window_hours)
        return SeriesForecast(mean, quants, model_used_name(period))

"""Which forecaster a series gets, and why: the seasonal model or a visible fallback.

Rules (each fallback keeps the baseline's own name in ``model_used`` and puts the
reason in the metadata; a fallback never hides behind the model's name):

- fewer than ``spec.min_history_hours`` observed hours (default 336, two weeks:
  the weekly terms need two cycles to be told apart from level changes):
  ``seasonal_naive(168)``, or the longest period that fits (24, then 1 for a
  series under one day);
- the model raised ``FitFailure`` (no ARMA candidate converged, constant series,
  non-finite or implausible forecast) or a numerical error: ``seasonal_naive(168)``.

This function is used both for the final forecast and inside every backtest
window, so the backtest scores exactly what is deployed, fallbacks included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.forecast import baselines
from planner.forecast.model import FitFailure, ModelSpec, fit, forecast


@dataclass
class SeriesForecast:
    """One series' forecast on the original scale, with provenance."""

    mean: np.ndarray
    quantiles: dict[float, np.ndarray]
    model_used: str
    fallback_reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def naive_period(n_hours: int) -> int:
    """The longest seasonal-naive period the history supports: 168, 24, else 1."""
    for period in (168, 24):
        if n_hours >= period:
            return period
    return 1


def naive_forecast(filled: np.ndarray, observed: np.ndarray, horizon: int, levels: list[float],
                   reason: str, period: int | None = None) -> SeriesForecast:
    period = period or naive_period(filled.size)
    mean, quants = baselines.seasonal_naive(filled, observed, period, horizon, levels)
    return SeriesForecast(mean, quants, baselines.model_used_name(period), fallback_reason=reason)


def forecast_series(values: np.ndarray, filled: np.ndarray, observed: np.ndarray, t_start_abs: int,
                    horizon: int, levels: list[float], spec: ModelSpec) -> SeriesForecast:
    """Fit the seasonal model, or fall back visibly (see the module docstring)."""
    n_observed = int(observed.sum())
    if n_observed < spec.min_history_hours:
        return naive_forecast(filled, observed, horizon, levels,
                              f"history too short: {n_observed} observed hours < {spec.min_history_hours}")
    try:
        fitted = fit(values, t_start_abs, spec)
        mean, quants = forecast(fitted, horizon, levels, max_growth_factor=spec.max_growth_factor)
    except FitFailure as exc:
        return naive_forecast(filled, observed, horizon, levels, f"fit failed: {exc}")
    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
        return naive_forecast(filled, observed, horizon, levels,
                              f"fit failed: {type(exc).__name__}: {str(exc)[:200]}")
    return SeriesForecast(mean, quants, fitted.model_used, details=fitted.describe())

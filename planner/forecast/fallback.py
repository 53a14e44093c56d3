"""Which forecast a series gets, and why: the selected forecaster's or a visible fallback.

Rules (each fallback keeps the baseline's own name in ``model_used`` and puts the
reason in the metadata; a fallback never hides behind the model's name):

- fewer than ``min_history_hours`` observed hours (``ModelSpec.min_history_hours``,
  default 336, two weeks: the weekly terms need two cycles to be told apart from level
  changes): the seasonal naive with the longest period that fits (168, then 24, then 1
  for a series under one day);
- the forecaster raised ``FitFailure`` (for the harmonic model: no ARMA candidate
  converged, constant series, non-finite or implausible forecast) or a numerical
  error: the same seasonal naive.

This function is used both for the final forecast and inside every backtest
window, so the backtest scores exactly what is deployed, fallbacks included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from planner.forecast.baselines import SeasonalNaive
from planner.forecast.forecaster import FitFailure, Forecaster, SeriesForecast, SeriesHistory


def naive_fallback(history: SeriesHistory, horizon: int, levels: Sequence[float], reason: str) -> SeriesForecast:
    """The seasonal naive's forecast, marked as a fallback for ``reason``."""
    return replace(SeasonalNaive().fit(history).predict(horizon, levels), fallback_reason=reason)


def forecast_series(forecaster: Forecaster, history: SeriesHistory, horizon: int, levels: Sequence[float],
                    min_history_hours: int) -> SeriesForecast:
    """Fit ``forecaster`` and predict, or fall back visibly (see the module docstring)."""
    n_observed = int(history.observed.sum())
    if n_observed < min_history_hours:
        return naive_fallback(history, horizon, levels,
                              f"history too short: {n_observed} observed hours < {min_history_hours}")
    try:
        return forecaster.fit(history).predict(horizon, levels)
    except FitFailure as exc:
        return naive_fallback(history, horizon, levels, f"fit failed: {exc}")
    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
        return naive_fallback(history, horizon, levels, f"fit failed: {type(exc).__name__}: {str(exc)[:200]}")

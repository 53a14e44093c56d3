"""Which forecast a series gets, and why: the selected forecaster's or a visible fallback.

Rules (each fallback keeps the baseline's own name in ``model_used`` and puts the
reason in the metadata; a fallback never hides behind the model's name):

- a history shorter than ``min_history_hours`` (``ModelSpec.min_history_hours``, default
  168, one week: enough for daily seasonality; ``--min-history`` sets it), counted from
  the first observed hour to the last hour, so that hours masked as outages inside the
  history count as history (the model treats them as missing, not as zero); or fewer than
  ``MIN_OBSERVED_SHARE`` of that minimum really observed: the seasonal naive with the
  longest period that fits (168, then 24, then 1 for a series under one day);
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
from planner.forecast.growth import bound_growth

MIN_OBSERVED_SHARE = 0.75
"""Share of the minimum history that must be real observations (the rest may be masked outages)."""


def history_shortfall(history: SeriesHistory, min_history_hours: int) -> str | None:
    """Why ``history`` is too short for a model (None when it is long enough); see the module docstring."""
    observed = history.observed
    n_observed = int(observed.sum())
    span = int(observed.size - np.argmax(observed)) if n_observed else 0
    if span < min_history_hours:
        return (f"history too short: {span} h from the first observed hour < {min_history_hours} h "
                "(lower it with --min-history)")
    if n_observed < MIN_OBSERVED_SHARE * min_history_hours:
        return (f"too few observed hours: {n_observed} of {span} h observed, under "
                f"{MIN_OBSERVED_SHARE:.0%} of the {min_history_hours} h minimum")
    return None


def naive_fallback(history: SeriesHistory, horizon: int, levels: Sequence[float], reason: str) -> SeriesForecast:
    """The seasonal naive's forecast, marked as a fallback for ``reason``."""
    return replace(SeasonalNaive().fit(history).predict(horizon, levels), fallback_reason=reason)


def forecast_series(forecaster: Forecaster, history: SeriesHistory, horizon: int, levels: Sequence[float],
                    min_history_hours: int, max_growth: float | None = None) -> SeriesForecast:
    """Fit ``forecaster`` and predict, or fall back visibly (see the module docstring); with ``max_growth``, held
    within that multiple of the history's peak (:mod:`planner.forecast.growth`)."""
    result = _fitted_or_fallback(forecaster, history, horizon, levels, min_history_hours)
    return result if max_growth is None else bound_growth(result, history, max_growth)


def _fitted_or_fallback(forecaster: Forecaster, history: SeriesHistory, horizon: int, levels: Sequence[float],
                        min_history_hours: int) -> SeriesForecast:
    shortfall = history_shortfall(history, min_history_hours)
    if shortfall is not None:
        return naive_fallback(history, horizon, levels, shortfall)
    try:
        return forecaster.fit(history).predict(horizon, levels)
    except FitFailure as exc:
        return naive_fallback(history, horizon, levels, f"fit failed: {exc}")
    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
        return naive_fallback(history, horizon, levels, f"fit failed: {type(exc).__name__}: {str(exc)[:200]}")

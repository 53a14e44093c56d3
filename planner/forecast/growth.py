"""A forecast held within a stated multiple of the history's peak.

A model fitted to two weeks of traffic extrapolates its trend and its error growth far
beyond what two weeks can show: an integrated component's variance grows with every hour
ahead, so a q99 a month out can be many times anything ever observed (measured: 22x the
peak within 7 days on a 14-day coding series). The backtest that chooses the model scores
windows of at most the forecast's horizon, often much less on a short history, so it never
sees that far. Plans buy capacity on these quantiles, so their growth needs evidence or
the user's consent.

For one series with peak ``P`` (the largest really observed hour of its history: masked
outages and missing hours are not peaks) and growth limit ``g`` (``--max-growth``, default
``DEFAULT_MAX_GROWTH``), every value of the mean and of every quantile is capped at
``g * P``. Capping all levels at one bound keeps the quantiles monotone in the level. The
cap is a finding: which levels it cut, in how many hours, and how far above the peak the
model had gone. Above ``g = WARN_MULTIPLE`` a quantile may exceed twice the peak; where one
does, that is a finding as well, so a plan bought on it never rests on it silently.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from planner.contracts import quantile_column
from planner.forecast.forecaster import SeriesForecast, SeriesHistory

WARN_MULTIPLE = 2.0
"""A quantile above this multiple of the history's peak is named on the terminal and in the report."""


def history_peak(history: SeriesHistory) -> float:
    """The largest really observed hour (0 for a series with none)."""
    observed = history.values[history.observed]
    return float(np.max(observed)) if observed.size else 0.0


def check_max_growth(value: float) -> str | None:
    """Why ``value`` cannot be a growth limit (None when it can)."""
    if not np.isfinite(value) or value < 1.0:
        return f"a growth limit of {value:g} is not a multiple of at least 1 of the history's peak"
    return None


def bound_growth(forecast: SeriesForecast, history: SeriesHistory, max_growth: float) -> SeriesForecast:
    """``forecast`` capped at ``max_growth`` times the history's peak; ``details["growth"]`` says what was cut."""
    peak = history_peak(history)
    if peak <= 0.0:
        return forecast
    bound = max_growth * peak
    capped: dict[str, int] = {}
    multiples: dict[str, float] = {}
    quantiles = {}
    for level, values in forecast.quantiles.items():
        column = quantile_column(level)
        multiples[column] = float(np.max(values, initial=0.0)) / peak
        over = values > bound
        if over.any():
            capped[column] = int(over.sum())
        quantiles[level] = np.minimum(values, bound)
    mean = np.minimum(forecast.mean, bound)
    growth: dict[str, Any] = {"history_peak": peak, "max_growth": max_growth, "bound": bound,
                              "multiple_of_peak": multiples}
    if capped:
        growth["capped_hours"] = capped
    details = {**forecast.details, "growth": growth}
    return replace(forecast, mean=mean, quantiles=quantiles, details=details)


def growth_findings(series: str, growth: dict[str, Any] | None, levels: list[float]) -> list[dict[str, Any]]:
    """The findings of one series' growth block: the cap that cut its quantiles, or a quantile above
    ``WARN_MULTIPLE`` times the peak (only possible with a limit above it). Only the output ``levels`` count."""
    if not growth:
        return []
    wanted = [quantile_column(level) for level in levels]
    by_level = growth["multiple_of_peak"]
    multiple = max((by_level[column] for column in wanted if column in by_level), default=0.0)
    cut = {column: hours for column, hours in growth.get("capped_hours", {}).items() if column in wanted}
    common = {"series": series, "history_peak": growth["history_peak"], "max_growth": growth["max_growth"],
              "largest_multiple_of_peak": multiple}
    if cut:
        return [{"kind": "quantile_capped", **common, "hours": cut,
                 "action": f"capped at {growth['max_growth']:g} x the history's peak "
                           f"({growth['history_peak']:,.0f}/h); --max-growth changes the limit"}]
    if multiple > WARN_MULTIPLE:
        return [{"kind": "quantile_above_peak", **common,
                 "action": f"kept: a quantile reaches {multiple:.1f} x the history's peak, within the limit "
                           f"of {growth['max_growth']:g} x set by --max-growth"}]
    return []

"""The forecaster interface: what every forecast model offers the fallback rules and the backtest.

A forecaster is fitted to one cleaned hourly series and then predicts a mean and quantiles
for the hours after it. ``fit`` returns a fitted forecaster and leaves the receiver as it
was, so one unfitted forecaster can be handed to every series (and pickled to workers).
A model that cannot give a usable forecast raises :class:`FitFailure` with the reason; the
caller then falls back visibly (:mod:`planner.forecast.fallback`).

Implementations: the harmonic model (:class:`planner.forecast.model.HarmonicForecaster`),
MSTL plus ARIMA (:class:`planner.forecast.mstl.MstlForecaster`), damped-trend ETS
(:class:`planner.forecast.ets.EtsForecaster`) and the seasonal naive
(:class:`planner.forecast.baselines.SeasonalNaive`); the registry
(:mod:`planner.forecast.registry`) names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

import numpy as np


class FitFailure(Exception):
    """The model could not be fitted or gave an unusable forecast; carries the reason."""


@dataclass(frozen=True)
class SeriesHistory:
    """One cleaned hourly series, as every forecaster sees it.

    ``values`` is NaN where an hour was missing or masked as an outage (a model treats
    those as missing observations); ``filled`` has them imputed (for the baselines);
    ``observed`` marks the hours that were really observed. ``t_start_abs`` is the
    absolute hour (hours since the Unix epoch) of the first value, so that seasonal
    phases mean the same hour of day and of week in every series.
    """

    values: np.ndarray
    filled: np.ndarray
    observed: np.ndarray
    t_start_abs: int

    @property
    def n_hours(self) -> int:
        return int(self.values.size)

    def head(self, hours: int) -> SeriesHistory:
        """The first ``hours`` hours: what a forecast made at that origin may know."""
        return SeriesHistory(self.values[:hours], self.filled[:hours], self.observed[:hours], self.t_start_abs)


@dataclass
class SeriesForecast:
    """One series' forecast on the original scale, with provenance.

    ``quantiles`` maps each level in (0, 1) to its hourly values; ``model_used`` names the
    fitted model as the forecast file shows it; ``fallback_reason`` says why a baseline
    replaced the selected forecaster (None when it did not); ``details`` is JSON-able.
    """

    mean: np.ndarray
    quantiles: dict[float, np.ndarray]
    model_used: str
    fallback_reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


class Forecaster(Protocol):
    """A forecast model for one hourly series (see the module docstring)."""

    @property
    def name(self) -> str:
        """The registry name."""
        ...

    def fit(self, history: SeriesHistory) -> Self:
        """A copy of this forecaster fitted to ``history``; raises FitFailure when it cannot fit."""
        ...

    def predict(self, horizon: int, levels: Sequence[float]) -> SeriesForecast:
        """Mean and quantiles (one per level) for hours 1..horizon after the fitted history.

        Quantiles are never negative and never decrease with the level. Raises FitFailure
        when the forecast is unusable, and an error when the forecaster is not fitted.
        """
        ...

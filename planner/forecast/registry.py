"""The forecasters ``planner forecast`` can run, by name, and the one it runs by default.

A factory takes the run's :class:`~planner.forecast.model.ModelSpec` (a forecaster uses
what applies to it) and returns an unfitted forecaster. To add a model: write it in its
own module (a class with ``name``, ``fit`` and ``predict``, see
:mod:`planner.forecast.forecaster`), add one line here, and select it by name
(``forecast_history(..., forecaster=NAME)``, or ``DEFAULT_FORECASTER``).
"""

from __future__ import annotations

from collections.abc import Callable

from planner.errors import InputError
from planner.forecast.baselines import SeasonalNaive
from planner.forecast.ets import EtsForecaster
from planner.forecast.forecaster import Forecaster
from planner.forecast.model import HarmonicForecaster, ModelSpec
from planner.forecast.mstl import MstlForecaster
from planner.forecast.selection import NAIVE_CANDIDATES, SelectingForecaster

ForecasterFactory = Callable[[ModelSpec], Forecaster]


def select_per_series(spec: ModelSpec) -> SelectingForecaster:
    """Every model below (the harmonic first: it wins ties) and both seasonal naives, chosen by backtest."""
    models = tuple((name, FORECASTERS[name](spec)) for name in SELECTION_CANDIDATES)
    return SelectingForecaster(models + NAIVE_CANDIDATES, min_history_hours=spec.min_history_hours)


FORECASTERS: dict[str, ForecasterFactory] = {
    "auto": select_per_series,
    "harmonic": HarmonicForecaster,
    "seasonal_naive": lambda spec: SeasonalNaive(),
    "mstl": lambda spec: MstlForecaster(),
    "ets": lambda spec: EtsForecaster(),
}
SELECTION_CANDIDATES = ("harmonic", "mstl", "ets")
"""The models ``auto`` backtests on every series, besides the seasonal naives."""
DEFAULT_FORECASTER = "auto"


def make_forecaster(name: str, spec: ModelSpec) -> Forecaster:
    """The unfitted forecaster registered as ``name``; InputError for an unknown name."""
    try:
        factory = FORECASTERS[name]
    except KeyError:
        raise InputError(f"unknown forecaster '{name}'", where="forecaster",
                         fix=f"use one of {', '.join(sorted(FORECASTERS))}") from None
    return factory(spec)

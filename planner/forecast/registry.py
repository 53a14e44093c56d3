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
from planner.forecast.forecaster import Forecaster
from planner.forecast.model import HarmonicForecaster, ModelSpec

ForecasterFactory = Callable[[ModelSpec], Forecaster]

FORECASTERS: dict[str, ForecasterFactory] = {
    "harmonic": HarmonicForecaster,
    "seasonal_naive": lambda spec: SeasonalNaive(),
}
DEFAULT_FORECASTER = "harmonic"


def make_forecaster(name: str, spec: ModelSpec) -> Forecaster:
    """The unfitted forecaster registered as ``name``; InputError for an unknown name."""
    try:
        factory = FORECASTERS[name]
    except KeyError:
        raise InputError(f"unknown forecaster '{name}'", where="forecaster",
                         fix=f"use one of {', '.join(sorted(FORECASTERS))}") from None
    return factory(spec)

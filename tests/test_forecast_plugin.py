"""Forecasters are plug-ins: a model defined here, registered with one line, runs the forecast and the backtest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pytest

import planner.forecast.model as harmonic_model
from planner.errors import InputError
from planner.forecast import backtest as bt
from planner.forecast import registry
from planner.forecast.forecaster import FitFailure, SeriesForecast, SeriesHistory
from planner.forecast.run import forecast_history
from planner.forecast.synthetic import synthetic_history

HORIZON = 24


@dataclass(frozen=True, eq=False)
class LastValue:
    """Tomorrow looks like the last observed hour; quantiles are fixed multiples of it."""

    last: float | None = None

    @property
    def name(self) -> str:
        return "last_value"

    def fit(self, history: SeriesHistory) -> LastValue:
        return replace(self, last=float(history.values[history.observed][-1]))

    def predict(self, horizon: int, levels: Sequence[float]) -> SeriesForecast:
        assert self.last is not None
        mean = np.full(horizon, self.last)
        return SeriesForecast(mean, {lvl: mean * (0.5 + lvl) for lvl in levels}, "last_value")


@dataclass(frozen=True, eq=False)
class AlwaysFails:
    @property
    def name(self) -> str:
        return "always_fails"

    def fit(self, history: SeriesHistory) -> AlwaysFails:
        raise FitFailure("nothing to learn")

    def predict(self, horizon: int, levels: Sequence[float]) -> SeriesForecast:
        raise AssertionError("never fitted")


@pytest.fixture(scope="module")
def history() -> pd.DataFrame:
    return synthetic_history(2, 4 * 168, seed=5)


@pytest.fixture
def harmonic_unused(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the harmonic model ran although another forecaster was selected")

    monkeypatch.setattr(harmonic_model, "fit", refuse)


def test_a_registered_forecaster_runs_the_forecast_and_the_backtest(history, monkeypatch, harmonic_unused):
    monkeypatch.setitem(registry.FORECASTERS, "last_value", lambda spec: LastValue())
    out = forecast_history(history, horizon_hours=HORIZON, quantiles=[0.5, 0.9], forecaster="last_value")

    assert (out.forecast["model_used"] == "last_value").all()
    for key, rows in out.forecast.groupby(["region", "model", "traffic_class"]):
        series = history[(history["region"] == key[0]) & (history["model"] == key[1])
                         & (history["traffic_class"] == key[2])]
        last = float(series["requests"].iloc[-1])
        assert (rows["mean"] == np.round(last, 3)).all()
        assert (rows["q90"] == np.round(last * (0.5 + 0.9), 3)).all()
    for entry in out.metadata["series"]:
        block = entry["backtest"]
        assert not entry["fallback"] and len(block["windows"]) == bt.N_WINDOWS
        assert {w["model_used"] for w in block["windows"]} == {"last_value"}
        # the model's scores are the plug-in's, not a baseline's
        assert block["model"]["mase"] not in (block["naive24"]["mase"], block["naive168"]["mase"])


def test_the_backtest_scores_any_forecaster_given_to_it(history, harmonic_unused):
    values = history.loc[history["traffic_class"] == history["traffic_class"].iloc[0], "requests"]
    values = values.to_numpy(dtype=float)[: 4 * 168]
    series = SeriesHistory(values, values, np.ones(values.size, bool), 0)
    out = bt.backtest_series(LastValue(), series, HORIZON, [0.5], min_history_hours=336)
    origin = out["windows"][0]["origin_index"]
    x = values[origin:]
    forecasts = np.concatenate([np.full(HORIZON, values[w["origin_index"] - 1]) for w in out["windows"]])
    scales = np.repeat([w["mase_scale"] for w in out["windows"]], HORIZON)
    assert out["model"]["mase"] == pytest.approx(float(np.mean(np.abs(x - forecasts) / scales)))


def test_a_failing_forecaster_falls_back_to_the_seasonal_naive_visibly(history, monkeypatch):
    monkeypatch.setitem(registry.FORECASTERS, "always_fails", lambda spec: AlwaysFails())
    out = forecast_history(history, horizon_hours=HORIZON, quantiles=[0.5], forecaster="always_fails")
    assert (out.forecast["model_used"] == "seasonal_naive(168)").all()
    assert {s["fallback_reason"] for s in out.metadata["series"]} == {"fit failed: nothing to learn"}


def test_the_seasonal_naive_is_a_registered_forecaster(history, harmonic_unused):
    out = forecast_history(history, horizon_hours=HORIZON, quantiles=[0.5], forecaster="seasonal_naive",
                           backtest=False)
    assert (out.forecast["model_used"] == "seasonal_naive(168)").all()
    assert out.metadata["n_fallbacks"] == 0


def test_an_unknown_forecaster_is_an_input_error_naming_the_known_ones(history):
    with pytest.raises(InputError) as err:
        forecast_history(history, horizon_hours=HORIZON, quantiles=[0.5], forecaster="prophet")
    assert "prophet" in err.value.message and "ets, harmonic, mstl, seasonal_naive" in err.value.fix

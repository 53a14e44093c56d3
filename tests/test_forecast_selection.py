"""Model choice by backtest and intervals calibrated on its errors."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from planner.forecast.baselines import SeasonalNaive
from planner.forecast.calibration import Calibration, standardised_errors
from planner.forecast.forecaster import SeriesForecast, SeriesHistory
from planner.forecast.selection import NAIVE_CANDIDATES, SelectingForecaster, selection_windows

LEVELS = [0.05, 0.1, 0.5, 0.9, 0.95, 0.99]


@dataclass(frozen=True, eq=False)
class Flat:
    """Forecasts a fixed value with a band of fixed relative width: a deliberately poor model."""

    value: float
    band: float = 0.01

    @property
    def name(self) -> str:
        return "flat"

    def fit(self, history: SeriesHistory) -> Flat:
        return self

    def predict(self, horizon: int, levels) -> SeriesForecast:
        quantiles = {lvl: np.full(horizon, self.value * (1 + self.band * (lvl - 0.5))) for lvl in levels}
        return SeriesForecast(np.full(horizon, self.value), quantiles, f"flat({self.value:g})")


def daily_series(days: int, seed: int = 0, noise: float = 0.05) -> SeriesHistory:
    rng = np.random.default_rng(seed)
    t = np.arange(days * 24)
    values = 1000 * (1 + 0.5 * np.sin(2 * np.pi * t / 24)) * np.exp(rng.normal(0, noise, t.size))
    return SeriesHistory(values, values, np.ones(t.size, dtype=bool), 0)


def model_band(centre: np.ndarray, sd: float) -> dict[float, np.ndarray]:
    from scipy.special import ndtri

    return {lvl: np.expm1(np.log1p(centre) + float(ndtri(lvl)) * sd) for lvl in LEVELS}


def test_calibrated_band_covers_as_often_as_the_errors_say():
    rng = np.random.default_rng(3)
    centre = np.full(4000, 500.0)
    band = model_band(centre, sd=0.05)  # the model claims a narrow band ...
    actual = np.expm1(np.log1p(centre) + rng.standard_t(4, centre.size) * 0.2)  # ... errs wide and heavy-tailed
    calibration = Calibration.from_errors([standardised_errors(actual[:2000], {k: v[:2000] for k, v in band.items()})])
    fresh = {k: v[2000:] for k, v in band.items()}
    calibrated = calibration.apply(fresh, LEVELS)
    x = actual[2000:]
    raw80 = np.mean((fresh[0.1] <= x) & (x <= fresh[0.9]))
    cov80 = np.mean((calibrated[0.1] <= x) & (x <= calibrated[0.9]))
    cov90 = np.mean((calibrated[0.05] <= x) & (x <= calibrated[0.95]))
    assert raw80 < 0.4
    assert abs(cov80 - 0.8) < 0.03 and abs(cov90 - 0.9) < 0.03
    assert np.array_equal(calibrated[0.5], fresh[0.5])  # the median stays the model's


def test_band_half_widths_are_split_conformal_and_extrapolated_beyond_the_sample():
    errors = np.arange(-50.0, 51.0)  # deviations from the median 0: 0, 1, 1, 2, 2, ..., 50, 50
    calibration = Calibration.from_errors([errors])
    assert calibration.n == 101
    assert calibration.half_width(0.8) == 41.0  # the ceil(102 * 0.8) = 82nd smallest deviation
    assert calibration.half_width(0.995) >= 50.0  # beyond the sample: never inside its largest deviation
    band = calibration.apply(model_band(np.full(5, 100.0), 0.1), LEVELS)
    stacked = np.vstack([band[lvl] for lvl in LEVELS])
    assert np.all(np.diff(stacked, axis=0) >= 0) and np.all(stacked >= 0)


def test_no_errors_keeps_the_models_own_band():
    band = model_band(np.full(3, 10.0), 0.1)
    kept = Calibration.from_errors([]).apply(band, LEVELS)
    assert all(np.array_equal(kept[lvl], band[lvl]) for lvl in LEVELS)


def test_the_candidate_that_erred_least_wins_and_every_score_is_kept():
    history = daily_series(21)
    selector = SelectingForecaster((("flat", Flat(1000.0)),) + NAIVE_CANDIDATES, horizon_hours=24)
    fitted = selector.fit(history)
    selection = fitted.report["selection"]
    scores = selection["candidates"]
    assert set(scores) == {"flat", "naive24", "naive168"}
    assert selection["winner"] == "naive24"
    assert scores["naive24"]["mase"] < scores["flat"]["mase"]
    forecast = fitted.predict(24, LEVELS)
    assert forecast.model_used == "seasonal_naive(24)"
    assert forecast.details["calibration"]["errors"] == fitted.report["backtest"]["model"]["hours_scored"]


def test_a_challenger_better_only_by_noise_does_not_replace_the_default():
    history = daily_series(21, noise=0.2)
    selector = SelectingForecaster((("naive168", SeasonalNaive(168)), ("naive24", SeasonalNaive(24))),
                                   horizon_hours=24)
    selection = selector.fit(history).report["selection"]
    scores = selection["candidates"]
    # on a stable daily pattern the two naives err alike: whichever is a little lower, the default stays
    assert abs(scores["naive24"]["mase"] - scores["naive168"]["mase"]) < 0.2
    assert selection["winner"] == "naive168"


def test_ties_go_to_the_earlier_candidate():
    history = daily_series(21)
    selector = SelectingForecaster((("first", SeasonalNaive(24)), ("second", SeasonalNaive(24))), horizon_hours=24)
    assert selector.fit(history).report["selection"]["winner"] == "first"


def test_windows_grow_in_number_with_the_history_and_keep_the_training_minimum():
    length, origins, skip = selection_windows(14 * 24, 24, 168)
    assert skip is None and length == 24 and len(origins) == 6 and origins[0] >= 168
    length, origins, skip = selection_windows(10 * 24, 24, 168)
    assert skip is None and len(origins) == 3
    assert selection_windows(9 * 24, 24, 168)[2] is not None


def test_too_short_for_windows_forecasts_with_the_first_candidate_and_says_why():
    history = daily_series(8)
    fitted = SelectingForecaster((("flat", Flat(7.0)),) + NAIVE_CANDIDATES, horizon_hours=24).fit(history)
    assert "too short" in fitted.report["selection"]["skipped"]
    assert fitted.predict(3, [0.5]).model_used == "flat(7)"


def test_cross_fitted_coverage_is_not_the_calibration_grading_itself():
    history = daily_series(28, noise=0.3)
    fitted = SelectingForecaster((("flat", Flat(1000.0)),), horizon_hours=24).fit(history)
    block = fitted.report["backtest"]
    assert block["model"]["coverage80"] != pytest.approx(block["model_uncalibrated"]["coverage80"])
    assert 0.5 < block["model"]["coverage80"] < 1.0


def test_a_failing_window_is_scored_as_the_naive_that_replaces_it():
    history = daily_series(21)

    @dataclass(frozen=True, eq=False)
    class FailsEarly(Flat):
        def fit(self, history: SeriesHistory) -> Flat:
            if history.n_hours < 19 * 24:
                raise ValueError("not enough history")
            return replace(self)

    selector = SelectingForecaster((("early", FailsEarly(1000.0)),) + NAIVE_CANDIDATES, horizon_hours=24)
    score = selector.fit(history).report["selection"]["candidates"]["early"]
    assert len(score["fallback_windows"]) == 4 and "error" not in score

"""Seasonal-naive baselines and the rolling-origin backtest metrics."""

from __future__ import annotations

import numpy as np
import pytest

from planner.contracts import quantile_column
from planner.forecast import backtest as bt
from planner.forecast.baselines import SeasonalNaive, naive_point, seasonal_naive
from planner.forecast.forecaster import SeriesHistory
from planner.forecast.model import HarmonicForecaster, ModelSpec
from planner.forecast.synthetic import START, synthetic_series

T0_ABS = int(START.value // 3_600_000_000_000)


def test_naive_point_repeats_the_last_period():
    x = np.arange(48, dtype=float)
    point, k = naive_point(x, 24, 30)
    np.testing.assert_array_equal(point[:24], x[24:48])
    np.testing.assert_array_equal(point[24:], x[24:30])  # two periods back for h > 24
    assert k[0] == 1 and k[23] == 1 and k[24] == 2


def test_naive_quantiles_come_from_in_sample_errors_and_widen_with_k():
    rng = np.random.default_rng(0)
    x = 100 + np.tile(np.arange(24.0), 20) + rng.normal(0, 5, 480)
    levels = [0.05, 0.5, 0.95]
    mean, q = seasonal_naive(x, np.ones(480, bool), 24, 48, levels)
    width1 = q[0.95][:24] - q[0.05][:24]
    width2 = q[0.95][24:] - q[0.05][24:]
    # errors x_t - x_{t-24} have sd 5*sqrt(2): the 90 % width is ~ 2 * 1.645 * 7.07 = 23
    assert 17 < float(np.mean(width1)) < 29
    np.testing.assert_allclose(width2, width1 * np.sqrt(2), rtol=1e-9)
    np.testing.assert_array_equal(mean, naive_point(x, 24, 48)[0])


def test_naive_quantiles_never_negative_and_monotone():
    x = np.tile([0.0, 0.0, 5.0, 0.0], 100)
    levels = [0.05, 0.1, 0.5, 0.9, 0.95, 0.99]
    mean, q = seasonal_naive(x, np.ones(x.size, bool), 24, 72, levels)
    stacked = np.vstack([q[lvl] for lvl in levels])
    assert (stacked >= 0).all() and (np.diff(stacked, axis=0) >= 0).all() and (mean >= 0).all()


def test_window_plan_full_fraction_and_skip():
    length, origins, skip = bt.window_plan(2000, 336, min_train_hours=336)
    assert (length, skip) == (336, None) and origins == [992, 1328, 1664]
    length, origins, skip = bt.window_plan(600, 336, min_train_hours=336)
    assert skip is None and length == 72 and origins == [384, 456, 528]  # 264 h / 3 -> 88 -> 72 (whole days)
    _, _, skip = bt.window_plan(380, 336, min_train_hours=336)
    assert skip and "too short" in skip


def test_metric_arithmetic_on_a_hand_example():
    acc = bt._Accumulator([0.05, 0.1, 0.5, 0.9, 0.95])
    x = np.array([10.0, 20.0, 0.0, 40.0])
    mean = np.array([12.0, 20.0, 0.0, 30.0])
    quants = {0.05: x - 5, 0.1: x - 1, 0.5: mean, 0.9: x + 1, 0.95: x + 5}
    quants[0.9] = np.array([11.0, 21.0, 1.0, 39.0])  # the last actual falls above q90
    acc.add(x, mean, quants, scale=2.0)
    out = acc.result()
    assert out["mase"] == pytest.approx((2 + 0 + 0 + 10) / 4 / 2.0)
    # sMAPE terms: 200*2/22, 0, 0 (both zero), 200*10/70
    assert out["smape"] == pytest.approx((400 / 22 + 2000 / 70) / 4)
    # pinball at 0.5 is half the absolute error
    assert out["pinball"]["q50"] == pytest.approx(0.5 * 12 / 4)
    assert out["coverage80"] == pytest.approx(0.75)
    assert out["coverage90"] == pytest.approx(1.0)
    assert out["hours_scored"] == 4


def test_quantile_column_names():
    assert [quantile_column(q) for q in (0.5, 0.05, 0.99, 0.975, 0.29)] == ["q50", "q5", "q99", "q97.5", "q29"]


def test_backtest_series_scores_model_and_both_baselines():
    values, _ = synthetic_series(8 * 168, np.random.default_rng(1))
    obs = np.ones(values.size, bool)
    out = bt.backtest_series(HarmonicForecaster(), SeriesHistory(values, values, obs, T0_ABS), 48, [0.5, 0.9],
                             ModelSpec().min_history_hours)
    assert out["window_hours"] == 48 and len(out["windows"]) == 3
    for method in bt.METHODS:
        assert set(out[method]) >= {"mase", "smape", "pinball", "pinball_scaled", "coverage80", "coverage90"}
        assert set(out[method]["pinball"]) == {"q5", "q10", "q50", "q90", "q95"}
        assert out[method]["hours_scored"] == 144
    # the model knows the weekly cycle and the weekend drop; the daily naive does not
    assert out["model"]["mase"] < out["naive24"]["mase"]
    summary = bt.overall([out, {"skipped": "too short"}])
    assert summary["series_backtested"] == 1
    assert summary["mase_ratio_vs_best_naive"] == pytest.approx(
        out["model"]["mase"] / min(out["naive24"]["mase"], out["naive168"]["mase"]))


def test_backtest_skips_masked_hours():
    values, _ = synthetic_series(8 * 168, np.random.default_rng(2))
    obs = np.ones(values.size, bool)
    obs[-10:] = False
    vals = np.where(obs, values, np.nan)
    out = bt.backtest_series(HarmonicForecaster(), SeriesHistory(vals, values, obs, T0_ABS), 24, [0.5],
                             ModelSpec().min_history_hours)
    assert out["model"]["hours_scored"] == 72 - 10


def test_naive_q50_is_the_point_forecast_even_when_the_errors_are_one_sided():
    """A series growing every day: every seasonal difference is positive. Uncentred error
    quantiles would put the q50 a whole day's growth above the point forecast."""
    x = 1000 + 10.0 * np.arange(24 * 10) + 100 * np.tile(np.sin(np.arange(24) / 24 * 2 * np.pi), 10)
    x += np.random.default_rng(1).normal(0, 5, x.size)
    mean, q = seasonal_naive(x, np.ones(x.size, bool), 24, 48, [0.1, 0.5, 0.9])
    np.testing.assert_allclose(q[0.5], mean)
    assert (q[0.1] < mean).all() and (q[0.9] > mean).all()


def test_naive_on_a_two_hour_history_is_centred_and_never_all_zero():
    """Two hours (3,760 after 7,520): one error pair, no distribution to read; the spread is
    relative to the history's own variability, and the q50 stays the point forecast."""
    x = np.array([7520.0, 3760.0])
    forecast = SeasonalNaive().fit(SeriesHistory(x, x, np.ones(2, bool), T0_ABS)).predict(3, [0.1, 0.5, 0.9])
    np.testing.assert_allclose(forecast.mean, 3760.0)
    np.testing.assert_allclose(forecast.quantiles[0.5], 3760.0)
    assert (forecast.quantiles[0.1] > 0).all() and (forecast.quantiles[0.9] > forecast.mean).all()
    assert (np.diff(forecast.quantiles[0.9]) > 0).all()  # wider further ahead

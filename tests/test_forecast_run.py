"""forecast_history: output contract, visible fallbacks, input errors, determinism, engines."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from planner.contracts import MEASURES
from planner.errors import InputError
from planner.forecast.model import ModelSpec
from planner.forecast.run import forecast_history, parse_horizon, parse_quantiles
from planner.forecast.synthetic import hourly_stamps, synthetic_history

QUANTILES = [0.5, 0.9, 0.95, 0.99]
CONTRACT = ["region", "model", "traffic_class", "ts", "mean", "q50", "q90", "q95", "q99", "model_used"]


@pytest.fixture(scope="module")
def history() -> pd.DataFrame:
    frame = synthetic_history(3, 5 * 168, seed=11)
    frame["prompt_tokens_sum"] = frame["requests"] * 900
    frame["output_tokens_sum"] = frame["requests"] * 150
    return frame


@pytest.fixture(scope="module")
def result(history):
    return forecast_history(history, horizon_hours=48, quantiles=QUANTILES)


def test_output_contract(result):
    fc = result.forecast
    assert list(fc.columns) == CONTRACT
    assert len(fc) == 3 * 48
    assert fc.groupby(["region", "model", "traffic_class"]).size().eq(48).all()
    assert fc["ts"].iloc[0] == "2025-02-10T00:00:00Z"  # the hour after the last history hour
    assert fc["ts"].str.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:00:00Z").all()
    values = fc[["mean", "q50", "q90", "q95", "q99"]].to_numpy()
    assert np.isfinite(values).all() and (values >= 0).all()
    q = fc[["q50", "q90", "q95", "q99"]].to_numpy()
    assert (np.diff(q, axis=1) >= 0).all()
    assert fc["model_used"].str.contains(r"fourier\(d=\d+,w=\d+\).*arima\(\d,0,\d\) log1p").all()


def test_metadata_is_json_and_complete(result):
    meta = json.loads(json.dumps(result.metadata, allow_nan=False))
    assert meta["n_series"] == 3 and meta["n_fallbacks"] == 0
    assert meta["parameters"]["quantile_columns"] == ["q50", "q90", "q95", "q99"]
    series = meta["series"][0]
    assert {"order", "aic", "backtest", "fallback", "fallback_reason", "data_quality", "model_used"} <= set(series)
    assert len(series["order"]) == 3
    for method in ("model", "naive24", "naive168"):
        assert {"mase", "smape", "pinball", "coverage80", "coverage90"} <= set(series["backtest"][method])
    overall = meta["backtest_overall"]
    assert overall["series_backtested"] == 3 and overall["mase_ratio_vs_best_naive"] > 0


def test_summary_rows(result):
    rows = result.summary_rows()
    assert [r["series"] for r in rows] == sorted(r["series"] for r in rows)
    assert set(rows[0]) == {"series", "model_used", "aic", "mase", "mase_naive24", "mase_naive168",
                            "cov80", "cov90", "fallback"}
    assert all(r["fallback"] == "" and r["mase"] is not None for r in rows)


@pytest.mark.parametrize("measure", MEASURES)
def test_every_measure_is_forecastable(history, measure):
    out = forecast_history(history.iloc[: 5 * 168], horizon_hours=6, quantiles=[0.5], measure=measure,
                           backtest=False)
    assert out.metadata["parameters"]["measure"] == measure
    assert list(out.forecast.columns) == ["region", "model", "traffic_class", "ts", "mean", "q50", "model_used"]


def test_short_series_falls_back_visibly(history):
    short = history.groupby("traffic_class").tail(6 * 24)
    out = forecast_history(short, horizon_hours=24, quantiles=QUANTILES)
    assert (out.forecast["model_used"] == "seasonal_naive(24)").all()
    series = out.metadata["series"][0]
    assert series["fallback"] is True and "history too short: 144 h" in series["fallback_reason"]
    assert "--min-history" in series["fallback_reason"]
    assert out.metadata["n_fallbacks"] == 3
    assert out.summary_rows()[0]["fallback"].startswith("history too short")


def test_ten_days_get_a_model_chosen_by_a_backtest_of_shorter_windows(history):
    short = history.groupby("traffic_class").tail(10 * 24)
    out = forecast_history(short, horizon_hours=48, quantiles=QUANTILES)
    assert out.metadata["n_fallbacks"] == 0
    for series in out.metadata["series"]:
        selection = series["fit"]["selection"]
        assert set(selection["candidates"]) == {"harmonic", "mstl", "ets", "naive24", "naive168"}
        assert selection["winner"] in selection["candidates"]
        assert series["backtest"]["window_hours"] == 24 and len(series["backtest"]["windows"]) == 3
        assert {"q50", "q99"} <= set(series["backtest"]["model"]["pinball"])  # the levels asked for are scored
    # with a minimum of 10 days the same history is too short for a model
    spec = ModelSpec(min_history_hours=11 * 24)
    longer = forecast_history(short, horizon_hours=48, quantiles=QUANTILES, spec=spec)
    assert longer.metadata["n_fallbacks"] == 3


def test_masked_outage_hours_count_towards_the_minimum_history(history):
    one = history[history["traffic_class"] == history["traffic_class"].iloc[0]].tail(180).copy()
    one.iloc[30:50, one.columns.get_loc("requests")] = 0.0  # a 20-hour outage, masked by the quality pass
    out = forecast_history(one, horizon_hours=24, quantiles=QUANTILES, backtest=False)
    series = out.metadata["series"][0]
    assert series["history"]["observed_hours"] < 168 <= series["history"]["hours"]
    assert not series["fallback"], series["fallback_reason"]


def test_day_old_series_falls_back_to_daily_naive():
    frame = pd.DataFrame({"ts": hourly_stamps(30), "region": "r", "model": "m", "traffic_class": "c",
                          "requests": np.arange(30.0)})
    out = forecast_history(frame, horizon_hours=5, quantiles=[0.5])
    assert (out.forecast["model_used"] == "seasonal_naive(24)").all()
    np.testing.assert_array_equal(out.forecast["mean"], np.arange(6.0, 11.0))
    assert "too short" in out.metadata["series"][0]["backtest"]["skipped"]


def test_non_converged_fit_falls_back_visibly(history):
    spec = ModelSpec(arma_orders=((2, 1),), maxiter=1)
    out = forecast_history(history, horizon_hours=24, quantiles=QUANTILES, spec=spec, backtest=False,
                           forecaster="harmonic")
    assert (out.forecast["model_used"] == "seasonal_naive(168)").all()
    reason = out.metadata["series"][0]["fallback_reason"]
    assert reason.startswith("fit failed") and "did not converge" in reason


def test_constant_series_falls_back_visibly():
    frame = pd.DataFrame({"ts": hourly_stamps(4 * 168), "region": "r", "model": "m", "traffic_class": "c",
                          "requests": 40.0})
    out = forecast_history(frame, horizon_hours=24, quantiles=[0.5, 0.9], backtest=False, forecaster="harmonic")
    assert (out.forecast["model_used"] == "seasonal_naive(168)").all()
    assert "constant" in out.metadata["series"][0]["fallback_reason"]
    assert (out.forecast["mean"] == 40.0).all()


def test_series_ending_early_is_forecast_over_the_common_horizon(history):
    parts = [g if c != "batch" else g.iloc[:-30] for c, g in history.groupby("traffic_class")]
    out = forecast_history(pd.concat(parts), horizon_hours=24, quantiles=[0.5], backtest=False)
    assert out.forecast.groupby("traffic_class")["ts"].first().nunique() == 1
    batch = next(s for s in out.metadata["series"] if s["traffic_class"] == "batch")
    assert any(f["kind"] == "ends_early" and f["hours"] == 30 for f in batch["data_quality"])


def test_data_quality_findings_reach_the_metadata(history):
    frame = history.copy()
    idx = frame.index[(frame["traffic_class"] == "interactive")][400:405]
    frame.loc[idx, "requests"] = 0.0
    frame = frame.drop(frame.index[(frame["traffic_class"] == "standard")][300:303])
    out = forecast_history(frame, horizon_hours=24, quantiles=[0.5], backtest=False)
    found = {s["traffic_class"]: {f["kind"] for f in s["data_quality"]} for s in out.metadata["series"]}
    assert "outage" in found["interactive"] and "missing_hours" in found["standard"]
    assert out.metadata["n_data_quality_findings"] >= 2


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda f: f.drop(columns=["traffic_class"]), "lacks column"),
        (lambda f: f.assign(requests=-1.0), "non-negative"),
        (lambda f: f.assign(requests="many"), "non-negative"),
        (lambda f: f.assign(ts="yesterday"), "cannot parse timestamp"),
        (lambda f: f.iloc[0:0], "no rows"),
    ],
)
def test_bad_inputs_are_input_errors(history, mutate, match):
    with pytest.raises(InputError, match=match):
        forecast_history(mutate(history.copy()), horizon_hours=24, quantiles=[0.5])


def test_unknown_measure_is_an_input_error(history):
    with pytest.raises(InputError, match="unknown measure"):
        forecast_history(history, horizon_hours=24, quantiles=[0.5], measure="tokens")


def test_parse_horizon():
    assert parse_horizon("14d") == 336
    assert parse_horizon("36h") == 36
    assert parse_horizon("2w") == 336
    for bad in ("14", "d", "1.5d", "0h", "400d", "-3h"):
        with pytest.raises(InputError):
            parse_horizon(bad)


def test_parse_quantiles():
    assert parse_quantiles("0.99, 0.5,0.9,0.95") == [0.5, 0.9, 0.95, 0.99]
    for bad in ("", "0.5,abc", "0.5,1.0", "0,0.5", "0.5,0.5"):
        with pytest.raises(InputError):
            parse_quantiles(bad)


def test_same_input_gives_identical_outputs(history, result):
    again = forecast_history(history, horizon_hours=48, quantiles=QUANTILES, seed=0)
    assert again.forecast.to_csv(index=False) == result.forecast.to_csv(index=False)
    assert json.dumps(again.metadata, sort_keys=True) == json.dumps(result.metadata, sort_keys=True)


@pytest.mark.slow
def test_local_and_process_engines_give_identical_outputs(history, result):
    calls = []
    parallel = forecast_history(history, horizon_hours=48, quantiles=QUANTILES, engine="processes", workers=2,
                                progress=lambda done, total: calls.append((done, total)))
    assert parallel.forecast.to_csv(index=False) == result.forecast.to_csv(index=False)
    assert json.dumps(parallel.metadata, sort_keys=True) == json.dumps(result.metadata, sort_keys=True)
    assert calls[-1] == (3, 3) and len(calls) == 3


def test_numerical_error_in_the_fit_falls_back_visibly(history, monkeypatch):
    import planner.forecast.model as model

    def broken_fit(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(model, "fit", broken_fit)
    out = forecast_history(history, horizon_hours=24, quantiles=[0.5], backtest=False, forecaster="harmonic")
    assert (out.forecast["model_used"] == "seasonal_naive(168)").all()
    assert out.metadata["series"][0]["fallback_reason"] == "fit failed: LinAlgError: SVD did not converge"


def test_a_model_that_never_fits_is_out_of_the_selection_with_its_reason(history, monkeypatch):
    import planner.forecast.model as model

    def broken_fit(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(model, "fit", broken_fit)
    out = forecast_history(history, horizon_hours=24, quantiles=[0.5])
    series = out.metadata["series"][0]
    assert not series["fallback"] and not series["model_used"].startswith("fourier")
    assert series["fit"]["selection"]["winner"] != "harmonic"
    harmonic = series["fit"]["selection"]["candidates"]["harmonic"]
    assert "could not fit at any origin" in harmonic["error"] and "SVD did not converge" in harmonic["error"]


def test_series_under_a_day_uses_the_last_value_naive():
    frame = pd.DataFrame({"ts": hourly_stamps(10), "region": "r", "model": "m", "traffic_class": "c",
                          "requests": np.arange(1.0, 11.0)})
    out = forecast_history(frame, horizon_hours=3, quantiles=[0.5, 0.9])
    assert (out.forecast["model_used"] == "seasonal_naive(1)").all()
    assert (out.forecast["mean"] == 10.0).all()
    assert (out.forecast["q90"] >= out.forecast["q50"]).all()


def test_datetime_typed_and_offset_timestamps_are_read_as_utc(history):
    small = history[history["traffic_class"] == "batch"].tail(3 * 168)
    base = forecast_history(small, horizon_hours=6, quantiles=[0.5], backtest=False).forecast
    typed = small.assign(ts=pd.to_datetime(small["ts"], utc=True).dt.tz_localize(None))
    shifted = small.assign(ts=pd.to_datetime(small["ts"], utc=True).dt.tz_convert("Europe/Paris")
                           .dt.strftime("%Y-%m-%dT%H:%M:%S%z"))
    for frame in (typed, shifted):
        out = forecast_history(frame, horizon_hours=6, quantiles=[0.5], backtest=False).forecast
        assert out.to_csv(index=False) == base.to_csv(index=False)

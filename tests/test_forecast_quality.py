"""Data-quality pass: duplicates, irregular frequency, missing hours, outages, zero runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.errors import ExitCode, InputError
from planner.forecast.quality import HOUR_NS, clean_series, detect_outages, impute_seasonal
from planner.forecast.run import forecast_history
from planner.forecast.synthetic import START, hourly_stamps, synthetic_series

T0 = int(START.value)


def hours_ns(n: int, offset: int = 0) -> np.ndarray:
    return T0 + (np.arange(n, dtype=np.int64) + offset) * HOUR_NS


def busy_series(n: int = 24 * 28, seed: int = 0) -> np.ndarray:
    values, _ = synthetic_series(n, np.random.default_rng(seed))
    return np.round(values)


def kinds(findings: list[dict]) -> dict[str, dict]:
    return {f["kind"]: f for f in findings}


def test_clean_series_without_problems_reports_nothing():
    values = busy_series()
    clean = clean_series("r/m/c", hours_ns(values.size), values)
    assert clean.findings == []
    assert clean.observed.all()
    np.testing.assert_array_equal(clean.values, values)
    assert clean.start == START


def test_duplicate_timestamp_is_an_input_error_naming_series_and_ts():
    ts = hours_ns(48)
    ts = np.sort(np.concatenate([ts, ts[[10]]]))
    with pytest.raises(InputError) as info:
        clean_series("us-east/llama-3.1-8b/batch", ts, np.ones(ts.size))
    message = str(info.value)
    assert "us-east/llama-3.1-8b/batch" in message
    assert "2025-01-06T10:00:00Z" in message
    assert info.value.exit_code == ExitCode.INVALID_INPUT


def test_duplicate_in_a_history_frame_fails_before_any_fit():
    stamps = hourly_stamps(400)
    frame = pd.DataFrame({"ts": stamps + [stamps[7]], "region": "eu-west", "model": "m", "traffic_class": "c",
                          "requests": 5.0})
    with pytest.raises(InputError, match="eu-west/m/c.*2025-01-06T07:00:00Z"):
        forecast_history(frame, horizon_hours=24, quantiles=[0.5, 0.9])


def test_missing_hours_are_filled_and_reported_as_runs():
    values = busy_series()
    keep = np.ones(values.size, dtype=bool)
    keep[300:306] = False
    keep[500] = False
    clean = clean_series("s", hours_ns(values.size)[keep], values[keep])
    found = kinds(clean.findings)["missing_hours"]
    assert found["hours"] == 7 and found["runs"] == 2
    assert found["ranges"][0] == ["2025-01-18T12:00:00Z", "2025-01-18T17:00:00Z"]
    assert np.isnan(clean.values[300:306]).all() and not clean.observed[500]
    # imputed from the same hour one week earlier, for baselines and plots
    np.testing.assert_array_equal(clean.filled[300:306], values[300 - 168:306 - 168])
    assert not np.isnan(clean.filled).any()


def test_nan_values_count_as_missing_hours():
    values = busy_series()
    values[50] = np.nan
    clean = clean_series("s", hours_ns(values.size), values)
    assert kinds(clean.findings)["missing_hours"]["hours"] == 1


def test_zero_run_inside_busy_series_is_masked_as_outage():
    values = busy_series()
    values[400:406] = 0.0
    clean = clean_series("s", hours_ns(values.size), values)
    found = kinds(clean.findings)["outage"]
    assert found["hours"] == 6
    assert found["ranges"] == [["2025-01-22T16:00:00Z", "2025-01-22T21:00:00Z"]]
    assert np.isnan(clean.values[400:406]).all()
    assert not clean.observed[400:406].any()
    assert (clean.filled[400:406] > 0).all()  # the baselines never learn the zeros


def test_near_zero_hours_in_busy_series_are_outages_too():
    values = busy_series()
    values[200] = 2.0  # 2 requests where about 2,000 were due: collection stopped
    clean = clean_series("s", hours_ns(values.size), values)
    assert kinds(clean.findings)["outage"]["hours"] == 1


def test_zeros_in_a_low_volume_series_are_demand_not_outages():
    rng = np.random.default_rng(3)
    values = rng.poisson(0.7, 24 * 28).astype(float)  # zeros are ordinary here
    clean = clean_series("s", hours_ns(values.size), values)
    assert "outage" not in kinds(clean.findings)
    assert clean.observed.all()


def test_business_hours_class_with_quiet_nights_is_not_flagged():
    hod = np.arange(24 * 28) % 24
    values = np.where((hod >= 9) & (hod < 17), 500.0, 0.0)
    values[0] = 500.0
    outage, trailing = detect_outages(values)
    assert not outage.any() and not trailing.any()


def test_trailing_zero_run_is_kept_and_reported():
    values = busy_series()
    values[-10:] = 0.0
    clean = clean_series("s", hours_ns(values.size), values)
    found = kinds(clean.findings)
    assert found["trailing_zero_run"]["hours"] == 10
    assert "outage" not in found
    assert clean.observed[-10:].all() and (clean.values[-10:] == 0).all()


def test_leading_zeros_are_trimmed_and_reported():
    values = busy_series()
    values[:48] = 0.0
    clean = clean_series("s", hours_ns(values.size), values)
    assert kinds(clean.findings)["leading_zeros_trimmed"]["hours"] == 48
    assert clean.n_hours == values.size - 48
    assert clean.start == START + pd.Timedelta(hours=48)


def test_sub_hourly_stamps_are_resampled_by_summing_with_a_warning():
    n = 24 * 20
    ts10 = T0 + np.arange(n * 6, dtype=np.int64) * (HOUR_NS // 6)
    per10 = np.full(ts10.size, 10.0)
    clean = clean_series("s", ts10, per10)
    found = kinds(clean.findings)["irregular_frequency"]
    assert found["rows_off_the_hour"] == n * 5 and found["hours_after"] == n
    np.testing.assert_array_equal(clean.values, np.full(n, 60.0))


def test_coarser_than_hourly_history_is_an_input_error():
    ts = T0 + np.arange(30, dtype=np.int64) * 24 * HOUR_NS
    with pytest.raises(InputError, match="coarser than hourly"):
        clean_series("s", ts, np.ones(30))


def test_all_zero_series_is_reported():
    clean = clean_series("s", hours_ns(100), np.zeros(100))
    assert "all_zero" in kinds(clean.findings)


def test_impute_seasonal_falls_back_to_interpolation():
    values = np.array([1.0, np.nan, 3.0])
    np.testing.assert_allclose(impute_seasonal(values), [1.0, 2.0, 3.0])


def test_a_large_but_possible_spike_is_kept_and_reported():
    values = busy_series()
    median = float(np.median(values[values > 0]))
    values[100] = 80 * median  # a load test, or a day imported twice over
    values[101] = 60 * median
    clean = clean_series("r/m/c", hours_ns(values.size), values)
    spike = kinds(clean.findings)["spike"]
    assert spike["hours"] == 2 and spike["runs"] == 1
    assert spike["max_value"] == pytest.approx(80 * median) and spike["median"] == pytest.approx(median, rel=0.01)
    assert "kept as demand" in spike["action"]
    assert clean.values[100] == pytest.approx(80 * median)  # still learned from: the finding only reports it


def test_ordinary_peaks_are_not_spikes():
    values = busy_series()
    values[100] = 10 * np.median(values[values > 0])
    assert "spike" not in kinds(clean_series("r/m/c", hours_ns(values.size), values).findings)

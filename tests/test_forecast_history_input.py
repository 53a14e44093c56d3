"""The demand-history contract: each refusal names the file, the 1-based data row and the column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.ceilings import MAX_REQUESTS_PER_HOUR
from planner.errors import InputError
from planner.forecast.history_input import validated_history
from planner.forecast.run import clean_history
from planner.forecast.synthetic import synthetic_history
from planner.sources import named


@pytest.fixture(scope="module")
def history() -> pd.DataFrame:
    return synthetic_history(2, 3 * 168, seed=5)


def _refusal(frame: pd.DataFrame, measure: str = "requests") -> InputError:
    with pytest.raises(InputError) as caught:
        clean_history(named(frame, "hist.csv"), measure)
    return caught.value


def test_a_bad_value_names_the_file_and_its_1_based_data_row(history):
    frame = history.copy()
    frame.loc[6, "requests"] = -2.0  # the seventh data row; the header is row 0
    error = _refusal(frame)
    assert error.where == "hist.csv, row 7 (the header is row 0), column requests"
    assert "non-negative" in error.message


def test_rows_are_the_files_rows_after_the_history_was_cut(history):
    frame = history.copy()
    frame.loc[500, "requests"] = np.inf
    kept = named(frame, "hist.csv").iloc[100:]  # e.g. history before --as-of: labels stay the file's rows
    with pytest.raises(InputError, match=r"row 501 \(the header is row 0\)"):
        clean_history(kept)


def test_a_value_above_the_physical_ceiling_is_refused_not_learned(history):
    frame = history.copy()
    frame.loc[3, "requests"] = 1e30
    error = _refusal(frame)
    assert "above the ceiling" in error.message and f"{MAX_REQUESTS_PER_HOUR:.3g}" in error.message
    assert "row 4" in error.where
    frame.loc[3, "requests"] = MAX_REQUESTS_PER_HOUR  # the ceiling itself is believable
    validated_history(frame, "requests")


def test_true_false_is_not_a_count(history):
    frame = history.assign(requests=history["requests"] > 100)
    error = _refusal(frame)
    assert "true/false" in error.message and error.where == "hist.csv, column requests"


@pytest.mark.parametrize("stamps", [
    lambda ts: pd.to_datetime(ts, utc=True).astype("int64") // 10**9,  # epoch seconds, as integers
    lambda ts: (pd.to_datetime(ts, utc=True).astype("int64") // 10**9).astype(str),  # the same, as text
])
def test_epoch_numbers_in_ts_are_refused_with_a_hint_never_read_as_1970(history, stamps):
    frame = history.assign(ts=stamps(history["ts"]))
    error = _refusal(frame)
    assert error.where.startswith("hist.csv, row 1") and error.where.endswith("column ts")
    assert "number" in error.message and "ts_unit" in (error.fix or "")


def test_an_empty_key_cell_names_its_row(history):
    frame = history.copy()
    frame.loc[9, "region"] = "  "
    error = _refusal(frame)
    assert error.where == "hist.csv, row 10 (the header is row 0), column region" and "empty region" in error.message


def test_a_series_level_problem_names_the_file(history):
    frame = pd.concat([history, history.iloc[[4]]], ignore_index=True)
    error = _refusal(frame)
    assert error.where.startswith("hist.csv, series ") and "duplicate timestamp" in error.message


def test_without_a_recorded_file_the_history_is_named_by_what_it_is(history):
    frame = history.copy()
    frame.loc[0, "requests"] = -1.0
    with pytest.raises(InputError) as caught:
        clean_history(frame)
    assert caught.value.where.startswith("demand history, row 1")

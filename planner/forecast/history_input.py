"""The demand-history contract the forecaster reads, checked before any fit.

A history has ``ts`` (ISO-8601 UTC hour), ``region``, ``model``, ``traffic_class`` and the
measure being forecast (``requests`` or a token sum per hour), checked by one schema
(:func:`planner.contracts.schemas.history_schema`) that reports every problem at once. Each
names the file (when the shell recorded it, :mod:`planner.sources`), the 1-based data row
(the header is row 0) and the column:

* a key cell that is empty;
* a ``ts`` that is not an ISO-8601 date-time, with a hint when it is a bare number: an epoch
  count has no unit in the file, and guessing one would date the history to 1970 or 50,000 AD;
* a measure column of true/false (a boolean is not a count, though pandas would add it up);
* a measure that is not a number, negative, infinite, or above the physical ceiling of
  :mod:`planner.ceilings`. An empty cell is a missing hour, which the data-quality pass fills;
  a measure column empty in every row is an error, not a history of no demand.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.ceilings import ceiling_for
from planner.contracts import SERIES_KEY
from planner.contracts.schemas import HISTORY_TS_FIX, PARSED_TS, Problem, history_schema, raise_problems
from planner.errors import InputError
from planner.sources import data_row, source_of

KEY_COLUMNS = SERIES_KEY
DEFAULT_SOURCE = "demand history"
INGEST_COLUMNS = ("planner ingest writes ts, region, model, traffic_class, requests, prompt_tokens_sum, "
                  "output_tokens_sum")


def _file_row(frame: pd.DataFrame, position: int) -> str:
    """The file row of the frame's row at ``position``: its integer index label (as read), else the position."""
    label = frame.index[position]
    index = int(label) if isinstance(label, (int, np.integer)) and not isinstance(label, bool) else position
    return data_row(index)


def _is_boolean(column: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(column):
        return True
    if column.dtype == object:
        values = column.dropna()
        return bool(len(values)) and all(isinstance(v, (bool, np.bool_)) for v in values.iloc[:1000])
    return False


def _parsed_ts(ts: pd.Series) -> pd.Series:
    """UTC times of ``ts`` (NaT where a cell is not an ISO-8601 date-time)."""
    if pd.api.types.is_datetime64_any_dtype(ts):
        return ts.dt.tz_localize("UTC") if ts.dt.tz is None else ts.dt.tz_convert("UTC")
    # An hourly history repeats each timestamp once per series: parse each distinct text once.
    codes, distinct = pd.factorize(ts.astype(str))
    stamps = pd.to_datetime(pd.Series(distinct), utc=True, format="ISO8601", errors="coerce")
    return pd.Series(stamps.array[codes], index=ts.index)


def _column_problems(frame: pd.DataFrame, measure: str) -> list[Problem]:
    """Problems of a whole column, which make its cell checks meaningless."""
    problems = []
    ts = frame["ts"]
    if pd.api.types.is_bool_dtype(ts) or pd.api.types.is_numeric_dtype(ts):
        problems.append(Problem(0, "ts", f"ts holds numbers (e.g. {ts.iloc[0]!s}), not date-times", HISTORY_TS_FIX))
    if _is_boolean(frame[measure]):
        problems.append(Problem(None, measure, f"{measure} holds true/false values, not counts per hour",
                                f"write {measure} as a number per hour (true would be read as 1); {INGEST_COLUMNS}"))
    elif len(frame) and bool(frame[measure].isna().all()):
        problems.append(Problem(None, measure, f"{measure} is empty in every row: no hour has a count to forecast "
                                "(an empty cell is a missing hour, and a history of missing hours would be "
                                "forecast as no demand)", f"fill {measure} with the count per hour; {INGEST_COLUMNS}"))
    return problems


def validated_history(history: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Columns ``ts``, the keys (categorical), ``measure``, ``ts_ns`` and ``value``, sorted by series and time.

    Every problem of the history is reported at once, each kind at its first row with how many
    more rows share it.
    """
    source = source_of(history, DEFAULT_SOURCE)
    missing = [c for c in ("ts", *KEY_COLUMNS, measure) if c not in history.columns]
    if missing:
        raise InputError(f"demand history lacks column(s) {', '.join(missing)}", where=f"{source}, columns",
                         fix=f"produce the history with `planner ingest`: {INGEST_COLUMNS}")
    if history.empty:
        raise InputError("demand history has no rows", where=source, fix="check the file is the right one")
    frame = history[["ts", *KEY_COLUMNS, measure]].copy()
    problems = _column_problems(frame, measure)
    ts_text = not any(p.column == "ts" for p in problems)
    numeric = not any(p.column == measure for p in problems)
    checked = frame.assign(**{PARSED_TS: _parsed_ts(frame["ts"])}) if ts_text else frame
    schema = history_schema(measure, ceiling_for(measure), ts_text=ts_text, numeric=numeric)
    problems += schema.problems(checked, header_fix=str)

    def locate(problem: Problem) -> str:
        row = "" if problem.row is None else f"{_file_row(frame, problem.row)}, "
        return f"{row}column {problem.column}"

    raise_problems(sorted(problems, key=lambda p: -1 if p.row is None else p.row), source, locate,
                   more=lambda n: f" ({n} more row(s) like it)", many_fix=f"correct the rows listed above; "
                   f"{INGEST_COLUMNS}")
    for col in KEY_COLUMNS:
        # Categorical keys: sorting and grouping millions of rows move small integer codes,
        # not strings (categories sort lexicographically, so the series order is unchanged).
        frame[col] = frame[col].astype(str).astype("category")
    frame["ts_ns"] = checked[PARSED_TS].dt.as_unit("ns").astype("int64").to_numpy()
    frame["value"] = pd.to_numeric(frame[measure], errors="coerce").to_numpy(dtype=float)
    return frame.sort_values([*KEY_COLUMNS, "ts_ns"], kind="stable")

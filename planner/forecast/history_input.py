"""The demand-history contract the forecaster reads, checked row by row before any fit.

A history has ``ts`` (ISO-8601 UTC hour), ``region``, ``model``, ``traffic_class`` and the
measure being forecast (``requests`` or a token sum per hour). Each refusal is an input
error naming the file (when the shell recorded it, :mod:`planner.sources`), the 1-based data
row (the header is row 0) and the column:

* a key cell that is empty;
* a ``ts`` that is not an ISO-8601 date-time, with a hint when it is a bare number: an epoch
  count has no unit in the file, and guessing one would date the history to 1970 or 50,000 AD;
* a measure column of true/false (a boolean is not a count, though pandas would add it up);
* a measure that is not a number, negative, infinite, or above the physical ceiling of
  :mod:`planner.ceilings`. An empty cell is a missing hour, which the data-quality pass fills.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from planner.ceilings import ceiling_for
from planner.errors import InputError
from planner.sources import data_row, source_of

KEY_COLUMNS = ("region", "model", "traffic_class")
DEFAULT_SOURCE = "demand history"
_BARE_NUMBER = re.compile(r"^\s*-?\d+(\.\d+)?\s*$")
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


def _parse_ts(frame: pd.DataFrame, source: str) -> np.ndarray:
    """UTC nanoseconds since the epoch of every row, or an input error naming the first bad ``ts``."""
    ts = frame["ts"]
    hint = ("write ts as ISO-8601 UTC, e.g. 2025-10-01T00:00:00Z; a bare number (an epoch count) has no unit "
            "in the file, so convert it first (e.g. pandas.to_datetime(ts, unit='s')) or re-ingest the raw log "
            "with ts_unit in --map")
    if pd.api.types.is_bool_dtype(ts) or pd.api.types.is_numeric_dtype(ts):
        raise InputError(f"ts holds numbers (e.g. {ts.iloc[0]!s}), not date-times",
                         where=f"{source}, {_file_row(frame, 0)}, column ts", fix=hint)
    if pd.api.types.is_datetime64_any_dtype(ts):
        parsed = ts.dt.tz_localize("UTC") if ts.dt.tz is None else ts.dt.tz_convert("UTC")
    else:
        # An hourly history repeats each timestamp once per series: parse each distinct text once.
        codes, distinct = pd.factorize(ts.astype(str))
        stamps = pd.to_datetime(pd.Series(distinct), utc=True, format="ISO8601", errors="coerce")
        parsed = pd.Series(stamps.array[codes], index=ts.index)
    bad = parsed.isna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raw = str(ts.iloc[row])
        what = "is a bare number, not a date-time" if _BARE_NUMBER.match(raw) else "is not an ISO-8601 date-time"
        raise InputError(f"cannot parse timestamp '{raw}': it {what}",
                         where=f"{source}, {_file_row(frame, row)}, column ts", fix=hint)
    return parsed.dt.as_unit("ns").astype("int64").to_numpy()


def _values(frame: pd.DataFrame, measure: str, source: str) -> np.ndarray:
    """The measure as floats (NaN for an empty cell), or an input error naming the first bad row."""
    column = frame[measure]
    if _is_boolean(column):
        raise InputError(f"{measure} holds true/false values, not counts per hour",
                         where=f"{source}, column {measure}",
                         fix=f"write {measure} as a number per hour (true would be read as 1); {INGEST_COLUMNS}")
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
    ceiling = ceiling_for(measure)
    with np.errstate(invalid="ignore"):
        not_number = column.notna().to_numpy() & np.isnan(values)
        bad = not_number | (values < 0) | np.isinf(values) | (values > ceiling)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raw, value = column.iloc[row], values[row]
        if not_number[row] or value < 0 or np.isinf(value):
            problem = f"{measure} value '{raw}' is not a non-negative number"
            fix = f"{measure} counts per hour must be >= 0 (leave a missing hour out or empty)"
        else:
            problem = f"{measure} value '{raw}' is above the ceiling of {ceiling:.3g} per series and hour"
            fix = ("no fleet serves that much: check the source for a unit mix-up or an overflow, and correct "
                   "or drop the row (leave a missing hour empty)")
        others = int(bad.sum()) - 1
        more = f" ({others} more row(s) like it)" if others else ""
        raise InputError(problem + more, where=f"{source}, {_file_row(frame, row)}, column {measure}", fix=fix)
    return values


def validated_history(history: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Columns ``ts``, the keys (categorical), ``measure``, ``ts_ns`` and ``value``, sorted by series and time."""
    source = source_of(history, DEFAULT_SOURCE)
    missing = [c for c in ("ts", *KEY_COLUMNS, measure) if c not in history.columns]
    if missing:
        raise InputError(f"demand history lacks column(s) {', '.join(missing)}", where=f"{source}, columns",
                         fix=f"produce the history with `planner ingest`: {INGEST_COLUMNS}")
    if history.empty:
        raise InputError("demand history has no rows", where=source, fix="check the file is the right one")
    frame = history[["ts", *KEY_COLUMNS, measure]].copy()
    for col in KEY_COLUMNS:
        bad = (frame[col].isna() | (frame[col].astype(str).str.strip() == "")).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(f"empty {col}", where=f"{source}, {_file_row(frame, row)}, column {col}",
                             fix=f"every row needs a {col}")
        # Categorical keys: sorting and grouping millions of rows move small integer codes,
        # not strings (categories sort lexicographically, so the series order is unchanged).
        frame[col] = frame[col].astype(str).astype("category")
    frame["ts_ns"] = _parse_ts(frame, source)
    frame["value"] = _values(frame, measure, source)
    return frame.sort_values([*KEY_COLUMNS, "ts_ns"], kind="stable")

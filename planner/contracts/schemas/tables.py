"""The schemas of the tables that may hold millions of rows: the demand history, the forecast
and the plan (with the routed demand ``planner simulate`` reads).

Each checks the table as the reading code parsed it: the cells as written, plus the
columns parsed from them (``ts_parsed`` from ``ts``; numbers coerced, NaN where a cell is
not one), so a timestamp is parsed once. Every rule is reported at its first row, with how
many more rows break it (:attr:`FileSchema.rows_per_rule`). Problems of a whole column (true/
false where numbers belong, epoch numbers in ``ts``) are found by the reading code before
the schema runs, since they make every cell check meaningless.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from planner.contracts.columns import PLAN_KEY, SERIES_KEY
from planner.contracts.schemas.base import FileSchema, cell_check, row_check

if TYPE_CHECKING:
    import pandera.pandas as pa

PARSED_TS = "ts_parsed"
"""The column a reader adds with ``ts`` parsed to UTC (NaT where a cell is not a time)."""
HISTORY_TS_FIX = (
    "write ts as ISO-8601 UTC, e.g. 2025-10-01T00:00:00Z; a bare number (an epoch count) has no unit "
    "in the file, so convert it first (e.g. pandas.to_datetime(ts, unit='s')) or re-ingest the raw log "
    "with ts_unit in --map"
)
FORECAST_TS_FIX = "write hours as ISO-8601 UTC, e.g. 2026-11-01T00:00:00Z (a bare epoch number has no unit)"
FORECAST_FIX = "re-run `planner forecast`, or correct the row"
ORDER_TOLERANCE = 1e-6
"""Requests per hour by which a higher quantile may sit below a lower one (rounding noise only)."""
_BARE_NUMBER = re.compile(r"^\s*-?\d+(\.\d+)?\s*$")


def show(value: object) -> str:
    """A cell as the user wrote it (no numpy reprs)."""
    return str(value.item() if isinstance(value, np.generic) else value)


def _numbers(cells: pd.Series) -> npt.NDArray[np.float64]:
    """The cells as floats, NaN where a cell is not a number."""
    values: npt.NDArray[np.float64] = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)
    return values


def _filled(cells: pd.Series) -> pd.Series:
    """True where a key cell holds something other than blanks."""
    return pd.Series(cells.notna().to_numpy() & (cells.astype(str).str.strip() != "").to_numpy(), index=cells.index)


def _key_checks(fix_tail: str = "") -> dict[str, list[pa.Check]]:
    return {column: [cell_check("filled", _filled, f"empty {column}", f"every row needs a {column}{fix_tail}",
                                empty_passes=False)] for column in SERIES_KEY}


# --------------------------------------------------------------------------- demand history
def history_schema(measure: str, ceiling: float, *, ts_text: bool, numeric: bool) -> FileSchema:
    """A demand history of ``measure``: keys filled, ``ts`` an ISO-8601 time (when it is text,
    ``ts_text``) and, when the column holds numbers (``numeric``), each measure cell empty (a
    missing hour) or a count in 0..``ceiling``."""

    def unreadable(frame: pd.DataFrame, row: int) -> str:
        raw = str(frame["ts"].iloc[row])
        what = "is a bare number, not a date-time" if _BARE_NUMBER.match(raw) else "is not an ISO-8601 date-time"
        return f"cannot parse timestamp '{raw}': it {what}"

    def counts(frame: pd.DataFrame) -> pd.Series:
        values = _numbers(frame[measure])
        with np.errstate(invalid="ignore"):
            good = frame[measure].isna().to_numpy() | (np.isfinite(values) & (values >= 0))
        return pd.Series(good, index=frame.index)

    def believable(frame: pd.DataFrame) -> pd.Series:
        values = _numbers(frame[measure])
        with np.errstate(invalid="ignore"):
            return pd.Series(~(np.isfinite(values) & (values > ceiling)), index=frame.index)

    columns: dict[str, list[pa.Check]] = {"ts": [], **_key_checks(), measure: []}
    if ts_text:
        columns[PARSED_TS] = [cell_check("iso8601", lambda ts: ts.notna(), unreadable, HISTORY_TS_FIX,
                                         empty_passes=False, report_as="ts")]
    rows = [] if not numeric else [
        row_check(measure, "count", counts, lambda f, r: f"{measure} value '{f[measure].iloc[r]}' is not a "
                  "non-negative number", f"{measure} counts per hour must be >= 0 (leave a missing hour out or empty)"),
        row_check(measure, "ceiling", believable, lambda f, r: f"{measure} value '{f[measure].iloc[r]}' is above the "
                  f"ceiling of {ceiling:.3g} per series and hour",
                  "no fleet serves that much: check the source for a unit mix-up or an overflow, and correct or drop "
                  "the row (leave a missing hour empty)"),
    ]
    return FileSchema(columns, rows=rows, required=("ts", *SERIES_KEY, measure), rows_per_rule=1)


# --------------------------------------------------------------------------- forecast
def forecast_schema(demand: Sequence[str], quantiles: Sequence[str], ceiling: float, *, ts_text: bool
                    ) -> FileSchema:
    """A forecast: keys filled, ``ts`` an ISO-8601 time, every ``demand`` column (``mean`` and the
    quantiles, those that hold numbers) a rate in 0..``ceiling`` requests per hour, and the
    ``quantiles`` (in increasing level) not decreasing along a row."""

    def valid(cells: pd.Series) -> npt.NDArray[np.bool_]:
        values = _numbers(cells)
        with np.errstate(invalid="ignore"):
            good: npt.NDArray[np.bool_] = np.isfinite(values) & (values >= 0) & (values <= ceiling)
        return good

    def rate(column: str) -> list[pa.Check]:
        def at_least_zero(cells: pd.Series) -> pd.Series:
            values = _numbers(cells)
            with np.errstate(invalid="ignore"):
                return pd.Series(np.isfinite(values) & (values >= 0), index=cells.index)

        def below_ceiling(cells: pd.Series) -> pd.Series:
            values = _numbers(cells)
            with np.errstate(invalid="ignore"):
                return pd.Series(~(np.isfinite(values) & (values > ceiling)), index=cells.index)

        return [
            cell_check("rate", at_least_zero, lambda f, r: f"{column} must be a number >= 0 (requests per hour), got "
                       f"{_quoted(f[column].iloc[r])}", FORECAST_FIX, empty_passes=False),
            cell_check("ceiling", below_ceiling, lambda f, r: f"{column} value {_quoted(f[column].iloc[r])} is above "
                       f"the ceiling of {ceiling:.3g} requests per hour per series", FORECAST_FIX),
        ]

    def ordered(lower: str, upper: str) -> pa.Check:
        def crossed(frame: pd.DataFrame) -> npt.NDArray[np.bool_]:
            low, high = _numbers(frame[lower]), _numbers(frame[upper])
            with np.errstate(invalid="ignore"):  # a value already refused is not compared
                bad: npt.NDArray[np.bool_] = valid(frame[lower]) & valid(frame[upper]) & (low > high + ORDER_TOLERANCE)
            return bad

        def problem(frame: pd.DataFrame, row: int) -> str:
            low, high = _numbers(frame[lower])[row], _numbers(frame[upper])[row]
            n = int(crossed(frame).sum())
            return (f"{lower} ({low:g}) is above {upper} ({high:g}): quantiles must not decrease with the level "
                    f"({n} row{'s' if n != 1 else ''} in all)")

        return row_check(lower, f"order {lower} {upper}", lambda f: pd.Series(~crossed(f), index=f.index), problem,
                         "check the column names and their order; " + FORECAST_FIX,
                         place=lambda f, r: f"row {r + 1} (the header is row 0), columns '{lower}' and '{upper}'")

    columns: dict[str, list[pa.Check]] = {**_key_checks(fix_tail=f"; {FORECAST_FIX}"), "ts": []}
    if ts_text:
        columns[PARSED_TS] = [cell_check("iso8601", lambda ts: ts.notna(),
                                         lambda f, r: f"ts {_quoted(f['ts'].iloc[r])} is not an ISO-8601 time",
                                         FORECAST_TS_FIX, empty_passes=False, report_as="ts")]
    columns.update({column: rate(column) for column in demand})
    rows = [ordered(lower, upper) for lower, upper in zip(quantiles, quantiles[1:], strict=False)]
    return FileSchema(columns, rows=rows, required=(*SERIES_KEY, "ts"), rows_per_rule=1)


def _quoted(value: object) -> str:
    """A cell as the user wrote it, text quoted (no numpy reprs)."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


# --------------------------------------------------------------------------- plan and routed demand
def _whole(values: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    with np.errstate(invalid="ignore"):
        whole: npt.NDArray[np.bool_] = np.isfinite(values) & (values >= 0) & (values == np.floor(values))
    return whole


def count_check(column: str, unit: str, *, whole: bool) -> pa.Check:
    """Each cell a number >= 0 (whole when asked), finite and not NaN."""
    kind = "a whole number >= 0" if whole else "a number >= 0"

    def passes(cells: pd.Series) -> pd.Series:
        values = _numbers(cells)
        with np.errstate(invalid="ignore"):
            good = np.isfinite(values) & (values >= 0)
            if whole:
                good &= values == np.floor(values)
        return pd.Series(good, index=cells.index)

    return cell_check("count", passes, lambda f, r: f"{column} must be {kind} ({unit}), got {show(f[column].iloc[r])}",
                      f"write {unit} as {kind} in every row", empty_passes=False)


def plan_schema(columns: Sequence[str], *, numeric: Sequence[str], tp_written: bool) -> FileSchema:
    """A plan: whole replicas, GPUs and (when the file has it, ``tp_written``) GPUs per replica >= 1,
    else a whole GPUs per replica from the counts; one row per :data:`PLAN_KEY`. ``numeric``:
    the count columns that hold numbers (true/false columns are refused before)."""
    units = {"replicas": "replicas", "gpus": "GPUs", "tp_degree": "GPUs per replica"}
    checks: dict[str, list[pa.Check]] = {name: [] for name in columns}
    for name in numeric:
        checks[name] = [count_check(name, units[name], whole=True)]
    if tp_written and "tp_degree" in numeric:
        checks["tp_degree"].append(cell_check(
            "at least one", lambda tp: pd.Series(~(_numbers(tp) < 1), index=tp.index),
            lambda f, r: f"tp_degree must be at least 1, got {show(f['tp_degree'].iloc[r])}",
            "write the GPUs of one replica (1, 2, 4 or 8)"))

    def whole_per_replica(frame: pd.DataFrame) -> pd.Series:
        replicas, gpus = _numbers(frame["replicas"]), _numbers(frame["gpus"])
        with np.errstate(divide="ignore", invalid="ignore"):
            tp = np.where(replicas > 0, gpus / np.maximum(replicas, 1), 1.0)
            counted = _whole(replicas) & _whole(gpus)  # a count already refused is not divided
            bad = counted & ((tp < 1) | (tp != np.floor(tp)))
        return pd.Series(~bad, index=frame.index)

    def duplicates(frame: pd.DataFrame) -> pd.Series:
        return ~frame.loc[:, list(PLAN_KEY)].astype(str).duplicated(keep=False)

    def same_rows(frame: pd.DataFrame, row: int) -> npt.NDArray[np.intp]:
        keys = frame.loc[:, list(PLAN_KEY)].astype(str)
        return np.flatnonzero((keys == keys.iloc[row]).all(axis=1).to_numpy())

    def repeated(frame: pd.DataFrame, row: int) -> str:
        keys = frame.loc[:, list(PLAN_KEY)].astype(str)
        key = ", ".join(f"{c} {keys.iloc[row][c]}" for c in PLAN_KEY)
        return (f"the same plan entry ({key}) is given {same_rows(frame, row).size} times; its replicas would be "
                "added together")

    rows = [row_check("replicas", "unique", duplicates, repeated,
                      "keep one row per (period, region, sku, tp_degree, model, tier) with the total replicas",
                      place=lambda f, r: f"rows {' and '.join(str(int(i) + 1) for i in same_rows(f, r)[:5])} "
                                         "(the header is row 0)")]
    if not tp_written and {"replicas", "gpus"} <= set(numeric):
        def not_whole(frame: pd.DataFrame, row: int) -> str:
            gpus, replicas = _numbers(frame["gpus"])[row], _numbers(frame["replicas"])[row]
            return f"{show(gpus)} GPUs over {show(replicas)} replicas is not a whole number of GPUs per replica"

        rows.append(row_check("gpus", "whole per replica", whole_per_replica, not_whole,
                              "add a tp_degree column (GPUs per replica) or make gpus = replicas x GPUs per replica"))
    return FileSchema(checks, rows=rows, rows_per_rule=1)


def number_schema(column: str, unit: str, *, whole: bool) -> FileSchema:
    """One column of numbers >= 0 in ``unit`` (whole when asked): a rate of routed demand, a count."""
    return FileSchema({column: [count_check(column, unit, whole=whole)]}, rows_per_rule=1)

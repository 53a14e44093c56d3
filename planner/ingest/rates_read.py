"""Read and check aggregated demand tables for ``planner ingest --format rates``.

A rates table (CSV or Parquet, one or more files) has one row per interval and series.
Columns, each renamed by ``--map KEY=COLUMN``: ``start`` (ISO-8601, naive = UTC, or a
Parquet timestamp), ``end`` (optional: without the column an interval lasts one bucket,
``--freq``), ``region``, ``model``, ``traffic_class`` (each a column or a constant
``--region``/``--model``/``--traffic-class``), and one of ``requests`` (a count in the
interval) or ``rps`` (the mean rate over it, requests per second).

Every failure is an ``InputError`` naming the file, the data row (1-based, after the
header) and the column: a missing column, an unparsable or out-of-range time, an
``end`` not after its ``start``, a count or rate that is empty, not a number, infinite or
negative, an empty label, two intervals of one series that overlap (both rows named),
and a (model, class) the lengths do not cover. Nothing is computed until all pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from planner.contracts import HISTOGRAM_COLUMNS
from planner.errors import InputError
from planner.ingest.formats import LABEL_OPTIONS, LABELS, file_kind
from planner.ingest.rates import US_PER_S, Interval, Lengths
from planner.ingest.reader import TS_MAX_US, TS_MIN_US

START, END, REQUESTS, RPS = "start", "end", "requests", "rps"
RATES_KEYS: tuple[str, ...] = (START, END, *LABELS, REQUESTS, RPS)
RATES_EXAMPLE = "start=interval_start,end=interval_end,requests=count"
TABLE_FIX = "correct the value or drop the row"


@dataclass(frozen=True)
class Row:
    """Where an interval came from: its file and 1-based data row."""

    path: str
    row: int

    def where(self, column: str) -> str:
        return f"{self.path}, data row {self.row}, column {column!r}"


@dataclass(frozen=True)
class RatesTable:
    """The checked intervals of every file, each with the row it came from, and the measure read."""

    intervals: list[Interval]
    rows: list[Row]
    measure: str


def read_frame(path: str) -> pd.DataFrame:
    """One table as read: CSV cells as text (nothing guessed), Parquet with its own types."""
    kind = file_kind(path)
    if kind not in ("csv", "parquet"):
        raise InputError("a rates table is CSV or Parquet", where=path, fix="convert it to .csv or .parquet")
    try:
        if kind == "csv":
            return pd.read_csv(path, dtype=str, keep_default_na=False)
        return pd.read_parquet(path)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise InputError(f"cannot read the table: {exc}", where=path, fix="check the file is a valid table") from exc


def _columns(frame: pd.DataFrame, path: str, mapping: Mapping[str, str], constants: Mapping[str, str]
             ) -> dict[str, str]:
    """Field -> column of this file: mapped names, else the field's own name; ``end`` only if present.

    A constant label and a column of the label's name are refused together: the constant would
    silently merge the column's series."""
    for label in constants:
        if label in frame.columns:
            raise InputError(f"the table has a {label!r} column and {LABEL_OPTIONS[label]} was given too",
                             where=f"{path}, column {label!r}",
                             fix=f"drop {LABEL_OPTIONS[label]} to use the column, or rename the column")
    columns = {field: mapping.get(field, field) for field in (START, *(f for f in LABELS if f not in constants))}
    if END in mapping or END in frame.columns:
        columns[END] = mapping.get(END, END)
    measures = [m for m in (REQUESTS, RPS) if m in mapping] or [m for m in (REQUESTS, RPS) if m in frame.columns]
    if len(measures) != 1:
        what = "both a requests and an rps column" if measures else "no requests or rps column"
        raise InputError(f"the table has {what}; it needs exactly one", where=path,
                         fix="map the one to read, e.g. --map requests=COUNT_COLUMN or --map rps=RATE_COLUMN")
    columns[measures[0]] = mapping.get(measures[0], measures[0])
    missing = [(field, column) for field, column in columns.items() if column not in frame.columns]
    if missing:
        field, column = missing[0]
        raise InputError(f"column {column!r} (for {field}) is missing; the file has columns: "
                         f"{', '.join(map(repr, frame.columns))}", where=f"{path}, column {column!r}",
                         fix=f"map the right column with --map {field}=COLUMN")
    return columns


def _times_us(cells: pd.Series) -> npt.NDArray[np.float64]:
    """Microseconds since the epoch (as float, exact below 2^53), NaN where a cell is no ISO-8601 time."""
    if pd.api.types.is_datetime64_any_dtype(cells):
        stamps = cells.dt.tz_localize("UTC") if cells.dt.tz is None else cells.dt.tz_convert("UTC")
    elif pd.api.types.is_numeric_dtype(cells) or pd.api.types.is_bool_dtype(cells):
        return np.full(len(cells), np.nan)
    else:
        stamps = pd.to_datetime(cells.astype(str).str.strip(), utc=True, format="ISO8601", errors="coerce")
    missing = stamps.isna().to_numpy()
    filled = stamps.where(~missing, pd.Timestamp("2000-01-01", tz="UTC"))
    values: npt.NDArray[np.float64] = filled.dt.as_unit("us").astype("int64").to_numpy().astype(np.float64)
    values[missing] = np.nan
    values[(values < TS_MIN_US) | (values >= TS_MAX_US)] = np.nan
    return values


def _first_bad(bad: npt.NDArray[np.bool_]) -> int | None:
    positions = np.flatnonzero(bad)
    return int(positions[0]) if positions.size else None


def _check_times(frame: pd.DataFrame, path: str, column: str) -> npt.NDArray[np.float64]:
    times = _times_us(frame[column])
    first = _first_bad(np.isnan(times))
    if first is not None:
        raise InputError(f"{column} value {frame[column].iloc[first]!r} is not a date-time from 2000 to 2200",
                         where=Row(path, first + 1).where(column),
                         fix="write ISO-8601 such as 2026-01-01T00:00:00Z (naive times are read as UTC)")
    return times


def _check_amounts(frame: pd.DataFrame, path: str, column: str, measure: str) -> npt.NDArray[np.float64]:
    cells = frame[column]
    numbers = np.full(len(cells), np.nan) if pd.api.types.is_bool_dtype(cells) else \
        pd.to_numeric(cells, errors="coerce").to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        first = _first_bad(~(np.isfinite(numbers) & (numbers >= 0)))
    if first is not None:
        raw = cells.iloc[first]
        what = "is negative" if np.isfinite(numbers[first]) else "is not a number"
        unit = "a request count" if measure == REQUESTS else "a mean rate in requests per second"
        raise InputError(f"{column} value {raw!r} {what}; it must be {unit}, 0 or more",
                         where=Row(path, first + 1).where(column), fix=TABLE_FIX)
    return numbers


def _check_labels(frame: pd.DataFrame, path: str, columns: Mapping[str, str]) -> None:
    for label in LABELS:
        if label not in columns:
            continue
        column = columns[label]
        first = _first_bad((frame[column].isna() | (frame[column].astype(str).str.strip() == "")).to_numpy())
        if first is not None:
            raise InputError(f"{column} is empty; every interval needs a {label}", where=Row(path, first + 1).where(
                column), fix=f"fill the column, or pass {LABEL_OPTIONS[label]} VALUE for the whole table")


def read_file(path: str, mapping: Mapping[str, str], constants: Mapping[str, str], bucket_seconds: int
              ) -> tuple[list[Interval], list[Row], str]:
    """The checked intervals of one file, their rows, and the measure (requests or rps) it holds."""
    frame = read_frame(path).reset_index(drop=True)
    if frame.empty:
        raise InputError("the table has no data rows", where=path, fix="check the file was fully written")
    columns = _columns(frame, path, mapping, constants)
    measure = REQUESTS if REQUESTS in columns else RPS
    start = _check_times(frame, path, columns[START])
    end = _check_times(frame, path, columns[END]) if END in columns else start + bucket_seconds * US_PER_S
    amounts = _check_amounts(frame, path, columns[measure], measure)
    _check_labels(frame, path, columns)
    first = _first_bad(end <= start)
    if first is not None:
        column = columns.get(END, columns[START])
        raise InputError(f"the interval ends at {frame[column].iloc[first]!r}, not after its start "
                         f"{frame[columns[START]].iloc[first]!r}", where=Row(path, first + 1).where(column),
                         fix="an interval [start, end) needs end > start; correct or drop the row")
    labels = {label: (frame[columns[label]].astype(str).str.strip().tolist() if label in columns
                      else [constants[label]] * len(frame)) for label in LABELS}
    intervals, rows = [], []
    for i in range(len(frame)):
        length_s = (end[i] - start[i]) / US_PER_S
        requests = float(amounts[i]) if measure == REQUESTS else float(amounts[i]) * length_s
        intervals.append(Interval(labels["region"][i], labels["model"][i], labels["traffic_class"][i],
                                  int(start[i]), int(end[i]), requests))
        rows.append(Row(path, i + 1))
    return intervals, rows, measure


def check_overlaps(intervals: Sequence[Interval], rows: Sequence[Row], start_column: str) -> None:
    """Refuse two intervals of one series that overlap, naming both rows."""
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i].region, intervals[i].model,
                                                         intervals[i].traffic_class, intervals[i].start_us))
    for before, after in zip(order, order[1:], strict=False):
        a, b = intervals[before], intervals[after]
        if (a.region, a.model, a.traffic_class) == (b.region, b.model, b.traffic_class) and b.start_us < a.end_us:
            raise InputError(
                f"two intervals of ({a.region}, {a.model}, {a.traffic_class}) overlap: the one at "
                f"{rows[after].path}, data row {rows[after].row} starts before the one at "
                f"{rows[before].path}, data row {rows[before].row} ends, so their requests would be counted twice",
                where=f"{rows[before].where(start_column)} and {rows[after].where(start_column)}",
                fix="drop the duplicate row, or correct the interval bounds (intervals are [start, end))")


def read_rates(paths: Sequence[str], mapping: Mapping[str, str], constants: Mapping[str, str],
               bucket_seconds: int) -> RatesTable:
    """Every file's checked intervals (files in the given, sorted, order); one measure for all files."""
    intervals: list[Interval] = []
    rows: list[Row] = []
    measures = set()
    for path in paths:
        found, where, measure = read_file(path, mapping, constants, bucket_seconds)
        intervals += found
        rows += where
        measures.add(measure)
    if len(measures) > 1:
        raise InputError("some tables hold request counts and others rates", where=", ".join(paths),
                         fix="ingest them separately, or convert one kind")
    check_overlaps(intervals, rows, mapping.get(START, START))
    return RatesTable(intervals, rows, measures.pop())


def check_lengths(table: RatesTable, lengths: Lengths, source: str) -> None:
    """Refuse a (model, class) of the table that ``lengths`` does not cover, at its first row."""
    for interval, row in zip(table.intervals, table.rows, strict=True):
        if (interval.model, interval.traffic_class) not in lengths:
            known = ", ".join(f"{m}/{k}" for m, k in sorted(lengths)) or "none"
            raise InputError(
                f"no token lengths for model {interval.model!r}, class {interval.traffic_class!r} in {source} "
                f"(it has: {known})", where=f"{row.path}, data row {row.row}, columns 'model' and 'traffic_class'",
                fix="pass a --lengths histogram that `planner ingest` wrote from logs of this model and class")


def checked_histogram(histogram: pd.DataFrame) -> pd.DataFrame:
    """The ``--lengths`` histogram, its columns and bins checked (as the simulator checks them)."""
    from planner.sim.workload import validate_histogram

    missing = [c for c in HISTOGRAM_COLUMNS if c not in histogram.columns]
    if missing:
        raise InputError(f"the token histogram lacks column(s) {', '.join(missing)}", where="--lengths",
                         fix=f"pass the .histogram.csv of `planner ingest` (columns {', '.join(HISTOGRAM_COLUMNS)})")
    validate_histogram(histogram)
    return histogram

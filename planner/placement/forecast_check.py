"""The forecast contract that placement and simulation rely on, checked before any use.

A forecast (``planner forecast``, or one written by hand) is long: one row per (region,
model, traffic_class, ts) with requests per hour in ``mean`` and quantile columns ``qNN``.
Placement turns it into a plan hour by hour, so a forecast that silently lacks part of
the scenario gives a plan that silently lacks it too (a one-row forecast would give a
one-hour plan). :func:`check_forecast_contract` refuses, naming the file (recorded by the
shell, :mod:`planner.sources`), the 1-based data row (the header is row 0) and the column:

* an empty key cell (region, model, traffic_class) or a ``ts`` that is not an ISO-8601
  date-time (a bare epoch number has no unit; it is never taken as 1970);
* a demand value (``mean`` or a quantile) that is true/false, not a number, negative,
  infinite or above :data:`planner.ceilings.MAX_REQUESTS_PER_HOUR`;
* quantiles out of order in a row (q50 > q99): a quantile function never decreases;
* an origin, model or class the scenario does not declare, and a scenario origin or model
  with no row at all;
* hours that do not follow each other hour by hour over the whole planning horizon, from
  ``start`` (default: the forecast's first hour) for ``hours`` hours.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from planner.ceilings import MAX_REQUESTS_PER_HOUR
from planner.errors import InputError
from planner.scenario import Scenario
from planner.sources import data_row, source_of

KEY_COLUMNS = ("region", "model", "traffic_class")
QUANTILE_COLUMN = re.compile(r"^q(\d+(?:\.\d+)?)$")
ORDER_TOLERANCE = 1e-6
"""Requests per hour by which a higher quantile may sit below a lower one (rounding noise only)."""
HOUR = pd.Timedelta(hours=1)
FORECAST_FIX = "re-run `planner forecast`, or correct the row"


def _show(value: object) -> str:
    """A cell as the user wrote it (no numpy reprs)."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


def demand_columns(forecast: pd.DataFrame) -> list[str]:
    """``mean`` and the quantile columns present, quantiles in increasing level."""
    quantiles = sorted((c for c in forecast.columns if QUANTILE_COLUMN.match(str(c))),
                       key=lambda c: float(QUANTILE_COLUMN.match(str(c)).group(1)))  # type: ignore[union-attr]
    return (["mean"] if "mean" in forecast.columns else []) + quantiles


def _check_keys(forecast: pd.DataFrame, source: str) -> None:
    missing = [c for c in (*KEY_COLUMNS, "ts") if c not in forecast.columns]
    if missing:
        raise InputError(f"the forecast lacks the column(s) {', '.join(missing)}", where=source,
                         fix="pass a forecast from `planner forecast` (columns region, model, traffic_class, ts, "
                             "mean, q50, q90, q95, q99)")
    for column in KEY_COLUMNS:
        cells = forecast[column]
        empty = np.flatnonzero((cells.isna() | (cells.astype(str).str.strip() == "")).to_numpy())
        if empty.size:
            raise InputError(f"empty {column}", where=f"{source}, {data_row(int(empty[0]))}, column '{column}'",
                             fix=f"every row needs a {column}; {FORECAST_FIX}")


def _hours(forecast: pd.DataFrame, source: str) -> pd.Series:
    ts = forecast["ts"]
    where = f"{source}, {data_row(0)}, column 'ts'"
    hint = "write hours as ISO-8601 UTC, e.g. 2026-11-01T00:00:00Z (a bare epoch number has no unit)"
    if pd.api.types.is_bool_dtype(ts) or pd.api.types.is_numeric_dtype(ts):
        raise InputError(f"ts holds numbers (e.g. {_show(ts.iloc[0])}), not date-times", where=where, fix=hint)
    stamps = pd.to_datetime(ts.astype(str), utc=True, errors="coerce", format="ISO8601")
    bad = np.flatnonzero(stamps.isna().to_numpy())
    if bad.size:
        raise InputError(f"ts {_show(ts.iloc[bad[0]])} is not an ISO-8601 time",
                         where=f"{source}, {data_row(int(bad[0]))}, column 'ts'", fix=hint)
    return stamps.dt.floor("h")


def _check_values(forecast: pd.DataFrame, source: str) -> None:
    columns = demand_columns(forecast)
    values = {}
    for column in columns:
        cells = forecast[column]
        if pd.api.types.is_bool_dtype(cells):
            raise InputError(f"{column} holds true/false values, not requests per hour",
                             where=f"{source}, column '{column}'", fix=FORECAST_FIX)
        numbers = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~(np.isfinite(numbers) & (numbers >= 0) & (numbers <= MAX_REQUESTS_PER_HOUR)))
        if bad.size:
            row = int(bad[0])
            above = np.isfinite(numbers[row]) and numbers[row] > MAX_REQUESTS_PER_HOUR
            problem = (f"{column} value {_show(cells.iloc[row])} is above the ceiling of "
                       f"{MAX_REQUESTS_PER_HOUR:.3g} requests per hour per series" if above else
                       f"{column} must be a number >= 0 (requests per hour), got {_show(cells.iloc[row])}")
            raise InputError(problem, where=f"{source}, {data_row(row)}, column '{column}'", fix=FORECAST_FIX)
        values[column] = numbers
    quantiles = [c for c in columns if c != "mean"]
    for lower, upper in zip(quantiles, quantiles[1:], strict=False):
        crossed = np.flatnonzero(values[lower] > values[upper] + ORDER_TOLERANCE)
        if crossed.size:
            row = int(crossed[0])
            raise InputError(
                f"{lower} ({values[lower][row]:g}) is above {upper} ({values[upper][row]:g}): quantiles must not "
                f"decrease with the level ({crossed.size} row{'s' if crossed.size != 1 else ''} in all)",
                where=f"{source}, {data_row(row)}, columns '{lower}' and '{upper}'",
                fix="check the column names and their order; " + FORECAST_FIX)


def _check_coverage(forecast: pd.DataFrame, hours_of_rows: pd.Series, scenario: Scenario, source: str, *,
                    hours: int, start: pd.Timestamp | None) -> None:
    for column, declared, what in (("region", scenario.origin_names, "origin"),
                                   ("model", scenario.model_names, "model"),
                                   ("traffic_class", scenario.class_names, "traffic class")):
        cells = forecast[column].astype(str)
        unknown = np.flatnonzero(~cells.isin(declared).to_numpy())
        if unknown.size:
            names = sorted(set(cells.iloc[unknown]))
            raise InputError(
                f"the forecast has {what}(s) {', '.join(names)} that the scenario does not declare",
                where=f"{source}, {data_row(int(unknown[0]))}, column '{column}'",
                fix=f"declare them in the scenario or drop those rows (scenario {what}s: {', '.join(declared)})")
        if what == "traffic class":  # a class without demand in the forecast is a class with no traffic
            continue
        present = set(cells)
        absent = [name for name in declared if name not in present]
        if absent:
            raise InputError(
                f"the forecast has no row for the scenario's {what}(s) {', '.join(absent)}",
                where=f"{source}, column '{column}'",
                fix=f"forecast every {what} the scenario declares (a history with its demand), or remove "
                    f"{'it' if len(absent) == 1 else 'them'} from the scenario")
    first = hours_of_rows.min() if start is None else pd.Timestamp(start).tz_convert("UTC").floor("h")
    wanted = pd.date_range(first, periods=hours, freq="h")
    given = pd.DatetimeIndex(hours_of_rows.unique())
    missing = wanted.difference(given)
    if missing.empty:
        return
    span = f"{given.min():%Y-%m-%dT%H:%M:%SZ} to {given.max():%Y-%m-%dT%H:%M:%SZ}" if len(given) else "nothing"
    covered = len(wanted) - len(missing)
    raise InputError(
        f"the forecast covers {covered} of the {hours} hours the plan needs from {first:%Y-%m-%dT%H:%M:%SZ} "
        f"(it spans {span}; the first hour missing is {missing[0]:%Y-%m-%dT%H:%M:%SZ})",
        where=f"{source}, column 'ts'",
        fix=f"forecast every hour of the horizon (`planner forecast --horizon {hours}h`), or shorten the "
            "scenario's horizon")


def check_forecast_contract(forecast: pd.DataFrame, scenario: Scenario, *, hours: int,
                            start: pd.Timestamp | None = None) -> None:
    """Refuse a forecast that breaks the contract of the module docstring (InputError, nothing else)."""
    source = source_of(forecast, "forecast")
    if forecast.empty:
        raise InputError("the forecast has no rows", where=source, fix="pass a non-empty forecast")
    _check_keys(forecast, source)
    hours_of_rows = _hours(forecast, source)
    _check_values(forecast, source)
    _check_coverage(forecast, hours_of_rows, scenario, source, hours=hours, start=start)

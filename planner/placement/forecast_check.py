"""The forecast contract that placement and simulation rely on, checked before any use.

A forecast (``planner forecast``, or one written by hand) is long: one row per (region,
model, traffic_class, ts) with requests per hour in ``mean`` and quantile columns ``qNN``.
Placement turns it into a plan hour by hour, so a forecast that silently lacks part of
the scenario gives a plan that silently lacks it too (a one-row forecast would give a
one-hour plan). :func:`check_forecast_contract` refuses, naming the file (recorded by the
shell, :mod:`planner.sources`), the 1-based data row (the header is row 0) and the column.
The cells are checked by one schema (:func:`planner.contracts.schemas.forecast_schema`) that
reports every kind of problem at once; the scenario's series and hours after that:

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

import numpy as np
import pandas as pd

from planner.ceilings import MAX_REQUESTS_PER_HOUR
from planner.contracts import SERIES_KEY, quantile_columns
from planner.contracts.schemas import FORECAST_FIX, FORECAST_TS_FIX, PARSED_TS, Problem, forecast_schema, raise_problems
from planner.errors import InputError
from planner.scenario import Scenario
from planner.sources import data_row, source_of

KEY_COLUMNS = SERIES_KEY
HOUR = pd.Timedelta(hours=1)


def _show(value: object) -> str:
    """A cell as the user wrote it (no numpy reprs)."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


def demand_columns(forecast: pd.DataFrame) -> list[str]:
    """``mean`` and the quantile columns present, quantiles in increasing level."""
    return (["mean"] if "mean" in forecast.columns else []) + quantile_columns(forecast.columns)


def _locate(problem: Problem) -> str:
    return (f"column '{problem.column}'" if problem.row is None
            else f"{data_row(problem.row)}, column '{problem.column}'")


def _check_cells(forecast: pd.DataFrame, source: str) -> pd.Series:
    """Every row's hour (UTC, floored), after every problem of the forecast's cells is reported at once."""
    missing = [c for c in (*KEY_COLUMNS, "ts") if c not in forecast.columns]
    if missing:
        raise InputError(f"the forecast lacks the column(s) {', '.join(missing)}", where=source,
                         fix="pass a forecast from `planner forecast` (columns region, model, traffic_class, ts, "
                             "mean, q50, q90, q95, q99)")
    frame = forecast.reset_index(drop=True)
    ts = frame["ts"]
    problems: list[Problem] = []
    if pd.api.types.is_bool_dtype(ts) or pd.api.types.is_numeric_dtype(ts):
        problems.append(Problem(0, "ts", f"ts holds numbers (e.g. {_show(ts.iloc[0])}), not date-times",
                                FORECAST_TS_FIX))
        stamps = None
    else:
        stamps = pd.to_datetime(ts.astype(str), utc=True, errors="coerce", format="ISO8601")
        frame = frame.assign(**{PARSED_TS: stamps})
    demand = demand_columns(frame)
    flags = [c for c in demand if pd.api.types.is_bool_dtype(frame[c])]
    problems += [Problem(None, c, f"{c} holds true/false values, not requests per hour", FORECAST_FIX) for c in flags]
    numeric = [c for c in demand if c not in flags]
    schema = forecast_schema(numeric, [c for c in numeric if c != "mean"], MAX_REQUESTS_PER_HOUR,
                             ts_text=stamps is not None)
    problems += schema.problems(frame, header_fix=str)
    raise_problems(sorted(problems, key=lambda p: -1 if p.row is None else p.row), source, _locate,
                   many_fix=f"correct the rows listed above, or {FORECAST_FIX}")
    assert stamps is not None  # a numeric ts is a problem reported above
    return stamps.dt.floor("h")


def _check_coverage(forecast: pd.DataFrame, hours_of_rows: pd.Series, scenario: Scenario, source: str, *,
                    hours: int, start: pd.Timestamp | None) -> None:
    for column, declared, what, many in (("region", scenario.origin_names, "origin", "origins"),
                                         ("model", scenario.model_names, "model", "models"),
                                         ("traffic_class", scenario.class_names, "traffic class", "traffic classes")):
        cells = forecast[column].astype(str)
        unknown = np.flatnonzero(~cells.isin(declared).to_numpy())
        if unknown.size:
            names = sorted(set(cells.iloc[unknown]))
            raise InputError(
                f"the forecast has {what}(s) {', '.join(names)} that the scenario does not declare",
                where=f"{source}, {data_row(int(unknown[0]))}, column '{column}'",
                fix=f"declare them in the scenario or drop those rows (the scenario's {many}: {', '.join(declared)})")
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
    hours_of_rows = _check_cells(forecast, source)
    _check_coverage(forecast, hours_of_rows, scenario, source, hours=hours, start=start)

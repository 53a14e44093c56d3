"""Planning periods: how the forecast horizon is cut, and the demand each period must carry.

The forecast gives requests per hour per (origin, model, class) and hour, at several
quantiles. Placement provisions one quantile (the scenario's ``forecast_quantile``
unless overridden), converted to requests per second (÷ 3600).

Period schemes (``--periods``):

* ``hourly``: every forecast hour is a period of 1 h. Periods follow each other in time;
  switching costs apply between consecutive hours, not from the last back to the first.
* ``how`` or ``how:N``: hour-of-week blocks of N hours (N divides 168; ``how`` = ``how:1``).
  Every forecast hour falls in block ``(weekday·24 + hour) // N`` (UTC, Monday 00:00 = 0);
  a block's demand is the **maximum** over its hours of each series (so the plan covers
  every hour it stands for), and its weight is the number of forecast hours it stands for,
  which prices the horizon exactly. The blocks form a week that repeats, so switching
  costs wrap around from the last block to the first. ``how:4`` on a 4-week forecast
  turns 672 hourly periods into 42 blocks.

The forecast must cover every origin and model and, hour by hour, the scenario's horizon
or, when a planning window is given (``planner report`` plans a calendar month), exactly
the window's hours (:mod:`planner.placement.forecast_check`). It is clipped to the horizon
(its first ``horizon_hours`` distinct hours) or to the window; the plan JSON records how
many hours were used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.contracts import FORECAST_KEY, quantile_column
from planner.errors import InputError
from planner.placement.forecast_check import check_forecast_contract
from planner.placement.window import PlanningWindow, iso_hour
from planner.scenario import Scenario

HOURS_PER_WEEK = 168
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_SPEC = re.compile(r"^(hourly|how)(?::([1-9][0-9]*))?$")


@dataclass(frozen=True)
class PeriodSpec:
    kind: str  # "hourly" or "how"
    block_hours: int

    @property
    def text(self) -> str:
        return "hourly" if self.kind == "hourly" else f"how:{self.block_hours}"


def parse_periods(text: str) -> PeriodSpec:
    """'hourly' | 'how' | 'how:N' (N divides 168) -> PeriodSpec; anything else is an input error."""
    match = _SPEC.match(str(text).strip().lower())
    divisors = [n for n in range(1, HOURS_PER_WEEK + 1) if HOURS_PER_WEEK % n == 0]
    if match is None or (match.group(1) == "hourly" and match.group(2) not in (None, "1")):
        raise InputError(
            f"cannot read the period scheme {text!r}",
            where="--periods",
            fix="use 'hourly', 'how' (hour-of-week) or 'how:N' for N-hour blocks of the week",
        )
    size = int(match.group(2) or 1)
    if match.group(1) == "how" and size not in divisors:
        raise InputError(
            f"a block of {size} h does not divide the 168-hour week",
            where="--periods",
            fix=f"use one of how:{', how:'.join(str(n) for n in divisors)}",
        )
    return PeriodSpec(match.group(1), size)


@dataclass(frozen=True)
class Periods:
    """The planning periods, in order, and what each stands for."""

    labels: tuple[str, ...]
    hours: np.ndarray  # weight of each period in hours
    first_ts: tuple[str, ...]  # first forecast hour (UTC, ISO-8601) each period stands for
    cyclic: bool  # whether the last period is followed by the first (hour-of-week blocks)
    spec: str

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class Demand:
    """Demand in requests per second: ``rps[o, m, k, t]`` on the scenario's name order."""

    periods: Periods
    rps: np.ndarray
    quantile: float
    column: str
    forecast_hours_used: int
    forecast_hours_given: int
    series_without_forecast: tuple[str, ...]


def _fail(problem: str, fix: str, where: str = "forecast") -> InputError:
    return InputError(problem, where=where, fix=fix)


def _validated(forecast: pd.DataFrame, scenario: Scenario, column: str) -> pd.DataFrame:
    missing = [c for c in (*FORECAST_KEY, column) if c not in forecast.columns]
    if missing:
        raise _fail(
            f"the forecast lacks the column(s) {', '.join(missing)}",
            f"pass a forecast from `planner forecast` (columns region, model, traffic_class, ts, mean, q50, q90, "
            f"q95, q99), or choose a --quantile whose column ({column}) it has",
        )
    frame = forecast.loc[:, [*FORECAST_KEY, column]].copy()
    for name, known, what in (
        ("region", scenario.origin_names, "origin"),
        ("model", scenario.model_names, "model"),
        ("traffic_class", scenario.class_names, "traffic class"),
    ):
        frame[name] = frame[name].astype(str)
        unknown = sorted(set(frame[name]) - set(known))
        if unknown:
            raise _fail(
                f"the forecast has {what}(s) {', '.join(unknown)} that the scenario does not declare",
                f"declare them in the scenario or drop those rows (scenario {what}s: {', '.join(known)})",
            )
    stamps = pd.to_datetime(frame["ts"], utc=True, errors="coerce", format="ISO8601")
    bad = np.flatnonzero(stamps.isna().to_numpy())
    if bad.size:
        raise _fail(
            f"ts {forecast['ts'].iloc[bad[0]]!r} is not an ISO-8601 time",
            "write hours as e.g. 2026-11-01T00:00:00Z",
            where=f"forecast, row {bad[0] + 1}, column 'ts'",
        )
    frame["ts"] = stamps.dt.floor("h")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~(np.isfinite(values) & (values >= 0)))
    if bad.size:
        raise _fail(
            f"{column} must be a number >= 0 (requests per hour), got {forecast[column].iloc[bad[0]]!r}",
            "re-run the forecast, or fix the value",
            where=f"forecast, row {bad[0] + 1}, column '{column}'",
        )
    frame[column] = values
    duplicated = np.flatnonzero(frame.duplicated(subset=list(FORECAST_KEY)).to_numpy())
    if duplicated.size:
        row = frame.iloc[duplicated[0]]
        raise _fail(
            f"two rows for ({row['region']}, {row['model']}, {row['traffic_class']}) at {row['ts']:%Y-%m-%dT%H:%M:%SZ}",
            "keep one row per series and hour",
            where=f"forecast, row {duplicated[0] + 1}",
        )
    return frame


def _window_hours(hours_given: np.ndarray, window: PlanningWindow) -> np.ndarray:
    """The forecast hours inside ``window``; an input error unless the forecast covers every one of them."""
    given = pd.DatetimeIndex(hours_given)
    missing = window.hour_starts().difference(given)
    if len(missing):
        raise _fail(
            f"the forecast covers {iso_hour(given[0])} to {iso_hour(given[-1])}, which leaves {len(missing)} of the "
            f"planning window's {window.hours} hours without demand (the first at {iso_hour(missing[0])}); the "
            f"window is {window.describe()}",
            "forecast every hour of the window, from the first hour after the history to the window's end",
        )
    inside = np.asarray((given >= window.start) & (given < window.end), dtype=bool)
    kept: np.ndarray = hours_given[inside]
    return kept


def demand_from_forecast(
    forecast: pd.DataFrame, scenario: Scenario, quantile: float, spec: PeriodSpec,
    window: PlanningWindow | None = None,
) -> Demand:
    """Fold the forecast into periods and return demand in req/s per (origin, model, class, period).

    The periods stand for the scenario's horizon, or for exactly ``window``'s hours when given.
    """
    if window is None:
        check_forecast_contract(forecast, scenario, hours=scenario.horizon_hours)
    else:
        check_forecast_contract(forecast, scenario, hours=window.hours, start=window.start)
    column = quantile_column(quantile)
    frame = _validated(forecast, scenario, column)
    if frame.empty:
        raise _fail("the forecast has no rows", "pass a non-empty forecast")
    hours_given = np.sort(frame["ts"].unique())
    hours_used = hours_given[: scenario.horizon_hours] if window is None else _window_hours(hours_given, window)
    frame = frame[frame["ts"].isin(hours_used)]
    origins, models, classes = scenario.origin_names, scenario.model_names, scenario.class_names
    series = frame.groupby(["region", "model", "traffic_class"], sort=True).size()
    incomplete = series[series < len(hours_used)]
    if not incomplete.empty:
        (o, m, k), count = incomplete.index[0], int(incomplete.iloc[0])
        raise _fail(
            f"series ({o}, {m}, {k}) has {count} of the forecast's {len(hours_used)} hours",
            "forecast every series for the same hours (the forecast contract has one row per series and hour)",
        )
    present = set(series.index)
    absent = tuple(f"{o}/{m}/{k}" for o in origins for m in models for k in classes if (o, m, k) not in present)

    stamps = pd.DatetimeIndex(hours_used)
    if spec.kind == "hourly":
        slot = np.arange(len(stamps))
        labels = tuple(f"{ts:%Y-%m-%dT%H:%M:%SZ}" for ts in stamps)
        cyclic = False
    else:
        hour_of_week = stamps.day_of_week.to_numpy() * 24 + stamps.hour.to_numpy()
        block = hour_of_week // spec.block_hours
        used_blocks = np.unique(block)
        slot = np.searchsorted(used_blocks, block)
        labels = tuple(_block_label(int(b) * spec.block_hours, spec.block_hours) for b in used_blocks)
        cyclic = True
    n_periods = len(labels)
    hours = np.bincount(slot, minlength=n_periods).astype(float)
    first_index = [int(np.flatnonzero(slot == p)[0]) for p in range(n_periods)]
    first_ts = tuple(f"{stamps[i]:%Y-%m-%dT%H:%M:%SZ}" for i in first_index)

    rps = np.zeros((len(origins), len(models), len(classes), n_periods))
    slot_of_hour = pd.Series(slot, index=stamps)
    o_idx = frame["region"].map({n: i for i, n in enumerate(origins)}).to_numpy()
    m_idx = frame["model"].map({n: i for i, n in enumerate(models)}).to_numpy()
    k_idx = frame["traffic_class"].map({n: i for i, n in enumerate(classes)}).to_numpy()
    t_idx = slot_of_hour.reindex(pd.DatetimeIndex(frame["ts"])).to_numpy()
    np.maximum.at(rps, (o_idx, m_idx, k_idx, t_idx), frame[column].to_numpy() / 3600.0)
    periods = Periods(labels, hours, first_ts, cyclic, spec.text)
    return Demand(periods, rps, quantile, column, len(hours_used), len(hours_given), absent)


def _block_label(start_hour: int, size: int) -> str:
    """Hour-of-week block label: 'Mon08' for one hour, 'Mon08+4h' for a 4-hour block."""
    day, hour = divmod(start_hour, 24)
    return f"{DAY_NAMES[day]}{hour:02d}" + ("" if size == 1 else f"+{size}h")

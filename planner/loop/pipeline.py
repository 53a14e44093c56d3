"""``planner plan`` as one function: forecast the history as of a date, run the loop, compare policies.

The history is cut at ``as_of`` (rows with ``ts`` before it), so a run for a past date
sees exactly what was known then. The forecast starts at the first hour after the
history and covers the scenario's horizon; given a planning window instead (``planner
report`` plans its calendar month), it runs to the window's end, across any gap between
the history and the window, and every plan covers exactly the window's hours. The loop
(``run``) runs for the scenario's policy, and the policy comparison (``compare``) re-uses
that run for the policy it already covers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd

from planner.catalog import Catalog
from planner.contracts import FORECAST_QUANTILES
from planner.errors import InputError
from planner.forecast.model import ModelSpec
from planner.forecast.run import MAX_HORIZON_HOURS, ForecastResult, forecast_history
from planner.forecast.scaling import DemandScale, scale_forecast
from planner.loop.compare import PolicyOutcome, compare_policies
from planner.loop.run import LoopResult, LoopSettings, Notify, calibrate_policies, run_loop
from planner.placement.reserved import history_evidence
from planner.placement.window import HOUR, PlanningWindow, iso_hour
from planner.scenario import Scenario

if TYPE_CHECKING:
    from planner.calibrate.cache import CalibrationStore


@dataclass
class PipelineResult:
    history: pd.DataFrame
    forecast: ForecastResult
    loop: LoopResult
    comparison: list[PolicyOutcome] | None
    as_of: pd.Timestamp | None
    window: PlanningWindow | None = None


def parse_as_of(text: str | None) -> pd.Timestamp | None:
    """An ISO-8601 date or date-time (naive = UTC) as a UTC timestamp; None stays None."""
    if text is None:
        return None
    try:
        stamp = pd.Timestamp(str(text))
    except ValueError:
        raise InputError(f"--as-of {text!r} is not an ISO-8601 date-time", where="--as-of",
                         fix="pass e.g. --as-of 2026-11-01 or 2026-11-01T00:00:00Z") from None
    if pd.isna(stamp):
        raise InputError(f"--as-of {text!r} is not a date-time", where="--as-of", fix="pass e.g. --as-of 2026-11-01")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def history_as_of(history: pd.DataFrame, as_of: pd.Timestamp | None, where: str = "history",
                  month: str | None = None) -> pd.DataFrame:
    """The rows of ``history`` strictly before ``as_of`` (all rows when None).

    ``month``: the report month whose first instant ``as_of`` is, when the user gave no ``--as-of``; an error
    then names ``--month``, the option the user did pass."""
    if "ts" not in history.columns:
        raise InputError("the history has no 'ts' column", where=where,
                         fix="pass a demand history from `planner ingest` (ts, region, model, traffic_class, ...)")
    if as_of is None:
        return history
    stamps = pd.to_datetime(history["ts"].astype(str), utc=True, format="ISO8601", errors="coerce")
    kept = history[stamps < as_of]  # keeps the file's row labels, so a bad row is named as the file numbers it
    if kept.empty:
        first = stamps.min()
        if month is not None:
            raise InputError(f"the history has no rows before --month {month} (its first instant, "
                             f"{as_of:%Y-%m-%dT%H:%M:%SZ}): the month is before the history begins", where=where,
                             fix=f"pass a --month after the history's first hour ({first:%Y-%m-%dT%H:%M:%SZ}), "
                                 "or a history that reaches back before the month")
        raise InputError(f"the history has no rows before --as-of {as_of:%Y-%m-%dT%H:%M:%SZ}", where=where,
                         fix=f"pass an --as-of after the history's first hour ({first:%Y-%m-%dT%H:%M:%SZ})")
    return kept


def check_as_of_in_history(history: pd.DataFrame, as_of: pd.Timestamp | None, where: str = "history") -> None:
    """``planner plan --as-of``: a time within the history (up to the hour after its last). Later, the plan would
    start from the history's end all the same, so an --as-of after it would be silently ignored."""
    if as_of is None:
        return
    last = last_history_hour(history, where=where)
    if as_of > last + HOUR:
        raise InputError(f"--as-of {as_of:%Y-%m-%dT%H:%M:%SZ} is after the history's last hour ({iso_hour(last)}): "
                         "a plan starts from the history's end, so that time would be ignored", where="--as-of",
                         fix=f"pass an --as-of up to {iso_hour(last + HOUR)}, leave it out, or pass a history that "
                             "reaches it (planner report bridges up to a week of stale history, and says so)")


def last_history_hour(history: pd.DataFrame, where: str = "history") -> pd.Timestamp:
    """The start of the history's last hour (UTC)."""
    stamps = pd.to_datetime(history["ts"].astype(str), utc=True, format="ISO8601", errors="coerce")
    if stamps.isna().all():
        raise InputError("the history has no readable 'ts' value", where=where,
                         fix="write hours as ISO-8601 UTC, e.g. 2026-11-01T00:00:00Z")
    return stamps.max().floor("h")


def forecast_hours_to(window: PlanningWindow, history_end: pd.Timestamp, where: str = "history") -> int:
    """Hours from the first hour after ``history_end`` (the last history hour) to the end of ``window``."""
    if history_end >= window.start:
        raise InputError(f"the history reaches {iso_hour(history_end)}, inside or after the planning window "
                         f"({window.describe()}), so the forecast cannot cover the window's first hours", where=where,
                         fix="pass an --as-of at or before the window's first hour, so the plan starts from a "
                             "forecast of every hour of it")
    hours = int((window.end - history_end) / HOUR) - 1
    if hours > MAX_HORIZON_HOURS:
        raise InputError(f"the history ends {iso_hour(history_end)}: forecasting from there to the end of the "
                         f"planning window ({window.describe()}) takes {hours} hours, more than the forecast's "
                         f"{MAX_HORIZON_HOURS}", where=where, fix="pass a history that ends closer to the window")
    return hours


def run_pipeline(scenario: Scenario, history: pd.DataFrame, catalog: Catalog, profiles: pd.DataFrame,
                 settings: LoopSettings, *, as_of: pd.Timestamp | None = None, compare: list[str] | None = None,
                 histogram: pd.DataFrame | None = None, capacity: pd.DataFrame | None = None,
                 input_hashes: dict[str, str] | None = None, notify: Notify | None = None,
                 forecast_progress: Callable[[int, int], None] | None = None,
                 window: PlanningWindow | None = None, store: CalibrationStore | None = None,
                 demand_scales: Sequence[DemandScale] = ()) -> PipelineResult:
    """Forecast (then scale it by ``demand_scales``), then the loop for the scenario's policy, then (optionally)
    every policy in ``compare``.

    Without ``window`` the plans cover the scenario's horizon; with it, exactly the window's
    hours (the forecast then runs from the first hour after the history to the window's end).
    ``store`` is the calibration cache (:func:`planner.calibrate.calibrate`).
    """
    known = history_as_of(history, as_of)
    settings = with_evidence(settings, scenario, known)
    forecast = forecast_for_plan(scenario, known, settings, window=window, notify=notify,
                                 progress=forecast_progress)
    if demand_scales:
        forecast = replace(forecast, forecast=scale_forecast(forecast.forecast, demand_scales))
    return plan_from_forecast(scenario, known, forecast, catalog, profiles, settings, as_of=as_of, compare=compare,
                              histogram=histogram, capacity=capacity, input_hashes=input_hashes, notify=notify,
                              window=window, store=store)


def with_evidence(settings: LoopSettings, scenario: Scenario, known: pd.DataFrame) -> LoopSettings:
    """``settings`` with what the history ``known`` offers a reserved commitment (kept when already read)."""
    if settings.reserved_evidence is not None:
        return settings
    evidence = history_evidence(known, scenario.capacity.reserved_term_hours, settings.commit_on_short_history)
    return replace(settings, reserved_evidence=evidence)


def forecast_for_plan(scenario: Scenario, known: pd.DataFrame, settings: LoopSettings, *,
                      window: PlanningWindow | None = None, notify: Notify | None = None,
                      progress: Callable[[int, int], None] | None = None) -> ForecastResult:
    """The forecast a plan is made from: the scenario's horizon (or up to the window's end) with its backtest."""
    say = notify or (lambda _text: None)
    horizon_hours = scenario.horizon_hours if window is None else forecast_hours_to(window, last_history_hour(known))
    say(f"forecasting {horizon_hours} h ahead")
    result = forecast_history(known, horizon_hours=horizon_hours, quantiles=list(FORECAST_QUANTILES),
                              backtest=True, seed=settings.seed, engine=settings.engine,
                              workers=settings.workers, scheduler=settings.scheduler, progress=progress,
                              spec=ModelSpec(min_history_hours=settings.min_history_hours,
                                             max_growth=settings.max_growth,
                                             partial_hours=settings.partial_hours))
    for line in result.metadata["findings"]:  # what the forecast did to the data, before anything is bought on it
        say(line)
    return result


def plan_from_forecast(scenario: Scenario, known: pd.DataFrame, forecast: ForecastResult, catalog: Catalog,
                       profiles: pd.DataFrame, settings: LoopSettings, *, as_of: pd.Timestamp | None = None,
                       compare: list[str] | None = None, histogram: pd.DataFrame | None = None,
                       capacity: pd.DataFrame | None = None, input_hashes: dict[str, str] | None = None,
                       notify: Notify | None = None, window: PlanningWindow | None = None,
                       store: CalibrationStore | None = None) -> PipelineResult:
    """The loop (and the policy comparison) on a forecast already made; ``known`` is the history it came from."""
    say = notify or (lambda _text: None)
    calibrations = None
    if compare and capacity is None:  # every policy's calibration at once: no core idles between two policies
        calibrations = calibrate_policies(scenario, forecast.forecast, catalog, profiles, settings,
                                          [scenario.policy.name, *compare], histogram=histogram, notify=say,
                                          planning_window=window, store=store)
    loop = run_loop(scenario, forecast.forecast, catalog, profiles, settings, capacity=capacity, histogram=histogram,
                    input_hashes=input_hashes, notify=say, planning_window=window, store=store,
                    calibration=(calibrations or {}).get(scenario.policy.name))
    comparison = None
    if compare:
        comparison = compare_policies(scenario, forecast.forecast, catalog, profiles, settings, compare,
                                      histogram=histogram, known={loop.policy: loop}, notify=say,
                                      planning_window=window, store=store, calibrations=calibrations)
    return PipelineResult(known, forecast, loop, comparison, as_of, window)

"""``planner plan`` as one function: forecast the history as of a date, run the loop, compare policies.

The history is cut at ``as_of`` (rows with ``ts`` before it), so a run for a past date
sees exactly what was known then; the forecast covers the scenario's horizon from the
first hour after the history. The loop (``run``) runs for the scenario's policy, and the
policy comparison (``compare``) re-uses that run for the policy it already covers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from planner.catalog import Catalog
from planner.errors import InputError
from planner.forecast.run import ForecastResult, forecast_history
from planner.loop.compare import PolicyOutcome, compare_policies
from planner.loop.run import LoopResult, LoopSettings, Notify, run_loop
from planner.scenario import Scenario

FORECAST_QUANTILES = (0.5, 0.9, 0.95, 0.99)


@dataclass
class PipelineResult:
    history: pd.DataFrame
    forecast: ForecastResult
    loop: LoopResult
    comparison: list[PolicyOutcome] | None
    as_of: pd.Timestamp | None


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


def history_as_of(history: pd.DataFrame, as_of: pd.Timestamp | None, where: str = "history") -> pd.DataFrame:
    """The rows of ``history`` strictly before ``as_of`` (all rows when None)."""
    if "ts" not in history.columns:
        raise InputError("the history has no 'ts' column", where=where,
                         fix="pass a demand history from `planner ingest` (ts, region, model, traffic_class, ...)")
    if as_of is None:
        return history
    stamps = pd.to_datetime(history["ts"].astype(str), utc=True, format="ISO8601", errors="coerce")
    kept = history[stamps < as_of]  # keeps the file's row labels, so a bad row is named as the file numbers it
    if kept.empty:
        first = stamps.min()
        raise InputError(f"the history has no rows before --as-of {as_of:%Y-%m-%dT%H:%M:%SZ}", where=where,
                         fix=f"pass an --as-of after the history's first hour ({first:%Y-%m-%dT%H:%M:%SZ})")
    return kept


def run_pipeline(scenario: Scenario, history: pd.DataFrame, catalog: Catalog, profiles: pd.DataFrame,
                 settings: LoopSettings, *, as_of: pd.Timestamp | None = None, compare: list[str] | None = None,
                 histogram: pd.DataFrame | None = None, capacity: pd.DataFrame | None = None,
                 input_hashes: dict[str, str] | None = None, notify: Notify | None = None,
                 forecast_progress: Callable[[int, int], None] | None = None) -> PipelineResult:
    """Forecast, then the loop for the scenario's policy, then (optionally) every policy in ``compare``."""
    say = notify or (lambda _text: None)
    known = history_as_of(history, as_of)
    say(f"forecasting {scenario.horizon_hours} h ahead")
    forecast = forecast_history(known, horizon_hours=scenario.horizon_hours, quantiles=list(FORECAST_QUANTILES),
                                backtest=True, seed=scenario.seeds.base if settings.seed is None else settings.seed,
                                engine=settings.engine, workers=settings.workers, progress=forecast_progress)
    loop = run_loop(scenario, forecast.forecast, catalog, profiles, settings, capacity=capacity, histogram=histogram,
                    input_hashes=input_hashes, notify=say)
    comparison = None
    if compare:
        comparison = compare_policies(scenario, forecast.forecast, catalog, profiles, settings, compare,
                                      histogram=histogram, known={loop.policy: loop}, notify=say)
    return PipelineResult(known, forecast, loop, comparison, as_of)

"""Forecast a whole demand history: split into series, clean, fan out fits, assemble.

``forecast_history`` is the pure core of ``planner forecast``: a DataFrame in, a
``ForecastResult`` out (long forecast frame + JSON-able metadata), no files, no
terminal. The data-quality pass runs here in the calling process, so an input error
(duplicate timestamps, bad values) is raised before any work is fanned out; the
per-series fit, forecast and backtest run through ``planner.engine.run_tasks``. The
forecaster is chosen by name from ``planner.forecast.registry`` (the harmonic model by
default); the fallback rules and the backtest treat every forecaster alike.

Horizon alignment: every series is forecast for the same hours, the ``horizon``
hours after the last hour of the *whole* history. A series that ends earlier is
forecast across its gap as well (reported as a finding), so the placement step
always gets one row per series and hour.

Determinism: series are processed in sorted (region, model, traffic_class) order,
the forecast is analytic (quantiles are back-transformed Gaussian prediction
intervals, so no random numbers are drawn; ``seed`` is recorded in the metadata
for the run record), every fit runs single-threaded whatever the engine, and
outputs are rounded to fixed decimals. Same input gives byte-identical files,
whichever engine runs the fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planner.contracts import (
    DEFAULT_MAX_GROWTH,
    HORIZON_OPTION,
    MEASURES,
    DurationError,
    duration_hours,
    parse_duration,
    quantile_column,
)
from planner.engine import run_tasks
from planner.errors import InputError
from planner.forecast import backtest as bt
from planner.forecast.fallback import forecast_series
from planner.forecast.findings import summary_lines
from planner.forecast.forecaster import Forecaster, SeriesForecast, SeriesHistory
from planner.forecast.growth import check_max_growth, growth_findings
from planner.forecast.history_input import DEFAULT_SOURCE, KEY_COLUMNS, validated_history
from planner.forecast.model import ModelSpec
from planner.forecast.quality import (
    HOUR_NS,
    PARTIAL_HOURS_CHOICES,
    CleanSeries,
    check_partial_hours,
    clean_series,
    format_ts,
)
from planner.forecast.registry import DEFAULT_FORECASTER, make_forecaster
from planner.forecast.selection import SelectingForecaster
from planner.sources import source_of

MAX_HORIZON_HOURS = 92 * 24
VALUE_DECIMALS = 3


def hours_of(text: str, option: str, what: str, examples: str) -> int:
    """Whole hours of a duration option ('14d' -> 336, '36h' -> 36, '2w' -> 336); InputError naming ``option``."""
    try:
        return duration_hours(parse_duration(text, HORIZON_OPTION))
    except DurationError:
        raise InputError(f"cannot read {what} '{text}'", where=option,
                         fix=f"write a whole number with a unit: {examples}") from None


def parse_horizon(text: str) -> int:
    """'14d' -> 336, '36h' -> 36, '2w' -> 336. Raises InputError on anything else."""
    hours = hours_of(text, "--horizon", "horizon", "36h, 14d or 2w")
    if not 1 <= hours <= MAX_HORIZON_HOURS:
        raise InputError(f"horizon {hours} h is outside 1..{MAX_HORIZON_HOURS} h", where="--horizon",
                         fix="an hourly model is useful up to about 3 months ahead; use 1h..92d")
    return hours


MIN_HISTORY_FLOOR_HOURS = 24


def parse_min_history(text: str) -> int:
    """'7d' -> 168, '240h' -> 240: the history a series needs before a model replaces the seasonal naive."""
    hours = hours_of(text, "--min-history", "minimum history", "168h, 7d or 2w")
    if hours < MIN_HISTORY_FLOOR_HOURS:
        raise InputError(f"a minimum history of {hours} h is under one day", where="--min-history",
                         fix="a model needs at least one day to see a daily cycle; use 1d or more (default 7d)")
    return hours


def parse_max_growth(value: float) -> float:
    """``--max-growth``: a multiple of at least 1 of each series' peak (InputError otherwise)."""
    problem = check_max_growth(value)
    if problem:
        raise InputError(problem, where="--max-growth",
                         fix=f"pass a multiple of 1 or more, e.g. --max-growth 3 (default {DEFAULT_MAX_GROWTH:g})")
    return float(value)


def parse_partial_hours(value: str) -> str:
    """``--partial-hours``: ``mask`` or ``keep`` (InputError otherwise)."""
    problem = check_partial_hours(value)
    if problem:
        raise InputError(problem, where="--partial-hours",
                         fix=f"pass --partial-hours {' or --partial-hours '.join(PARTIAL_HOURS_CHOICES)} "
                             "(default mask: a partly collected hour is not learned as demand)")
    return value


def parse_quantiles(text: str) -> list[float]:
    """'0.5,0.9,0.95,0.99' -> [0.5, 0.9, 0.95, 0.99] (sorted, unique, each in (0, 1))."""
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    if not items:
        raise InputError("no quantiles given", where="--quantiles", fix="e.g. --quantiles 0.5,0.9,0.95,0.99")
    levels = []
    for item in items:
        try:
            level = float(item)
        except ValueError:
            raise InputError(f"quantile '{item}' is not a number", where="--quantiles",
                             fix="give comma-separated numbers between 0 and 1, e.g. 0.5,0.9") from None
        if not 0.0 < level < 1.0:
            raise InputError(f"quantile {item} is outside (0, 1)", where="--quantiles",
                             fix="give levels strictly between 0 and 1, e.g. 0.5,0.9,0.95,0.99")
        levels.append(level)
    names = [quantile_column(lvl) for lvl in levels]
    if len(set(names)) != len(names):
        raise InputError(f"repeated quantile in '{text}'", where="--quantiles", fix="list each level once")
    return sorted(levels)


@dataclass(frozen=True)
class SeriesTask:
    """Everything one worker needs for one series (pickles cheaply: numpy arrays and an unfitted forecaster)."""

    key: tuple[str, str, str]
    history: SeriesHistory
    horizon_total: int
    horizon: int
    levels: tuple[float, ...]
    forecaster: Forecaster
    min_history_hours: int
    backtest: bool
    max_growth: float | None = None


def run_series(task: SeriesTask) -> dict[str, Any]:
    """Fit, forecast and (optionally) backtest one series. Top-level so it pickles."""
    levels = sorted(set(task.levels) | set(bt.INTERVAL_LEVELS))
    forecaster = task.forecaster
    if isinstance(forecaster, SelectingForecaster):  # its backtest windows follow this run's horizon
        forecaster = forecaster.for_horizon(task.horizon, task.min_history_hours, levels, task.max_growth)
    result = forecast_series(forecaster, task.history, task.horizon_total, levels, task.min_history_hours,
                             task.max_growth)
    details = dict(result.details)
    selection_backtest = details.pop("backtest", None)
    cut = task.horizon_total - task.horizon
    out: dict[str, Any] = {
        "mean": result.mean[cut:],
        "quantiles": {lvl: result.quantiles[lvl][cut:] for lvl in task.levels},
        "model_used": result.model_used,
        "fallback_reason": result.fallback_reason,
        "details": details,
    }
    if task.backtest:
        out["backtest"] = _backtest(task, forecaster, result, selection_backtest, levels)
    return out


def _backtest(task: SeriesTask, forecaster: Forecaster, result: SeriesForecast,
              selection_backtest: dict[str, Any] | None, levels: list[float]) -> dict[str, Any]:
    """The series' backtest block: the selection's own when it chose the model, else a run of its own."""
    if not isinstance(forecaster, SelectingForecaster):
        return bt.backtest_series(forecaster, task.history, task.horizon, levels, task.min_history_hours,
                                  max_growth=task.max_growth)
    if selection_backtest is not None:
        return selection_backtest
    skipped = result.details.get("selection", {}).get("skipped")
    return {"skipped": skipped or result.fallback_reason or "no model was selected"}


@dataclass
class ForecastResult:
    forecast: pd.DataFrame
    metadata: dict[str, Any]
    series_rows: list[dict[str, Any]] = field(default_factory=list)

    def summary_rows(self) -> list[dict[str, Any]]:
        """One row per series for the CLI's summary table (or ``--json``)."""
        return [dict(row) for row in self.series_rows]


def _r(x: float | None, digits: int = 6) -> float | None:
    if x is None or not np.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def _round_tree(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _round_tree(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_round_tree(v) for v in obj]
    if isinstance(obj, float | np.floating):
        return _r(float(obj))
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def _start_hour(clean: CleanSeries) -> int:
    """Hours since the Unix epoch of the series' first hour."""
    return int(clean.start.value // HOUR_NS)


def clean_history(history: pd.DataFrame, measure: str = "requests",
                  partial_hours: str = "mask") -> list[tuple[tuple[str, str, str], CleanSeries]]:
    """Validate ``history`` and run the data-quality pass on every series, in sorted key order;
    ``partial_hours`` (``mask`` or ``keep``) says what happens to partly collected hours.

    Raises InputError for a missing column, an unparsable timestamp, a negative or
    non-numeric value, a duplicate timestamp, a coarser-than-hourly series or an unknown
    ``partial_hours``.
    """
    if measure not in MEASURES:
        raise InputError(f"unknown measure '{measure}'", where="--measure", fix=f"use one of {', '.join(MEASURES)}")
    parse_partial_hours(partial_hours)
    frame = validated_history(history, measure)
    source = source_of(history, DEFAULT_SOURCE)
    cleaned = []
    for key, group in frame.groupby(list(KEY_COLUMNS), sort=True, observed=True):
        try:
            clean = clean_series("/".join(key), group["ts_ns"].to_numpy(), group["value"].to_numpy(), partial_hours)
        except InputError as exc:  # a series-level problem (duplicate or coarse timestamps): name the file too
            raise InputError(exc.message, where=f"{source}, {exc.where}", fix=exc.fix) from None
        cleaned.append(((str(key[0]), str(key[1]), str(key[2])), clean))
    return cleaned


Key = tuple[str, str, str]


def forecast_history(history: pd.DataFrame, *, horizon_hours: int, quantiles: list[float],
                     measure: str = "requests", backtest: bool = True, seed: int = 0, engine: str = "local",
                     workers: int | None = None, progress: Callable[[int, int], None] | None = None,
                     spec: ModelSpec | None = None, scheduler: str | None = None,
                     forecaster: str = DEFAULT_FORECASTER) -> ForecastResult:
    """Forecast every (region, model, traffic_class) series of ``history``; see the module docstring.

    ``horizon_hours``: hours after the history's last hour (``parse_horizon``).
    ``quantiles``: levels in (0, 1), one output column each (``parse_quantiles``).
    ``measure``: one of ``MEASURES``. ``backtest``: run the rolling-origin backtest
    (about 4x the fitting work). ``seed``: recorded only (no random draws).
    ``engine``/``workers``/``scheduler``: ``planner.engine.run_tasks`` (``local``,
    ``processes``, ``dask`` or ``auto``; ``scheduler`` is a Dask scheduler address for
    ``dask``); they never change the output. ``progress(done, total)`` is called per series.
    ``spec``: the forecast settings (``ModelSpec()`` by default): the history a series needs
    before it gets the forecaster rather than the seasonal naive, the harmonic model's
    search space, and whether partly collected hours are masked. ``forecaster``: a name in
    ``planner.forecast.registry.FORECASTERS``.
    Raises InputError for invalid input; model failures become visible fallbacks.
    """
    if not 1 <= int(horizon_hours) <= MAX_HORIZON_HOURS:
        raise InputError(f"a forecast horizon of {horizon_hours} h is outside 1..{MAX_HORIZON_HOURS} h",
                         where="horizon",
                         fix="forecast between 1 hour and 92 days ahead: shorten the scenario's horizon (or --horizon)")
    levels = parse_quantiles(",".join(repr(float(q)) for q in quantiles))
    spec = spec or ModelSpec()
    model = make_forecaster(forecaster, spec)
    series = clean_history(history, measure, spec.partial_hours)
    global_end = max(_start_hour(clean) + clean.n_hours - 1 for _, clean in series)
    tasks = [_series_task(key, clean, global_end, horizon_hours, levels, model, spec, backtest)
             for key, clean in series]
    outcomes = run_tasks(run_series, tasks, engine=engine, workers=workers, progress=progress, scheduler=scheduler)

    hour = pd.Timedelta(hours=1)
    start = pd.Timestamp(global_end * HOUR_NS, tz="UTC") + hour
    stamps = [format_ts(start + i * hour) for i in range(horizon_hours)]
    qcols = [quantile_column(lvl) for lvl in levels]
    parts, series_meta, rows = [], [], []
    for (key, clean), outcome in zip(series, outcomes, strict=True):
        parts.append(_forecast_block(key, outcome, stamps, levels, qcols))
        series_meta.append(_series_entry(key, clean, outcome, backtest, levels))
        rows.append(_summary_row(outcome, series_meta[-1]))
    forecast = pd.concat(parts, ignore_index=True)[["region", "model", "traffic_class", "ts", "mean", *qcols,
                                                    "model_used"]]
    parameters = {"measure": measure, "horizon_hours": int(horizon_hours), "quantiles": levels,
                  "quantile_columns": qcols, "backtest": bool(backtest),
                  "seed": int(seed), "random_draws": "none: quantiles are analytic",
                  "model_spec": spec.as_dict(), "backtest_windows": bt.N_WINDOWS,
                  "mase_scale": "in-sample mean absolute error of the 168 h seasonal naive, "
                                "trailing 8 weeks before each origin"}
    metadata = _metadata(parameters, stamps, series_meta, backtest)
    return ForecastResult(forecast=forecast, metadata=_round_tree(metadata), series_rows=rows)


def _series_task(key: Key, clean: CleanSeries, global_end: int, horizon_hours: int, levels: list[float],
                 forecaster: Forecaster, spec: ModelSpec, backtest: bool) -> SeriesTask:
    """The worker's task for one series; a series that ends early is forecast across its gap (a finding)."""
    t_start_abs = _start_hour(clean)
    gap = global_end - (t_start_abs + clean.n_hours - 1)
    if gap > 0:
        clean.findings.append({"kind": "ends_early", "series": "/".join(key), "hours": int(gap),
                               "action": "forecast extended across the gap to the common horizon"})
    history = SeriesHistory(clean.values, clean.filled, clean.observed, t_start_abs)
    return SeriesTask(key, history, gap + horizon_hours, horizon_hours, tuple(levels), forecaster,
                      spec.min_history_hours, backtest, spec.max_growth)


def _forecast_block(key: Key, outcome: dict[str, Any], stamps: list[str], levels: list[float],
                    qcols: list[str]) -> pd.DataFrame:
    """One series' rows of the forecast file, values rounded to ``VALUE_DECIMALS``."""
    block: dict[str, Any] = {"region": key[0], "model": key[1], "traffic_class": key[2], "ts": stamps,
                             "mean": np.round(outcome["mean"], VALUE_DECIMALS) + 0.0}
    for lvl, col in zip(levels, qcols, strict=True):
        block[col] = np.round(outcome["quantiles"][lvl], VALUE_DECIMALS) + 0.0
    block["model_used"] = outcome["model_used"]
    return pd.DataFrame(block)


def _series_entry(key: Key, clean: CleanSeries, outcome: dict[str, Any], backtest: bool,
                  levels: list[float]) -> dict[str, Any]:
    """One series' block of the metadata: the model, its fallback, the history, data quality and backtest."""
    details = outcome["details"]
    series = "/".join(key)
    return {
        "series": series, "region": key[0], "model": key[1], "traffic_class": key[2],
        "model_used": outcome["model_used"],
        "fallback": outcome["fallback_reason"] is not None,
        "fallback_reason": outcome["fallback_reason"],
        "order": details.get("arima_order"), "aic": details.get("aic"), "fit": details,
        "history": {"start": format_ts(clean.start), "end": format_ts(clean.end), "hours": clean.n_hours,
                    "observed_hours": int(clean.observed.sum())},
        "data_quality": clean.findings,
        "forecast_findings": growth_findings(series, details.get("growth"), levels),
        "backtest": outcome.get("backtest") if backtest else None,
    }


def _summary_row(outcome: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """One series' row of the CLI summary table; backtest columns are None when it was skipped or not run."""
    bt_block = entry["backtest"]
    ok = bt_block is not None and "skipped" not in bt_block
    return {
        "series": entry["series"], "model_used": outcome["model_used"], "aic": _r(outcome["details"].get("aic")),
        "mase": _r(bt_block["model"]["mase"], 4) if ok else None,
        "mase_naive24": _r(bt_block["naive24"]["mase"], 4) if ok else None,
        "mase_naive168": _r(bt_block["naive168"]["mase"], 4) if ok else None,
        "cov80": _r(bt_block["model"]["coverage80"], 4) if ok else None,
        "cov90": _r(bt_block["model"]["coverage90"], 4) if ok else None,
        "fallback": outcome["fallback_reason"] or "",
    }


def _metadata(parameters: dict[str, Any], stamps: list[str], series_meta: list[dict[str, Any]],
              backtest: bool) -> dict[str, Any]:
    return {
        "parameters": parameters,
        "forecast_start": stamps[0], "forecast_end": stamps[-1],
        "n_series": len(series_meta),
        "n_fallbacks": sum(1 for s in series_meta if s["fallback"]),
        "n_data_quality_findings": sum(len(s["data_quality"]) for s in series_meta),
        "findings": summary_lines(series_meta),
        "series": series_meta,
        "backtest_overall": bt.overall([s["backtest"] for s in series_meta]) if backtest else None,
    }

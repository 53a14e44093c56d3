"""``planner forecast``: read the history, forecast it, write the forecast, its metadata and plots, record."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from planner.settings import resolve_settings
from planner.storage import file_sha256, staged_outputs
from planner.workflows.common import read_named, record_settings
from planner.workflows.files import write_plots

if TYPE_CHECKING:
    from planner.forecast.model import ModelSpec
    from planner.forecast.run import ForecastResult
    from planner.runs import RunContext


@dataclass(frozen=True)
class ForecastOptions:
    """``planner forecast``'s options (horizon and quantiles already parsed)."""

    horizon_hours: int
    quantiles: list[float]
    measure: str = "requests"
    seed: int = 0
    engine: str = "auto"
    workers: int | None = None
    scheduler: str | None = None
    min_history_hours: int | None = None
    max_growth: float | None = None
    partial_hours: str = "mask"


def model_spec(min_history_hours: int | None, max_growth: float | None = None,
               partial_hours: str = "mask") -> ModelSpec:
    """The forecast settings with the run's minimum history, growth limit and partial-hour choice (the
    defaults when not given)."""
    from planner.forecast.model import ModelSpec

    spec = ModelSpec(partial_hours=partial_hours)
    spec = spec if min_history_hours is None else replace(spec, min_history_hours=min_history_hours)
    return spec if max_growth is None else replace(spec, max_growth=max_growth)


@dataclass(frozen=True)
class Forecasted:
    result: ForecastResult
    written: list[Path]


def forecast(history_file: Path, out: Path, meta_path: Path, options: ForecastOptions, *,
             plots_dir: Path | None = None, progress: Callable[[int, int], None] | None = None,
             run: RunContext | None = None) -> Forecasted:
    """Forecast every series of the history; write the forecast, its metadata and the plots, all or none."""
    from planner.forecast.run import forecast_history

    settings = resolve_settings(os.environ, seed=options.seed, default_seed=options.seed, engine=options.engine,
                                workers=options.workers, scheduler=options.scheduler)
    frame = read_named(history_file)
    result = forecast_history(frame, horizon_hours=options.horizon_hours, quantiles=options.quantiles,
                              measure=options.measure, backtest=True, seed=settings.seed, engine=settings.engine,
                              workers=settings.workers, scheduler=settings.scheduler, progress=progress,
                              spec=model_spec(options.min_history_hours, options.max_growth,
                                              options.partial_hours))
    result.metadata["inputs"] = {"history": str(history_file), "history_sha256": file_sha256(history_file)}
    with staged_outputs() as outputs:  # the forecast, its metadata and the plots: all or none
        written = [outputs.write_table(out, result.forecast), outputs.write_json(meta_path, result.metadata)]
        if plots_dir is not None:
            written += write_plots(frame, result, plots_dir, outputs)
    record_settings(run, settings)
    if run is not None:
        run.add_output(*written)
    return Forecasted(result, written)

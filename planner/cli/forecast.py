"""``planner forecast``: quantile demand per (region, model, class), backtested."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from planner.cli.app import (
    EngineOption,
    JsonFlag,
    MaxGrowthOption,
    MinHistoryOption,
    PartialHoursOption,
    SchedulerOption,
    WorkersOption,
    app,
    check_engine_options,
    examples,
    guarded,
)
from planner.cli.paths import check_paths
from planner.console import print_table, progress_bar, stderr
from planner.contracts import DEFAULT_MAX_GROWTH
from planner.runs import RunContext


# --------------------------------------------------------------------------- forecast
@app.command(epilog=examples(
    "planner forecast data/history/demo_history.parquet --out out/forecast.parquet",
    """planner forecast data/history/demo_history.parquet --horizon 36h --backtest \\
    --plots out/forecast-plots --out out/forecast-36h.csv""",
))
@guarded
def forecast(
    history: Annotated[Path, typer.Argument(help="Demand history from `planner ingest` (.csv or .parquet).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Forecast to write (.csv or .parquet).")],
    horizon: Annotated[str, typer.Option(help="How far ahead: hours or days, e.g. 36h, 14d.")] = "14d",
    quantiles: Annotated[str, typer.Option(help="Quantile levels, comma-separated.")] = "0.5,0.9,0.95,0.99",
    measure: Annotated[
        str, typer.Option(help="What to forecast: requests, prompt_tokens_sum or output_tokens_sum.")
    ] = "requests",
    backtest: Annotated[
        bool, typer.Option("--backtest", help="Print the rolling-origin backtest against seasonal-naive baselines.")
    ] = False,
    plots: Annotated[
        Path | None, typer.Option(help="Write one PNG per series (history, forecast, bands) here.")
    ] = None,
    metadata_out: Annotated[
        Path | None, typer.Option("--metadata", help="Metadata JSON to write (default: <out>.meta.json).")
    ] = None,
    engine: EngineOption = "auto",
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    seed: Annotated[int, typer.Option(help="Seed recorded with the run.")] = 0,
    min_history: MinHistoryOption = "7d",
    max_growth: MaxGrowthOption = DEFAULT_MAX_GROWTH,
    partial_hours: PartialHoursOption = "mask",
    as_json: JsonFlag = False,
    run: RunContext | None = None,
) -> None:
    """Forecast demand per (region, model, class) with quantiles, backtested against seasonal naive."""
    from planner.outputs import forecast_metadata_path
    from planner.storage import check_table_suffix

    check_table_suffix(out)
    meta_path = metadata_out or forecast_metadata_path(out)
    check_paths(inputs={"HISTORY": history}, outputs={"--out": out, "--metadata": meta_path},
                folders={"--plots": plots})
    check_engine_options(engine, scheduler, workers)

    from planner.forecast.run import (
        parse_horizon,
        parse_max_growth,
        parse_min_history,
        parse_partial_hours,
        parse_quantiles,
    )
    from planner.workflows.forecast import ForecastOptions
    from planner.workflows.forecast import forecast as forecast_workflow

    horizon_hours = parse_horizon(horizon)
    options = ForecastOptions(horizon_hours=horizon_hours, quantiles=parse_quantiles(quantiles), measure=measure,
                              seed=seed, engine=engine, workers=workers, scheduler=scheduler,
                              min_history_hours=parse_min_history(min_history),
                              max_growth=parse_max_growth(max_growth),
                              partial_hours=parse_partial_hours(partial_hours))
    with progress_bar("Fitting series", console=stderr) as advance:
        done = forecast_workflow(history, out, meta_path, options, plots_dir=plots, progress=advance,
                                 run=run)
    result, written = done.result, done.written
    overall = result.metadata.get("backtest_overall") or {}
    if as_json:
        print_table(
            result.summary_rows(), as_json=True,
            json_extra={"written": [str(p) for p in written], "backtest_overall": overall if backtest else None},
        )
        return
    print_table(result.summary_rows(), title=f"Forecast: {len(result.summary_rows())} series, {horizon_hours} h ahead")
    if backtest:
        print_table(backtest_rows(overall), title="Backtest, all series (rolling origin)")
    for line in result.metadata["findings"]:
        stderr.print(f"[yellow]{escape(line)}[/]")
    for reason, names in skipped_backtests(result.metadata).items():
        stderr.print(f"[yellow]backtest skipped[/] for {len(names)} series ({', '.join(names[:3])}"
                     f"{', ...' if len(names) > 3 else ''}): {reason}; their model was not chosen by backtest")
    for path in written:
        stderr.print(f"wrote {path}")


def skipped_backtests(metadata: dict[str, Any]) -> dict[str, list[str]]:
    """Series whose backtest could not run, by reason."""
    out: dict[str, list[str]] = {}
    for series in metadata.get("series", []):
        block = series.get("backtest") or {}
        if block.get("skipped"):
            out.setdefault(str(block["skipped"]), []).append(series["series"])
    return out


def backtest_rows(overall: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten the overall backtest block into one row per method for a table."""
    rows = []
    for method, metrics in overall.items():
        if not isinstance(metrics, dict):
            continue
        row: dict[str, Any] = {"method": method}
        for name, value in metrics.items():
            if isinstance(value, dict):  # pinball loss per quantile level
                short = name.replace("_scaled", "")
                row.update({f"{short}_{level}": inner for level, inner in value.items()})
            else:
                row[name] = value
        rows.append(row)
    return rows

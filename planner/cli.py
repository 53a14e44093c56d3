"""The command-line edge: parse arguments, call the core, render with rich, map errors to exit codes.

Nothing below this module knows about exit codes or terminals: the core raises
``PlannerError`` subclasses and this module turns them into the codes cron reads
(architecture.md): 0 ok, 1 unexpected, 2 usage, 3 invalid input, 4 infeasible,
5 SLO failed after the allowed rounds.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from planner import __version__
from planner.console import print_error, print_table, progress_bar, stderr
from planner.errors import ExitCode, InputError, PlannerError
from planner.storage import file_sha256

app = typer.Typer(
    name="planner",
    help="Capacity planner for LLM inference fleets: forecast, place, simulate, report.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@dataclass
class _Session:
    verbose: bool = False


session = _Session()

F = TypeVar("F", bound=Callable[..., Any])


def guarded(command: F) -> F:
    """Run a command, turning domain errors into their exit code and a readable message."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except PlannerError as exc:
            if session.verbose:
                stderr.print_exception()
            print_error(exc.message, fix=exc.fix, where=exc.where, code=exc.exit_code)
            raise typer.Exit(exc.exit_code) from None
        except BrokenPipeError:
            # The reader of our stdout went away (e.g. `planner catalog --json | head`): not an error.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except KeyboardInterrupt:
            print_error("interrupted; no output was written", code=130)
            raise typer.Exit(130) from None
        except Exception as exc:  # the last line of defence: never a bare traceback for users
            if session.verbose:
                stderr.print_exception()
            print_error(
                f"unexpected error: {type(exc).__name__}: {exc}",
                fix="rerun with --verbose to see the traceback, and report it with the command you ran",
                code=ExitCode.UNEXPECTED,
            )
            raise typer.Exit(ExitCode.UNEXPECTED) from None

    return wrapper  # type: ignore[return-value]


def _version_callback(value: bool) -> None:
    if value:
        print(f"planner {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show tracebacks and debug detail.", envvar="PLANNER_VERBOSE")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    session.verbose = verbose


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the table as JSON instead.")]


def print_outputs(rows: list[dict[str, Any]], *, title: str, as_json: bool, written: list[Path], **extra: Any) -> None:
    """The common ending of a command that writes files: its table (or JSON with ``extra``), then what it wrote."""
    print_table(rows, title=title, as_json=as_json, json_extra={**extra, "written": [str(p) for p in written]})
    if not as_json:
        for path in written:
            stderr.print(f"wrote {path}")


# --------------------------------------------------------------------------- validate
@app.command()
@guarded
def validate(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML file.")],
    as_json: JsonFlag = False,
) -> None:
    """Validate a scenario file and print a readable summary (exit 3 with every error otherwise)."""
    from planner.catalog import load_catalog
    from planner.profiles import load_profiles
    from planner.scenario import check_against_data, load_scenario

    loaded = load_scenario(scenario)
    problems = check_against_data(loaded, load_catalog().offers, load_profiles())
    if problems:
        raise InputError(
            "the scenario does not match the bundled data:\n  - " + "\n  - ".join(problems),
            where=scenario,
            fix="use serving regions listed by `planner catalog` and models listed by `planner profiles`",
        )
    print_table(
        loaded.summary_rows(),
        title=f"Scenario {scenario}: valid",
        as_json=as_json,
        json_extra={"scenario": str(scenario), "valid": True},
    )


# --------------------------------------------------------------------------- catalog
@app.command()
@guarded
def catalog(
    region: Annotated[str | None, typer.Option(help="Only this serving region key, e.g. aws:us-east-1.")] = None,
    sku: Annotated[str | None, typer.Option(help="Only this GPU SKU, e.g. H100.")] = None,
    tier: Annotated[str | None, typer.Option(help="Only this tier: reserved, on_demand or spot.")] = None,
    skus: Annotated[bool, typer.Option("--skus", help="List GPU SKU specifications instead of offers.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """List GPU offers (USD per GPU-hour by region, SKU and tier) or SKU specifications."""
    from planner.catalog import load_catalog, offers_table

    loaded = load_catalog()
    if skus:
        print_table(loaded.skus.to_dict("records"), title="GPU SKUs", as_json=as_json)
        return
    rows = offers_table(loaded, region=region, sku=sku, tier=tier)
    if not rows:
        raise InputError(
            f"no offers match region={region!r} sku={sku!r} tier={tier!r}",
            fix="run `planner catalog` without filters to see what exists",
        )
    print_table(rows, title=f"GPU offers ({len(rows)})", as_json=as_json)


# --------------------------------------------------------------------------- profiles
@app.command()
@guarded
def profiles(
    model: Annotated[str | None, typer.Option(help="Only this model.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List model profiles: GPUs per replica, KV capacity and step-time coefficients per (model, SKU)."""
    from planner.profiles import load_profiles

    table = load_profiles()
    if model is not None:
        table = table[table["model"] == model]
        if table.empty:
            raise InputError(f"no profile for model {model!r}", fix="run `planner profiles` to list models")
    # The free-text notes stay in --json and profiles.csv; they would crush the terminal table.
    columns = [name for name in table.columns if name != "notes"]
    print_table(table.to_dict("records"), title="Model profiles", columns=columns, as_json=as_json)


# --------------------------------------------------------------------------- ingest
def _parse_start(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--start {text!r} is not an ISO-8601 date-time",
            fix="pass e.g. --start 2024-05-01T00:00:00Z",
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@app.command()
@guarded
def ingest(
    inputs: Annotated[list[str], typer.Argument(help="Request-log files or globs (CSV, Parquet, JSONL).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Demand history to write (.csv or .parquet).")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="Log format: azure, mooncake or generic.")
    ] = "generic",
    mapping: Annotated[
        str | None,
        typer.Option(
            "--map",
            help="Column mapping for --format generic: ts=COL,prompt_tokens=COL,output_tokens=COL"
            "[,region=COL,model=COL,traffic_class=COL].",
        ),
    ] = None,
    start: Annotated[
        str | None, typer.Option(help="Trace start time (UTC) for relative timestamps (mooncake).")
    ] = None,
    region: Annotated[str | None, typer.Option(help="Constant region label when the log has none.")] = None,
    model: Annotated[str | None, typer.Option(help="Constant model label when the log has none.")] = None,
    traffic_class: Annotated[
        str | None, typer.Option("--traffic-class", help="Constant traffic class when the log has none.")
    ] = None,
    freq: Annotated[str, typer.Option(help="Bucket size, 1min to 1d.")] = "1h",
    histogram_out: Annotated[
        Path | None,
        typer.Option(help="Token-length histogram to write (default: <out>.histogram.csv)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Turn raw request logs into demand history per (bucket, region, model, traffic class), with DuckDB."""
    from planner.ingest import ingest_logs, output_paths, parse_mapping, write_ingest_outputs

    output_paths(out, histogram_out)  # fail on a bad output name before reading gigabytes of logs
    labels = {
        key: value
        for key, value in {"region": region, "model": model, "traffic_class": traffic_class}.items()
        if value is not None
    }
    with stderr.status(f"Reading {len(inputs)} input pattern(s) with DuckDB..."):
        result = ingest_logs(
            inputs,
            fmt,
            mapping=parse_mapping(mapping) if mapping else None,
            start=_parse_start(start),
            labels=labels,
            freq=freq,
        )
    written = write_ingest_outputs(result, out, histogram_out)
    print_outputs(
        result.summary_rows(),
        title=f"Ingested {result.rows_read:,} requests from {len(result.files)} file(s)",
        as_json=as_json, written=written, rows_read=result.rows_read, files=result.files,
    )


# --------------------------------------------------------------------------- forecast
@app.command()
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
    plots: Annotated[Path | None, typer.Option(help="Write one PNG per series (history, forecast, bands) here.")] = None,
    metadata_out: Annotated[
        Path | None, typer.Option("--metadata", help="Metadata JSON to write (default: <out>.meta.json).")
    ] = None,
    engine: Annotated[str, typer.Option(help="Where fits run: local, processes or auto.")] = "auto",
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: one per core).")] = None,
    seed: Annotated[int, typer.Option(help="Seed recorded with the run.")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Forecast demand per (region, model, class) with quantiles, backtested against seasonal naive."""
    from planner.forecast.plots import write_plots
    from planner.forecast.run import forecast_history, parse_horizon, parse_quantiles
    from planner.storage import check_table_suffix, read_table, write_json_atomic, write_table_atomic

    check_table_suffix(out)
    meta_path = metadata_out or out.with_name(out.name.removesuffix(out.suffix) + ".meta.json")
    horizon_hours = parse_horizon(horizon)
    levels = parse_quantiles(quantiles)
    frame = read_table(history)
    with progress_bar("Fitting series", console=stderr) as advance:
        result = forecast_history(
            frame, horizon_hours=horizon_hours, quantiles=levels, measure=measure, backtest=True,
            seed=seed, engine=engine, workers=workers, progress=advance,
        )
    result.metadata["inputs"] = {"history": str(history), "history_sha256": file_sha256(history)}
    written = [write_table_atomic(out, result.forecast), write_json_atomic(meta_path, result.metadata)]
    if plots is not None:
        written += write_plots(frame, result, plots)
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
    for path in written:
        stderr.print(f"wrote {path}")


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


# --------------------------------------------------------------------------- place
@app.command()
@guarded
def place(
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    forecast: Annotated[Path, typer.Option(help="Forecast from `planner forecast` (.csv or .parquet).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Plan CSV to write; the plan JSON and flows go beside it.")],
    capacity: Annotated[
        Path | None,
        typer.Option(help="Max req/s per replica per (model, sku, traffic_class); default: analytic estimate."),
    ] = None,
    solver: Annotated[str, typer.Option(help="Backend: highs, cbc or ortools.")] = "highs",
    time_limit: Annotated[float, typer.Option(help="Solver time limit in seconds.")] = 120.0,
    gap: Annotated[float, typer.Option(help="Relative optimality gap to stop at, e.g. 0.01.")] = 0.01,
    quantile: Annotated[
        float | None, typer.Option(help="Forecast quantile to provision for (default: the scenario's).")
    ] = None,
    periods: Annotated[
        str, typer.Option(help="Planning periods: 'hourly', or 'how' / 'how:N' for N-hour hour-of-week blocks.")
    ] = "hourly",
    debug: Annotated[
        Path | None, typer.Option(help="Write the model as LP/MPS files into this folder.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Place GPU replicas by SKU, region and purchase tier at least cost (an integer program), and check the plan."""
    from planner.catalog import load_catalog
    from planner.placement.capacity import validate_capacity
    from planner.placement.workflow import place_plan, write_plan_outputs
    from planner.profiles import load_profiles
    from planner.scenario import load_scenario
    from planner.storage import check_table_suffix, read_table

    check_table_suffix(out)
    loaded = load_scenario(scenario)
    hashes = {"scenario": file_sha256(scenario), "forecast": file_sha256(forecast)}
    capacity_table = None
    if capacity is not None:
        capacity_table = validate_capacity(read_table(capacity), where=capacity)
        hashes["capacity"] = file_sha256(capacity)
    with stderr.status(f"Solving the placement program with {solver}..."):
        result = place_plan(
            loaded, read_table(forecast), load_catalog(), load_profiles(),
            capacity=capacity_table, solver=solver, time_limit_s=time_limit, gap=gap,
            quantile=quantile, periods=periods, debug_dir=debug, input_hashes=hashes,
        )
    written = write_plan_outputs(result, out)
    meta = result.meta
    title = (
        f"Plan: {meta.get('status')} via {meta.get('backend')}, objective {meta.get('objective')}, "
        f"gap {meta.get('gap')}, {meta.get('solve_time_s')} s"
    )
    print_outputs(result.summary_rows(), title=title, as_json=as_json, written=written, meta=meta)


# --------------------------------------------------------------------------- simulate
_DURATION = {"s": 1, "m": 60, "min": 60, "h": 3600}


def _parse_duration_s(text: str) -> float:
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise InputError(f"--duration {text!r} is not a positive duration", fix="pass e.g. 30min, 1h or 900s")
    return float(match.group(1)) * _DURATION[match.group(2)]


def _forecast_window(scenario: Any, plan: Any, forecast: Any, window: str) -> tuple[str, Any]:
    """(plan period, serving demand) from a forecast hour, for plans without flows."""
    from planner.sim.forecast_demand import forecast_hour, quantile_column, route_forecast

    column = quantile_column(scenario, forecast)
    hour = forecast_hour(forecast, column, window, scenario)
    periods = list(dict.fromkeys(plan["period"].astype(str))) if "period" in plan.columns else []
    if len(periods) == 1:
        period = periods[0]
    elif hour in periods:
        period = hour
    else:
        raise InputError(
            f"the plan has {len(periods)} periods and none is the forecast hour {hour}",
            where="--plan", fix="pass a one-period plan, or --window with an hour that is one of the plan's periods",
        )
    rows = plan[plan["period"].astype(str) == period]
    return period, route_forecast(scenario, rows, forecast, column, hour)


@app.command()
@guarded
def simulate(
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    plan: Annotated[Path, typer.Option(help="Plan CSV from `planner place` (its flows file sits beside it).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Per-class results to write (.csv or .parquet).")],
    policy: Annotated[str | None, typer.Option(help="Scheduling policy (default: the scenario's).")] = None,
    window: Annotated[
        str, typer.Option(help="'peak' (the period with the most demand) or an ISO time inside a plan period.")
    ] = "peak",
    duration: Annotated[str, typer.Option(help="Simulated time per replication, e.g. 30min, 1h.")] = "1h",
    replications: Annotated[int, typer.Option(min=1, help="Independent replications for confidence intervals.")] = 3,
    seed: Annotated[int | None, typer.Option(help="Base seed (default: the scenario's).")] = None,
    flows: Annotated[
        Path | None, typer.Option(help="Routed demand per period (default: <plan>.flows.csv beside the plan).")
    ] = None,
    forecast: Annotated[
        Path | None,
        typer.Option(help="Route this forecast's demand instead of flows (for plans written by hand)."),
    ] = None,
    histogram: Annotated[
        Path | None, typer.Option(help="Token-length histogram from `planner ingest` (default: per-class lognormals).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Simulate a plan's replicas at the demand of one window and check every class's latency SLO."""
    from planner.catalog import load_catalog
    from planner.profiles import load_profiles
    from planner.scenario import load_scenario
    from planner.sim.simulate import select_window, simulate_plan, write_simulation_outputs
    from planner.storage import check_table_suffix, read_table

    check_table_suffix(out)
    duration_s = _parse_duration_s(duration)
    loaded = load_scenario(scenario)
    plan_frame = read_table(plan)
    if forecast is not None:
        period, demand = _forecast_window(loaded, plan_frame, read_table(forecast), window)
    else:
        flows_path = flows or plan.with_name(plan.name.removesuffix(plan.suffix) + ".flows.csv")
        if not flows_path.exists():
            raise InputError(
                "the routed demand (flows) for this plan was not found",
                where=flows_path,
                fix="pass --flows FILE or --forecast FILE, or use a plan from `planner place` (it writes "
                "<plan>.flows.csv)",
            )
        period, demand = select_window(plan_frame, read_table(flows_path), window)
    with stderr.status(f"Simulating period {period}: {replications} replication(s) of {duration}..."):
        result = simulate_plan(
            loaded, plan_frame, demand, load_profiles(), load_catalog(),
            policy=policy, duration_s=duration_s, replications=replications, seed=seed,
            histogram=read_table(histogram) if histogram else None, period=period,
        )
    written = write_simulation_outputs(result, out)
    print_outputs(
        result.summary_rows(),
        title=f"SLO check, period {period} ({'all met' if result.all_met else 'SOME MISSED'})",
        as_json=as_json, written=written, period=period, all_met=result.all_met,
    )


# --------------------------------------------------------------------------- experiment
@app.command()
@guarded
def experiment(
    name: Annotated[str, typer.Argument(help="Reference experiment from theory.md: e1, e2, e3 or e4.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for <name>.csv and <name>.png.")],
    seed: Annotated[int, typer.Option(help="Base seed; the same seed gives byte-identical outputs.")] = 0,
    scale: Annotated[
        float, typer.Option(help="Fraction of the full request counts (0 < scale <= 1), for quick looks.")
    ] = 1.0,
    as_json: JsonFlag = False,
) -> None:
    """Run a reference experiment (E1-E4 of theory.md) and write its table and chart."""
    from planner.sim.experiments import run_experiment, write_experiment

    with stderr.status(f"Running experiment {name} (scale {scale:g})..."):
        result = run_experiment(name.lower(), seed=seed, scale=scale)
    written = write_experiment(result, out)
    checks = [dict(check) for check in getattr(result, "checks", [])]
    print_table(
        result.summary, title=f"Experiment {name}", as_json=as_json,
        json_extra={"written": [str(p) for p in written], "checks": checks},
    )
    if not as_json:
        if checks:
            print_table(checks, title="What theory predicts, checked on this run")
        for path in written:
            stderr.print(f"wrote {path}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()

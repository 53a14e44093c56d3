"""``planner report`` (the monthly capacity report, for cron) and ``planner history`` (the run history)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import (
    EngineOption,
    HistogramOption,
    JsonFlag,
    SchedulerOption,
    SeedOption,
    WorkersOption,
    app,
    guarded,
    prepare_simulator,
    print_outputs,
    session,
    use_engine,
)
from planner.cli.loop import (
    CacheDirOption,
    GapOption,
    HistoryOption,
    MaxRoundsOption,
    PeriodsOption,
    SimDurationOption,
    SimReplicationsOption,
    SolverOption,
    TimeLimitOption,
    fail_if_not_converged,
    loop_figures,
    loop_settings,
    narrated,
)
from planner.console import print_table, stderr
from planner.errors import InputError

DEFAULT_POLICIES = "fcfs,cmu,wspt,drr-wspt"


@app.command()
@guarded
def report(
    month: Annotated[str, typer.Option(help="The month the report is for, YYYY-MM.")],
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    history: HistoryOption,
    as_of: Annotated[
        str | None,
        typer.Option(help="'Now' for this report (ISO-8601): only history before it is used. "
                          "Default: the first instant of --month."),
    ] = None,
    reports: Annotated[Path, typer.Option(help="Folder that holds one sub-folder per month.")] = Path("reports"),
    compare_policies: Annotated[
        str, typer.Option(help="Policies to compare, comma-separated, or 'none'.")
    ] = DEFAULT_POLICIES,
    histogram: HistogramOption = None,
    max_rounds: MaxRoundsOption = 4,
    periods: PeriodsOption = "how:4",
    solver: SolverOption = "highs",
    time_limit: TimeLimitOption = 60.0,
    gap: GapOption = 0.02,
    sim_duration: SimDurationOption = "30min",
    replications: SimReplicationsOption = 3,
    seed: SeedOption = None,
    cache_dir: CacheDirOption = None,
    engine: EngineOption = "auto",
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Write reports/YYYY-MM/: forecast, plan, cost, SLO evidence, policy comparison and risks (md, html, json)."""
    from planner.catalog import load_catalog
    from planner.loop.compare import parse_policies
    from planner.loop.pipeline import parse_as_of, run_pipeline
    from planner.profiles import load_profiles
    from planner.report import build_report, write_report
    from planner.report.assemble import report_inputs
    from planner.report.inputs import MONTH_PATTERN
    from planner.runs import RunHistory, last_month
    from planner.scenario import load_scenario
    from planner.storage import file_sha256, read_table

    if not MONTH_PATTERN.match(month):
        raise InputError(f"--month {month!r} is not YYYY-MM", where="--month", fix="pass e.g. --month 2026-11")
    use_engine(engine, scheduler, workers)
    stamp = parse_as_of(as_of or f"{month}-01T00:00:00Z")
    settings = loop_settings(max_rounds=max_rounds, periods=periods, solver=solver, time_limit=time_limit, gap=gap,
                             quantile=None, sim_duration=sim_duration, replications=replications, seed=seed,
                             engine=engine, workers=workers, cache_dir=cache_dir)
    policies = None if compare_policies.strip().lower() in ("", "none") else parse_policies(compare_policies)
    loaded = load_scenario(scenario)
    catalog = load_catalog()
    previous = last_month(RunHistory(session.history_file), month)
    hashes = {"scenario": file_sha256(scenario), "history": file_sha256(history)}
    prepare_simulator()
    with narrated(f"Capacity report {month}: reading the history...") as say:
        result = run_pipeline(loaded, read_table(history), catalog, load_profiles(), settings,
                              as_of=stamp, compare=policies, histogram=read_table(histogram) if histogram else None,
                              input_hashes=hashes, notify=say)
        say("writing the report")
        inputs = report_inputs(month, f"{stamp:%Y-%m-%dT%H:%M:%SZ}", loaded, result, catalog, previous)
        model = build_report(inputs)
        written = write_report(model, reports, generated_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    if session.run is not None:
        session.run.add_figures(report_spend_usd=round(result.loop.cost_usd, 2), **loop_figures(result))
        session.run.save_forecast(result.forecast.forecast)
        session.run.save_plan(result.loop.placement.plan)
        session.run.add_output(written.directory)
    rows = [{"section": s.key, "title": s.title, "status": s.status} for s in model.sections]
    print_table(rows, title=f"Capacity report {month} (as of {stamp:%Y-%m-%d %H:%M} UTC)", as_json=as_json,
                json_extra={"directory": str(written.directory), "files": [str(p) for p in written.files],
                            "converged": result.loop.converged, "previous_month_found": previous is not None})
    if not as_json:
        stderr.print(f"wrote {written.directory}/ ({len(written.files)} files): open report.html, or read report.md")
    fail_if_not_converged(result)


@app.command()
@guarded
def history(
    limit: Annotated[int, typer.Option(min=1, help="How many runs, newest first.")] = 20,
    command: Annotated[str | None, typer.Option(help="Only runs of this command, e.g. report.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List recorded runs, newest first: command, month, start, duration, exit code and a key figure."""
    from planner.runs import RunHistory, history_rows

    store = RunHistory(session.history_file)
    rows = history_rows(store, limit=limit, command=command)
    print_outputs(rows, title=f"Run history ({store.path})", as_json=as_json, written=[], path=str(store.path))
    for notice in store.notices:
        stderr.print(f"[yellow]note:[/] {notice}")

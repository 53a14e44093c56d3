"""``planner report`` (the monthly capacity report, for cron) and ``planner history`` (the run history)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from planner.cli import placement_options as limits
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
    profile_hashes,
    scenario_profiles,
    session,
    use_engine,
)
from planner.cli.loop import (
    CacheDirOption,
    HistoryOption,
    MaxRoundsOption,
    SearchSettingsOption,
    SimDurationOption,
    SimReplicationsOption,
    fail_if_not_converged,
    loop_figures,
    loop_settings,
    loop_warnings,
    narrated,
    report_warnings,
)
from planner.cli.paths import check_paths
from planner.cli.placement_options import GapOption, NodeLimitOption, PeriodsOption, SolverOption, TimeLimitOption
from planner.console import print_table, stderr
from planner.errors import InputError
from planner.sources import named

DEFAULT_POLICIES = "fcfs,cmu,wspt,drr-wspt"


@app.command()
@guarded
def report(
    month: Annotated[str, typer.Option(help="The month the report plans, YYYY-MM: every hour of it, UTC.")],
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    history: HistoryOption,
    as_of: Annotated[
        str | None,
        typer.Option(help="'Now' for this report (ISO-8601): only history before it is used. "
                          "Default, and latest allowed: the first instant of --month."),
    ] = None,
    reports: Annotated[Path, typer.Option(help="Folder that holds one sub-folder per month.")] = Path("reports"),
    allow_stale_history: Annotated[
        bool, typer.Option("--allow-stale-history",
                           help="Plan even when the history ends more than 7 days before the month (the report "
                                "then lists the gap as a high risk); without it such a run exits 3.")
    ] = False,
    compare_policies: Annotated[
        str, typer.Option(help="Policies to compare, comma-separated, or 'none'.")
    ] = DEFAULT_POLICIES,
    histogram: HistogramOption = None,
    max_rounds: MaxRoundsOption = 4,
    periods: PeriodsOption = limits.PERIODS,
    solver: SolverOption = limits.SOLVER,
    node_limit: NodeLimitOption = limits.NODE_LIMIT,
    time_limit: TimeLimitOption = limits.TIME_LIMIT_S,
    gap: GapOption = limits.GAP,
    sim_duration: SimDurationOption = "30min",
    replications: SimReplicationsOption = 3,
    seed: SeedOption = None,
    cache_dir: CacheDirOption = None,
    search_settings: SearchSettingsOption = True,
    engine: EngineOption = "auto",
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Write reports/YYYY-MM/: the month's forecast, plan, cost, SLO evidence, policy comparison and risks.

    One run per reports folder: the folder's lock is taken before any work, and a second
    run exits 3 at once, naming the run that holds it.
    """
    from planner.catalog import load_catalog
    from planner.loop.compare import parse_policies
    from planner.loop.pipeline import history_as_of, last_history_hour, parse_as_of, run_pipeline
    from planner.report import build_report, report_lock, write_report
    from planner.report.assemble import report_inputs
    from planner.report.period import check_as_of, check_history_fresh, month_window
    from planner.runs import RunHistory, last_month
    from planner.scenario import load_scenario
    from planner.storage import file_sha256, read_table

    window = month_window(month)
    use_engine(engine, scheduler, workers)
    check_paths(inputs={"--scenario": scenario, "--history": history, "--histogram": histogram},
                folders={"--reports": reports})
    stamp = check_as_of(parse_as_of(as_of) if as_of is not None else window.start, window)
    settings = loop_settings(max_rounds=max_rounds, periods=periods, solver=solver, node_limit=node_limit,
                             time_limit=time_limit, gap=gap,
                             quantile=None, sim_duration=sim_duration, replications=replications, seed=seed,
                             engine=engine, workers=workers, cache_dir=cache_dir, search_settings=search_settings)
    policies = None if compare_policies.strip().lower() in ("", "none") else parse_policies(compare_policies)
    loaded = load_scenario(scenario)
    profiles = scenario_profiles(loaded, scenario)
    with report_lock(reports) as lock:
        notice = lock.takeover_notice()
        if notice:
            stderr.print(f"[yellow]warning:[/] {notice}")
        catalog = load_catalog()
        previous = last_month(RunHistory(session.history_file), month)
        hashes = {"scenario": file_sha256(scenario), "history": file_sha256(history),
                  **profile_hashes(loaded, scenario)}
        prepare_simulator()
        with narrated(f"Capacity report {month}: reading the history...") as say:
            known = history_as_of(named(read_table(history), history), stamp, where=str(history))
            check_history_fresh(last_history_hour(known, where=str(history)), window, month,
                                allow_stale=allow_stale_history, where=history)
            result = run_pipeline(loaded, known, catalog, profiles, settings, as_of=stamp, compare=policies,
                                  histogram=read_table(histogram) if histogram else None, input_hashes=hashes,
                                  notify=say, window=window)
            say("writing the report")
            inputs = report_inputs(month, f"{stamp:%Y-%m-%dT%H:%M:%SZ}", loaded, result, catalog, previous)
            model = build_report(inputs)
            written = write_report(model, reports, generated_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                   lock=lock)
    for note in written.notices:
        stderr.print(f"[yellow]note:[/] {note}")
    if session.run is not None:
        session.run.add_figures(report_spend_usd=round(result.loop.cost_usd, 2), **loop_figures(result))
        session.run.save_forecast(result.forecast.forecast)
        session.run.save_plan(result.loop.placement.plan)
        session.run.add_output(written.directory)
    rows = [{"section": s.key, "title": s.title, "status": s.status} for s in model.sections]
    print_table(rows, title=f"Capacity report {month}: plans {window.describe()}, as of {stamp:%Y-%m-%d %H:%M} UTC",
                as_json=as_json,
                json_extra={"directory": str(written.directory), "files": [str(p) for p in written.files],
                            "period": model.period, "converged": result.loop.converged,
                            "previous_month_found": previous is not None})
    if not as_json:
        stderr.print(f"wrote {written.directory}/ ({len(written.files)} files): open report.html, or read report.md")
    report_warnings(loop_warnings(result))
    fail_if_not_converged(result)


MAX_LISTED_RUNS = 1_000_000
"""``planner history --limit`` above this is refused: it is a typo, and the history's SQL takes 64-bit limits only."""


@app.command()
@guarded
def history(
    limit: Annotated[int, typer.Option(min=1, help="How many runs, newest first.")] = 20,
    command: Annotated[str | None, typer.Option(help="Only runs of this command, e.g. report.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List recorded runs, newest first: command, month, start, duration, exit code and a key figure."""
    from planner.runs import RunHistory, history_rows

    if limit > MAX_LISTED_RUNS:
        raise InputError(f"{limit} is more runs than planner lists at once ({MAX_LISTED_RUNS:,})",
                         where="--limit", fix=f"pass a number from 1 to {MAX_LISTED_RUNS}")
    store = RunHistory(session.history_file)
    rows = history_rows(store, limit=limit, command=command)
    print_outputs(rows, title=f"Run history ({store.path})", as_json=as_json, written=[], path=str(store.path))
    for notice in store.notices:
        stderr.print(f"[yellow]note:[/] {notice}")

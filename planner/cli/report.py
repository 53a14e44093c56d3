"""``planner report`` (the monthly capacity report, for cron) and ``planner history`` (the run history)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli import placement_options as limits
from planner.cli.app import (
    NO_ROOT_OPTIONS,
    CommitOnShortHistoryFlag,
    DemandScaleOption,
    EngineOption,
    FrontDoor,
    HistogramOption,
    JsonFlag,
    MaxGrowthOption,
    MinHistoryOption,
    PartialHoursOption,
    SchedulerOption,
    SeedOption,
    SetOption,
    WorkersOption,
    announce_compile,
    app,
    examples,
    guarded,
    print_outputs,
    what_if,
)
from planner.cli.loop import (
    CacheDirOption,
    HistoryOption,
    MaxRoundsOption,
    PoolsOption,
    SearchSettingsOption,
    SimDurationOption,
    SimReplicationsOption,
    fail_if_not_converged,
    loop_options,
    print_warnings,
)
from planner.cli.paths import check_paths, histogram_files
from planner.cli.placement_options import GapOption, NodeLimitOption, PeriodsOption, SolverOption, TimeLimitOption
from planner.console import narrated, print_table, stderr
from planner.contracts import DEFAULT_MAX_GROWTH
from planner.errors import InputError
from planner.runs import RunContext

DEFAULT_POLICIES = "fcfs,cmu,wspt,drr-wspt"


@app.command(epilog=examples(
    """planner report --month 2026-11 --scenario scenarios/demo.toml \\
    --history data/history/demo_history.parquet \\
    --cache-dir out/demo/calibration""",
    """planner report --month 2026-10 --scenario scenarios/demo.toml \\
    --history data/history/demo_history.parquet --compare-policies none \\
    --reports out/reports""",
))
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
    pools: PoolsOption = True,
    min_history: MinHistoryOption = "7d",
    max_growth: MaxGrowthOption = DEFAULT_MAX_GROWTH,
    commit_on_short_history: CommitOnShortHistoryFlag = False,
    partial_hours: PartialHoursOption = "mask",
    engine: EngineOption = "auto",
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    overrides: SetOption = None,
    demand_scale: DemandScaleOption = None,
    as_json: JsonFlag = False,
    run: RunContext | None = None,
    front: FrontDoor = NO_ROOT_OPTIONS,
) -> None:
    """Write reports/YYYY-MM/: the month's forecast, plan, cost, SLO evidence, policy comparison and risks.

    One run per reports folder: the folder's lock is taken before any work, and a second
    run exits 3 at once, naming the run that holds it.
    """
    from planner.report.period import month_window

    month_window(month)  # a bad --month is refused before anything else is looked at
    changes = what_if(overrides, demand_scale)
    check_paths(inputs={"--scenario": scenario, "--history": history, "--histogram": histogram_files(histogram)},
                folders={"--reports": reports})
    options = loop_options(max_rounds=max_rounds, periods=periods, solver=solver, node_limit=node_limit,
                           time_limit=time_limit, gap=gap, quantile=None, sim_duration=sim_duration,
                           replications=replications, seed=seed, engine=engine, workers=workers, scheduler=scheduler,
                           cache_dir=cache_dir, search_settings=search_settings, min_history=min_history,
                           max_growth=max_growth, partial_hours=partial_hours, pools=pools,
                           commit_on_short_history=commit_on_short_history)

    from planner.workflows.plan import report as report_workflow

    with narrated(f"Capacity report {month}: reading the history...") as say:
        done = report_workflow(month, scenario, history, reports, options, as_of=as_of,
                               allow_stale_history=allow_stale_history, compare=compare_policies,
                               histogram_file=histogram_files(histogram), history_db=front.history_file, notify=say,
                               warn=lambda text: stderr.print(f"[yellow]warning:[/] {text}"),
                               announce=announce_compile, what_if=changes, run=run)
    _render_report(month, done, as_json)
    print_warnings(done.result)
    fail_if_not_converged(done.result)


def _render_report(month: str, done: Any, as_json: bool) -> None:
    """The report's sections and what was written (or the JSON of both)."""
    written, stamp = done.written, done.as_of
    for note in written.notices:
        stderr.print(f"[yellow]note:[/] {note}")
    rows = [{"section": s.key, "title": s.title, "status": s.status} for s in done.model.sections]
    print_table(rows, title=f"Capacity report {month}: plans {done.window.describe()}, "
                            f"as of {stamp:%Y-%m-%d %H:%M} UTC",
                as_json=as_json,
                json_extra={"directory": str(written.directory), "files": [str(p) for p in written.files],
                            "period": done.model.period, "converged": done.result.loop.converged,
                            "previous_month_found": done.previous_month_found})
    if not as_json:
        stderr.print(f"wrote {written.directory}/ ({len(written.files)} files): open report.html, or read report.md")


MAX_LISTED_RUNS = 1_000_000
"""``planner history --limit`` above this is refused: it is a typo, and the history's SQL takes 64-bit limits only."""


@app.command(epilog=examples(
    "planner history --command report --limit 5",
    "planner --history-file out/demo/history.duckdb history --json",
))
@guarded
def history(
    limit: Annotated[int, typer.Option(min=1, help="How many runs, newest first.")] = 20,
    command: Annotated[str | None, typer.Option(help="Only runs of this command, e.g. report.")] = None,
    as_json: JsonFlag = False,
    front: FrontDoor = NO_ROOT_OPTIONS,
) -> None:
    """List recorded runs, newest first: command, month, start, duration, exit code and a key figure."""
    from planner.runs import RunHistory, history_rows

    if limit > MAX_LISTED_RUNS:
        raise InputError(f"{limit} is more runs than planner lists at once ({MAX_LISTED_RUNS:,})",
                         where="--limit", fix=f"pass a number from 1 to {MAX_LISTED_RUNS}")
    store = RunHistory(front.history_file)
    rows = history_rows(store, limit=limit, command=command)
    print_outputs(rows, title=f"Run history ({store.path})", as_json=as_json, written=[], path=str(store.path))
    for notice in store.notices:
        stderr.print(f"[yellow]note:[/] {notice}")

"""``planner sweep``: the plan loop once per value of one scenario field, and the cost curve it draws."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli import placement_options as limits
from planner.cli.app import (
    CommitOnShortHistoryFlag,
    DemandScaleOption,
    EngineOption,
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
    loop_options,
)
from planner.cli.paths import check_paths, histogram_files
from planner.cli.placement_options import GapOption, NodeLimitOption, PeriodsOption, SolverOption, TimeLimitOption
from planner.console import narrated
from planner.contracts import DEFAULT_MAX_GROWTH
from planner.runs import RunContext


@app.command(epilog=examples(
    """planner sweep --scenario scenarios/demo.toml \\
    --history data/history/demo_history.parquet \\
    --vary classes.interactive.ttft_p99_ms=300,500,800,1200 --out sweep-demo""",
    """planner sweep --scenario scenarios/demo.toml \\
    --history data/history/demo_history.parquet \\
    --vary demand-scale=1,1.5,2 --out sweep-growth""",
))
@guarded
def sweep(
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    history: HistoryOption,
    vary: Annotated[str, typer.Option(
        metavar="PATH=V1,V2,...",
        help="The scenario field to vary and its values, as --set takes them (list entries by name), e.g. "
             "classes.interactive.ttft_p99_ms=300,500,800; or demand-scale=1,1.5,2 to scale the forecast.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for sweep.csv, sweep.png and sweep.json "
                                                         "(replaced as a whole).")] = Path("out/sweep"),
    capacity: Annotated[Path | None, typer.Option(
        help="Start every value from this capacity table instead of calibrating (right when the varied field "
             "does not change capacity per replica: demand-scale, tiers, regions, quotas).")] = None,
    histogram: HistogramOption = None,
    max_rounds: MaxRoundsOption = 4,
    periods: PeriodsOption = limits.PERIODS,
    solver: SolverOption = limits.SOLVER,
    node_limit: NodeLimitOption = limits.NODE_LIMIT,
    time_limit: TimeLimitOption = limits.TIME_LIMIT_S,
    gap: GapOption = limits.GAP,
    quantile: Annotated[float | None, typer.Option(help="Forecast quantile to provision for.")] = None,
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
) -> None:
    """Run the whole plan loop once per value of one scenario field, on the same forecast, in parallel: the
    cost, GPUs, SLO status and binding constraint of each, and the cost curve. An infeasible value is a row
    with its diagnosis."""
    from planner.loop.sweep import parse_vary

    parse_vary(vary)  # a malformed --vary is refused before anything else is looked at
    changes = what_if(overrides, demand_scale)
    check_paths(inputs={"--scenario": scenario, "--history": history, "--capacity": capacity,
                        "--histogram": histogram_files(histogram)},
                folders={"--out": out})
    options = loop_options(max_rounds=max_rounds, periods=periods, solver=solver, node_limit=node_limit,
                           time_limit=time_limit, gap=gap, quantile=quantile, sim_duration=sim_duration,
                           replications=replications, seed=seed, engine=engine, workers=workers, scheduler=scheduler,
                           cache_dir=cache_dir, search_settings=search_settings, min_history=min_history,
                           max_growth=max_growth, partial_hours=partial_hours, pools=pools,
                           commit_on_short_history=commit_on_short_history)

    from planner.workflows.sweep import sweep as sweep_workflow

    with narrated("Reading the history...") as say:
        done = sweep_workflow(scenario, history, out, vary, options, what_if=changes, capacity_file=capacity,
                              histogram_file=histogram_files(histogram),
                              notify=say, progress=lambda finished, total: say(f"planned {finished} of {total} "
                                                                                 "values"),
                              announce=announce_compile, run=run)
    rows = done.table.astype(object).where(done.table.notna(), None).to_dict("records")
    if not as_json:  # the terminal shows each diagnosis's first line; sweep.csv and --json hold it whole
        rows = [{**row, "diagnosis": str(row["diagnosis"] or "").split("\n")[0]} for row in rows]
    print_outputs(rows, title=f"Sweep of {vary.partition('=')[0]}", as_json=as_json, written=done.written)

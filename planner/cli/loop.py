"""``planner calibrate`` and ``planner plan``: the fast loop's capacity, and the whole two-timescale loop."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from planner.cli import placement_options as limits
from planner.cli.app import (
    SIM_DURATION,
    CommitOnShortHistoryFlag,
    DemandScaleOption,
    EngineOption,
    HistogramOption,
    JsonFlag,
    MaxGrowthOption,
    MinHistoryOption,
    OldDurationOption,
    PartialHoursOption,
    SchedulerOption,
    SeedOption,
    SetOption,
    WorkersOption,
    announce_compile,
    app,
    check_engine_options,
    examples,
    guarded,
    parse_duration_s,
    print_commitments,
    print_outputs,
    renamed_option,
    what_if,
)
from planner.cli.paths import check_cache_folder, check_paths, histogram_files
from planner.cli.placement_options import GapOption, NodeLimitOption, PeriodsOption, SolverOption, TimeLimitOption
from planner.console import narrated, print_table, progress_bar, stderr
from planner.contracts import DEFAULT_MAX_GROWTH
from planner.errors import InputError, SLOFailedError
from planner.runs import RunContext

# Options of the whole loop, shared by `planner plan` and `planner report`.
HistoryOption = Annotated[Path, typer.Option(help="Demand history from `planner ingest` (.csv or .parquet).")]
MaxRoundsOption = Annotated[int, typer.Option(help="Rounds of place -> simulate -> correct before giving up.")]
SimDurationOption = Annotated[str, typer.Option(SIM_DURATION, help="Simulated time per window and replication.")]
SimReplicationsOption = Annotated[int, typer.Option(help="Simulation replications per window (>= 1).")]
CacheDirOption = Annotated[Path | None, typer.Option(help="Calibration cache folder.")]
SearchSettingsOption = Annotated[bool, typer.Option(
    "--search-settings/--default-settings",
    help="Search each unit's engine settings (batch cap, token budget) in calibration, or keep each profile's "
         "defaults.")]

PoolsOption = Annotated[bool, typer.Option(
    "--pools/--lone-replica",
    help="Calibrate each unit alone and in pools of 2, 4, 8, ... up to the largest pool the forecast can need (a "
         "pool carries more per replica at the same p99), or on one replica only.")]


def _names(text: str | None) -> list[str] | None:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


# --------------------------------------------------------------------------- calibrate
@app.command(epilog=examples(
    """planner calibrate --scenario scenarios/demo.toml --out out/capacity.csv \\
    --models llama-3.1-8b --skus H100""",
    """planner calibrate --scenario scenarios/demo.toml --out out/capacity.csv \\
    --cache-dir out/demo/calibration""",
))
@guarded
def calibrate(
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Capacity table to write (.csv or .parquet), "
                                                         "the input of `planner place --capacity`.")],
    policy: Annotated[str | None, typer.Option(help="Scheduling policy (default: the scenario's).")] = None,
    models: Annotated[str | None, typer.Option(help="Only these models, comma-separated.")] = None,
    skus: Annotated[str | None, typer.Option(help="Only these SKUs, comma-separated.")] = None,
    histogram: HistogramOption = None,
    sim_duration: Annotated[str | None, typer.Option(
        SIM_DURATION, help="Least simulated time per replication and probed rate (longer when the rarest class "
                           "needs it for its requests; default: 10min).")] = None,
    duration: OldDurationOption = None,
    replications: Annotated[int, typer.Option(help="Replications per probed rate (>= 2, for the interval).")] = 8,
    tolerance: Annotated[float, typer.Option(help="Relative width at which the bisection stops.")] = 0.02,
    pool_replicas: Annotated[int, typer.Option(help="Replicas in the simulated pool (>= 1).")] = 1,
    pool_sizes: Annotated[str | None, typer.Option(
        help="Pool sizes to calibrate, comma-separated and increasing, e.g. 1,2,4,8: engine settings are chosen at "
             "the first, and each larger pool's capacity per replica is measured with that setting (one set of rows "
             "per size). Replaces --pool-replicas.")] = None,
    seed: SeedOption = None,
    cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse results for unchanged inputs.")] = True,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Calibration cache (default: $PLANNER_CACHE_DIR/calibration or "
                                       "~/.cache/planner/calibration).")
    ] = None,
    search_settings: SearchSettingsOption = True,
    prune: Annotated[bool, typer.Option(
        "--prune/--no-prune", help="Skip engine settings that cannot beat the best one found (step-time ceiling, "
                                   "then one probe); --no-prune searches every setting in full.")] = True,
    engine: EngineOption = "auto",
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    overrides: SetOption = None,
    as_json: JsonFlag = False,
    run: RunContext | None = None,
) -> None:
    """Measure each (model, SKU, TP)'s capacity by simulation: the engine setting and the highest req/s per replica
    meeting every p99 SLO."""
    from planner.outputs import table_json_path
    from planner.storage import check_table_suffix

    check_table_suffix(out)
    changes = what_if(overrides)
    check_paths(inputs={"--scenario": scenario, "--histogram": histogram_files(histogram)},
                outputs={"--out": [out, table_json_path(out)]})
    check_engine_options(engine, scheduler, workers)
    check_cache_folder(cache_dir if cache else None)
    sizes = _pool_sizes(pool_sizes, pool_replicas)

    from planner.workflows.calibrate import CalibrateOptions, calibrate_files

    simulated = renamed_option(sim_duration, duration, name=SIM_DURATION, old_name="--duration", default="10min")
    options = CalibrateOptions(policy=policy, models=_names(models), skus=_names(skus),
                               duration_s=parse_duration_s(simulated), replications=replications, rel_tol=tolerance,
                               pool_replicas=sizes[0], larger_pools=sizes[1:], seed=seed, use_cache=cache,
                               cache_dir=cache_dir,
                               search_settings=search_settings, prune=prune, engine=engine, workers=workers,
                               scheduler=scheduler)
    with progress_bar("Calibrating (model, SKU, TP) units", console=stderr) as advance:
        done = calibrate_files(scenario, out, options, histogram_file=histogram_files(histogram), progress=advance,
                               announce=announce_compile, what_if=changes, run=run)
    result = done.result
    columns = ["model", "sku", "tp_degree", *(["pool_replicas"] if len(sizes) > 1 else []), "traffic_class",
               "max_rps_per_replica", "mix_rps_per_gpu", "max_num_seqs",
               "max_num_batched_tokens", "long_prefill_token_threshold", "binding_class", "binding_metric", "cached"]
    rows = result.table[[c for c in columns if c in result.table.columns]].to_dict("records")
    print_outputs(rows, title=f"Capacity per replica, {result.meta.get('policy', policy)} "
                              f"({result.n_simulated} simulated, {result.n_cached} from cache)",
                  as_json=as_json, written=done.written, failures=result.failures)
    if result.failures and not as_json:
        print_table(result.failures, title="Units that meet no SLO at any load (no row written)")
    for note in [*result.meta.get("length_defaults", []), *result.meta.get("reuse_fits", [])]:
        stderr.print(f"[yellow]note:[/] {escape(note)}")


def _pool_sizes(pool_sizes: str | None, pool_replicas: int) -> tuple[int, ...]:
    """The pool sizes to calibrate: ``--pool-sizes``, else the one of ``--pool-replicas``."""
    from planner.calibrate.pools import parse_pool_sizes

    if pool_sizes is None:
        return (pool_replicas,)
    if pool_replicas != 1:
        raise InputError("--pool-replicas and --pool-sizes both give the simulated pool's size", where="--pool-sizes",
                         fix=f"pass one: e.g. --pool-sizes {pool_replicas},{2 * pool_replicas}")
    return parse_pool_sizes(pool_sizes)


# --------------------------------------------------------------------------- plan
def loop_options(*, max_rounds: int, periods: str, solver: str, node_limit: int, time_limit: float, gap: float,
                 quantile: float | None, sim_duration: str, replications: int, seed: int | None, engine: str,
                 workers: int | None, scheduler: str | None, cache_dir: Path | None,
                 search_settings: bool = True, min_history: str = "7d", pools: bool = True,
                 max_growth: float = DEFAULT_MAX_GROWTH, partial_hours: str = "mask",
                 commit_on_short_history: bool = False) -> Any:
    """The loop's options, checked (rounds, replications, durations) before any work."""
    from planner.forecast.run import parse_max_growth, parse_min_history, parse_partial_hours
    from planner.sim.work import check_duration, check_replications
    from planner.workflows.plan import LoopOptions

    if max_rounds < 1:
        raise InputError("--max-rounds must be at least 1", where="--max-rounds", fix="pass e.g. --max-rounds 4")
    check_replications(replications)
    check_engine_options(engine, scheduler, workers)
    check_cache_folder(cache_dir)
    return LoopOptions(max_rounds=max_rounds, periods=periods, solver=solver, node_limit=node_limit,
                       time_limit_s=time_limit, gap=gap, quantile=quantile,
                       sim_duration_s=check_duration(parse_duration_s(sim_duration)),
                       sim_replications=replications, seed=seed, engine=engine, workers=workers, scheduler=scheduler,
                       cache_dir=cache_dir, search_settings=search_settings, pools=pools,
                       min_history_hours=parse_min_history(min_history), max_growth=parse_max_growth(max_growth),
                       partial_hours=parse_partial_hours(partial_hours),
                       commit_on_short_history=commit_on_short_history)


def print_warnings(result: Any) -> None:
    """Print the run's placement warnings on stderr (the workflow keeps them in the run history)."""
    from planner.workflows.plan import pipeline_warnings

    for warning in pipeline_warnings(result):
        stderr.print(f"[yellow]warning:[/] {warning}")


def fail_if_not_converged(result: Any) -> None:
    """Exit 5 (:class:`SLOFailedError`) naming what still fails (the outputs are already written)."""
    loop = result.loop
    if loop.converged:
        return
    lines = [m.describe() for m in loop.misses[:8]]
    more = f" (and {len(loop.misses) - 8} more)" if len(loop.misses) > 8 else ""
    raise SLOFailedError(f"the SLO check still fails after {len(loop.rounds)} round(s): " + "; ".join(lines) + more,
                         fix="raise --max-rounds, loosen the SLOs, allow more SKUs or regions, or change the policy")


@app.command(epilog=examples(
    """planner plan --scenario scenarios/demo.toml \\
    --history data/history/demo_history.parquet --out out/plan""",
    """planner plan --scenario scenarios/demo.toml \\
    --history data/history/demo_history.parquet --out out/plan-compared \\
    --as-of 2026-10-15T00:00:00Z --compare-policies fcfs,drr-wspt""",
    """planner plan --scenario scenarios/demo.toml \\
    --history data/history/demo_history.parquet --out out/plan-what-if \\
    --demand-scale 2 --set classes.interactive.ttft_p99_ms=500""",
))
@guarded
def plan(
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    history: HistoryOption,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the plan, forecast, capacity, SLO "
                                                         "results and the loop's rounds.")] = Path("out/plan"),
    as_of: Annotated[
        str | None, typer.Option(help="Plan as of this time: only history before it is used (ISO-8601).")
    ] = None,
    compare_policies: Annotated[
        str | None, typer.Option(help="Also run the loop for these policies, e.g. fcfs,cmu,wspt,drr-wspt.")
    ] = None,
    capacity: Annotated[
        Path | None, typer.Option(help="Start from this capacity table instead of calibrating.")
    ] = None,
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
    """The whole loop: forecast, calibrate, place, simulate peak and trough, correct until every SLO holds."""
    changes = what_if(overrides, demand_scale)
    check_paths(inputs={"--scenario": scenario, "--history": history, "--capacity": capacity,
                        "--histogram": histogram_files(histogram)}, folders={"--out": out})
    options = loop_options(max_rounds=max_rounds, periods=periods, solver=solver, node_limit=node_limit,
                           time_limit=time_limit, gap=gap, quantile=quantile, sim_duration=sim_duration,
                           replications=replications, seed=seed, engine=engine, workers=workers, scheduler=scheduler,
                           cache_dir=cache_dir, search_settings=search_settings, min_history=min_history,
                           max_growth=max_growth, partial_hours=partial_hours, pools=pools,
                           commit_on_short_history=commit_on_short_history)

    from planner.loop.compare import comparison_table
    from planner.workflows.plan import plan as plan_workflow

    with narrated("Reading the history...") as say:
        done = plan_workflow(scenario, history, out, options, as_of=as_of, compare=compare_policies,
                             capacity_file=capacity, histogram_file=histogram_files(histogram), notify=say,
                             announce=announce_compile,
                             what_if=changes, run=run)
    result = done.result
    print_outputs(result.loop.rounds and [
        {k: r[k] for k in ("round", "failed", "shortfall", "cost_usd", "gpus_peak", "placement_status", "change")}
        for r in result.loop.rounds], title=f"Plan loop, {result.loop.policy}: "
                                            f"{'every SLO met' if result.loop.converged else 'SLO STILL MISSED'}",
                  as_json=as_json, written=done.written, converged=result.loop.converged,
                  cost_usd=round(result.loop.cost_usd, 2), gpus_peak=result.loop.gpus_peak,
                  reserved_commitments=(result.loop.placement.meta.get("reserved") or {}).get("commitments", []))
    if not as_json:
        print_commitments(result.loop.placement.meta, result.loop.cost_usd)
    if result.comparison and not as_json:
        print_table(comparison_table(result.comparison).to_dict("records"),
                    title="GPUs and USD each policy needs for the same SLOs")
    print_warnings(result)
    fail_if_not_converged(result)

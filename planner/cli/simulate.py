"""``planner simulate`` and ``planner experiment``: the fast loop from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli.app import (
    SIM_DURATION,
    DemandScaleOption,
    EngineOption,
    HistogramOption,
    JsonFlag,
    OldDurationOption,
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
    print_outputs,
    renamed_option,
    what_if,
)
from planner.cli.paths import check_paths, histogram_files
from planner.console import print_table, progress_bar, stderr
from planner.errors import InputError, SLOFailedError
from planner.runs import RunContext


# --------------------------------------------------------------------------- simulate
@app.command(epilog=examples(
    """planner simulate --scenario scenarios/demo.toml --plan out/plan.csv \\
    --out out/slo.csv""",
    """planner simulate --scenario scenarios/demo.toml --plan out/plan.csv \\
    --window trough --sim-duration 30min --out out/slo-trough.csv""",
))
@guarded
def simulate(
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    plan: Annotated[Path, typer.Option(help="Plan CSV from `planner place` (its flows file sits beside it).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Per-class results to write (.csv or .parquet).")],
    policy: Annotated[str | None, typer.Option(help="Scheduling policy (default: the scenario's).")] = None,
    window: Annotated[
        str, typer.Option(help="'peak' (the period with the most demand), 'trough' (the least demand above zero, "
                               "as `planner plan` checks it) or an ISO time inside a plan period.")
    ] = "peak",
    sim_duration: Annotated[str | None, typer.Option(
        SIM_DURATION, help="Simulated time per replication, e.g. 30min (default: 1h).")] = None,
    duration: OldDurationOption = None,
    replications: Annotated[int, typer.Option(help="Independent replications for confidence intervals.")] = 3,
    seed: SeedOption = None,
    flows: Annotated[
        Path | None, typer.Option(help="Routed demand per period (default: <plan>.flows.csv beside the plan).")
    ] = None,
    forecast: Annotated[
        Path | None,
        typer.Option(help="Route this forecast's demand instead of flows (for plans written by hand)."),
    ] = None,
    histogram: HistogramOption = None,
    engine: EngineOption = "auto",
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    overrides: SetOption = None,
    demand_scale: DemandScaleOption = None,
    as_json: JsonFlag = False,
    run: RunContext | None = None,
) -> None:
    """Simulate a plan's replicas at the demand of one window and check every class's latency SLO."""
    from planner.outputs import plan_flows_path, table_json_path
    from planner.storage import check_table_suffix

    check_table_suffix(out)
    changes = what_if(overrides, demand_scale)
    flows_path = None
    if forecast is None:
        flows_path = flows or plan_flows_path(plan)
        if flows is None and plan.is_file() and not flows_path.exists():
            raise InputError(
                "the routed demand (flows) for this plan was not found",
                where=flows_path,
                fix="pass --flows FILE or --forecast FILE, or use a plan from `planner place` (it writes "
                "<plan>.flows.csv)",
            )
    check_paths(inputs={"--scenario": scenario, "--plan": plan, "--flows": flows_path, "--forecast": forecast,
                        "--histogram": histogram_files(histogram)},
                outputs={"--out": [out, table_json_path(out)]})
    check_engine_options(engine, scheduler, workers)

    from planner.sim.work import check_duration, check_replications
    from planner.workflows.simulate import SimulateOptions
    from planner.workflows.simulate import simulate as simulate_workflow

    simulated = renamed_option(sim_duration, duration, name=SIM_DURATION, old_name="--duration", default="1h")
    options = SimulateOptions(policy=policy, window=window, duration_s=check_duration(parse_duration_s(simulated)),
                              replications=check_replications(replications), seed=seed, engine=engine,
                              workers=workers, scheduler=scheduler)

    def progress(period: str) -> Any:
        return progress_bar(f"Simulating period {period}: pools x {replications} replication(s) of {simulated}",
                            console=stderr)

    done = simulate_workflow(scenario, plan, out, options, flows_file=flows_path, forecast_file=forecast,
                             histogram_file=histogram_files(histogram), progress=progress, announce=announce_compile,
                             what_if=changes, run=run)
    result, period = done.result, done.period
    print_outputs(
        result.summary_rows(),
        title=f"SLO check, period {period} ({'all met' if result.all_met else 'SOME MISSED'})",
        as_json=as_json, written=done.written, period=period, all_met=result.all_met,
    )
    fail_if_missed(result, period)


def fail_if_missed(result: Any, period: str) -> None:
    """Exit 5 (:class:`SLOFailedError`) naming every missed (region, model, class, metric); the outputs are written."""
    misses = result.misses()
    if not misses:
        return
    shown = [f"{m['region']} / {m['model']} / {m['traffic_class']} {m['metric']} ({m['measured']})"
             for m in misses[:8]]
    more = f" (and {len(misses) - 8} more)" if len(misses) > 8 else ""
    raise SLOFailedError(f"the SLO check failed in period {period}: " + "; ".join(shown) + more,
                         fix="add replicas to those pools (place with a capacity table from `planner calibrate`), "
                             "loosen the SLOs, or try another --policy")


# --------------------------------------------------------------------------- experiment
@app.command(epilog=examples(
    "planner experiment e1 --out out/experiments --scale 0.1",
    "planner experiment e4 --out out/experiments --seed 1",
))
@guarded
def experiment(
    name: Annotated[str, typer.Argument(help="Reference experiment from theory.md: e1, e2, e3 or e4.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for <name>.csv and <name>.png.")],
    seed: Annotated[int, typer.Option(help="Base seed; the same seed gives byte-identical outputs.")] = 0,
    scale: Annotated[
        float, typer.Option(help="Fraction of the full request counts (0 < scale <= 1), for quick looks.")
    ] = 1.0,
    as_json: JsonFlag = False,
    run: RunContext | None = None,
) -> None:
    """Run a reference experiment (E1-E4 of theory.md) and write its table and chart."""
    from planner.outputs import experiment_paths

    check_paths(outputs={"--out": experiment_paths(name.lower(), out)}, folders={"--out": out})

    from planner.workflows.simulate import experiment as experiment_workflow

    with stderr.status(f"Running experiment {name} (scale {scale:g})..."):
        result, written = experiment_workflow(name.lower(), out, seed=seed, scale=scale, run=run)
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

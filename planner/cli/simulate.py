"""``planner simulate`` and ``planner experiment``: the fast loop from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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
    parse_duration_s,
    prepare_simulator,
    print_outputs,
    scenario_profiles,
    use_engine,
)
from planner.cli.paths import check_paths
from planner.console import print_error, print_table, progress_bar, stderr
from planner.errors import ExitCode, InputError
from planner.sources import named


# --------------------------------------------------------------------------- simulate
def _forecast_window(scenario: Any, plan: Any, forecast: Any, window: str) -> tuple[str, Any]:
    """(plan period, serving demand) from a forecast hour, for plans without flows."""
    from planner.placement.forecast_check import check_forecast_contract
    from planner.sim.forecast_demand import (
        forecast_hour,
        provisioned_column,
        route_forecast,
    )

    check_forecast_contract(forecast, scenario, hours=scenario.horizon_hours)
    column = provisioned_column(scenario, forecast)
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
    as_json: JsonFlag = False,
) -> None:
    """Simulate a plan's replicas at the demand of one window and check every class's latency SLO."""
    from planner.outputs import plan_flows_path, table_json_path
    from planner.storage import check_table_suffix, read_table

    check_table_suffix(out)
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
                        "--histogram": histogram},
                outputs={"--out": [out, table_json_path(out)]})
    use_engine(engine, scheduler, workers)

    from planner.catalog import load_catalog
    from planner.scenario import load_scenario
    from planner.sim.plan_input import validated_plan
    from planner.sim.simulate import PLAN_COLUMNS, select_window, simulate_plan, write_simulation_outputs
    from planner.sim.work import check_duration, check_evidence, check_replications

    duration_s = check_duration(parse_duration_s(duration))
    check_replications(replications)
    loaded = load_scenario(scenario)
    profiles = scenario_profiles(loaded, scenario)
    plan_frame = validated_plan(named(read_table(plan), plan), PLAN_COLUMNS)
    if forecast is not None:
        period, demand = _forecast_window(loaded, plan_frame, named(read_table(forecast), forecast), window)
    else:
        period, demand = select_window(plan_frame, named(read_table(flows_path), flows_path), window)
    prepare_simulator()
    with progress_bar(f"Simulating period {period}: pools x {replications} replication(s) of {duration}",
                      console=stderr) as advance:
        result = simulate_plan(
            loaded, plan_frame, demand, profiles, load_catalog(),
            policy=policy, duration_s=duration_s, replications=replications, seed=seed,
            histogram=read_table(histogram) if histogram else None, period=period,
            engine=engine, workers=workers, progress=advance,
        )
    check_evidence(result.per_class, duration_s=duration_s, warmup_s=float(result.meta["warmup_s"]))
    written = write_simulation_outputs(result, out)
    print_outputs(
        result.summary_rows(),
        title=f"SLO check, period {period} ({'all met' if result.all_met else 'SOME MISSED'})",
        as_json=as_json, written=written, period=period, all_met=result.all_met,
    )
    fail_if_missed(result, period)


def fail_if_missed(result: Any, period: str) -> None:
    """Exit 5 naming every missed (region, model, class, metric); the outputs are already written."""
    misses = result.misses()
    if not misses:
        return
    shown = [f"{m['region']} / {m['model']} / {m['traffic_class']} {m['metric']} ({m['measured']})"
             for m in misses[:8]]
    more = f" (and {len(misses) - 8} more)" if len(misses) > 8 else ""
    print_error(f"the SLO check failed in period {period}: " + "; ".join(shown) + more,
                fix="add replicas to those pools (place with a capacity table from `planner calibrate`), "
                    "loosen the SLOs, or try another --policy",
                code=ExitCode.SLO_FAILED)
    raise typer.Exit(ExitCode.SLO_FAILED)


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
    from planner.outputs import experiment_paths

    check_paths(outputs={"--out": experiment_paths(name.lower(), out)}, folders={"--out": out})

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

"""``planner place``: the placement integer program from the command line (:mod:`planner.workflows.place`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli import placement_options as limits
from planner.cli.app import (
    DemandScaleOption,
    JsonFlag,
    SetOption,
    app,
    examples,
    guarded,
    print_commitments,
    print_outputs,
    what_if,
)
from planner.cli.paths import check_paths
from planner.cli.placement_options import GapOption, NodeLimitOption, PeriodsOption, SolverOption, TimeLimitOption
from planner.console import stderr
from planner.runs import RunContext


# --------------------------------------------------------------------------- place
@app.command(epilog=examples(
    """planner forecast data/history/demo_history.parquet --out out/forecast.parquet
planner place --scenario scenarios/demo.toml --forecast out/forecast.parquet \\
    --out out/plan.csv""",
    """planner place --scenario scenarios/demo.toml --forecast out/forecast.parquet \\
    --capacity out/capacity.csv --out out/plan-calibrated.csv""",
))
@guarded
def place(
    scenario: Annotated[Path, typer.Option(help="Scenario TOML file.")],
    forecast: Annotated[Path, typer.Option(help="Forecast from `planner forecast` (.csv or .parquet).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Plan CSV to write; the plan JSON and flows go beside it.")],
    capacity: Annotated[
        Path | None,
        typer.Option(help="Max req/s per replica per (model, sku, traffic_class); default: analytic estimate."),
    ] = None,
    solver: SolverOption = limits.SOLVER,
    node_limit: NodeLimitOption = limits.NODE_LIMIT,
    time_limit: TimeLimitOption = limits.TIME_LIMIT_S,
    gap: GapOption = limits.GAP,
    quantile: Annotated[
        float | None, typer.Option(help="Forecast quantile to provision for (default: the scenario's).")
    ] = None,
    periods: PeriodsOption = limits.PERIODS,
    debug: Annotated[
        Path | None, typer.Option(help="Write the model as LP/MPS files into this folder.")
    ] = None,
    overrides: SetOption = None,
    demand_scale: DemandScaleOption = None,
    as_json: JsonFlag = False,
    run: RunContext | None = None,
) -> None:
    """Place GPU replicas by SKU, region and purchase tier at least cost (an integer program), and check the plan."""
    from planner.outputs import plan_output_paths
    from planner.storage import check_table_suffix

    check_table_suffix(out)
    changes = what_if(overrides, demand_scale)
    check_paths(inputs={"--scenario": scenario, "--forecast": forecast, "--capacity": capacity},
                outputs={"--out": plan_output_paths(out)}, folders={"--debug": debug})

    from planner.workflows.place import PlaceOptions
    from planner.workflows.place import place as place_workflow

    options = PlaceOptions(solver=solver, node_limit=node_limit, time_limit_s=time_limit, gap=gap, quantile=quantile,
                           periods=periods)
    with stderr.status(f"Solving the placement program with {solver}..."):
        placed = place_workflow(scenario, forecast, out, options, capacity_file=capacity, debug_dir=debug,
                                what_if=changes, run=run)
    meta = placed.result.meta
    title = (
        f"Plan: {meta.get('status')} via {meta.get('backend')}, objective {meta.get('objective')}, "
        f"gap {meta.get('gap')}, {meta.get('solve_time_s')} s"
    )
    print_outputs(placed.result.summary_rows(), title=title, as_json=as_json, written=placed.written, meta=meta)
    if not as_json:
        print_commitments(meta, float(placed.result.plan["usd"].sum()))
    for warning in meta["warnings"]:
        stderr.print(f"[yellow]warning:[/] {warning}")

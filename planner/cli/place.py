"""``planner place``: the placement integer program from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli import placement_options as limits
from planner.cli.app import JsonFlag, app, guarded, print_outputs, profile_hashes, scenario_profiles, session
from planner.cli.paths import check_paths
from planner.cli.placement_options import GapOption, NodeLimitOption, PeriodsOption, SolverOption, TimeLimitOption
from planner.console import stderr
from planner.sources import named
from planner.storage import file_sha256


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
    as_json: JsonFlag = False,
) -> None:
    """Place GPU replicas by SKU, region and purchase tier at least cost (an integer program), and check the plan."""
    from planner.outputs import plan_output_paths
    from planner.storage import check_table_suffix, read_table

    check_table_suffix(out)
    check_paths(inputs={"--scenario": scenario, "--forecast": forecast, "--capacity": capacity},
                outputs={"--out": plan_output_paths(out)}, folders={"--debug": debug})

    from planner.catalog import load_catalog
    from planner.placement.capacity import validate_capacity
    from planner.placement.workflow import place_plan, write_plan_outputs
    from planner.scenario import load_scenario

    loaded = load_scenario(scenario)
    profiles = scenario_profiles(loaded, scenario)
    hashes = {"scenario": file_sha256(scenario), "forecast": file_sha256(forecast), **profile_hashes(loaded, scenario)}
    capacity_table = None
    if capacity is not None:
        capacity_table = validate_capacity(read_table(capacity), where=capacity)
        hashes["capacity"] = file_sha256(capacity)
    with stderr.status(f"Solving the placement program with {solver}..."):
        result = place_plan(
            loaded, named(read_table(forecast), forecast), load_catalog(), profiles,
            capacity=capacity_table, solver=solver, node_limit=node_limit, time_limit_s=time_limit, gap=gap,
            quantile=quantile, periods=periods, debug_dir=debug, input_hashes=hashes,
        )
    written = write_plan_outputs(result, out)
    meta = result.meta
    title = (
        f"Plan: {meta.get('status')} via {meta.get('backend')}, objective {meta.get('objective')}, "
        f"gap {meta.get('gap')}, {meta.get('solve_time_s')} s"
    )
    if session.run is not None:
        session.run.add_figures(plan_cost_usd=meta["cost_usd"]["total"], status=meta["status"],
                                slo_checked=meta["slo_checked"], reproducible=meta["reproducible"])
        session.run.add_warnings(*meta["warnings"])
    print_outputs(result.summary_rows(), title=title, as_json=as_json, written=written, meta=meta)
    for warning in meta["warnings"]:
        stderr.print(f"[yellow]warning:[/] {warning}")

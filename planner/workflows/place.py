"""``planner place``: read the forecast, scenario and capacity, place, write the plan, record the run."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from planner.settings import resolve_settings
from planner.workflows.common import NO_CHANGES, WhatIf, load_planning_inputs, read_named, scenario_hashes
from planner.workflows.files import placement_debug_writer, write_plan_outputs

if TYPE_CHECKING:
    from planner.placement.result import PlacementResult
    from planner.runs import RunContext


@dataclass(frozen=True)
class PlaceOptions:
    """How hard the placement works (``planner place``'s options)."""

    solver: str
    node_limit: int
    time_limit_s: float
    gap: float
    quantile: float | None
    periods: str


@dataclass(frozen=True)
class Placed:
    result: PlacementResult
    written: list[Path]


def place(scenario_file: Path, forecast_file: Path, out: Path, options: PlaceOptions, *,
          capacity_file: Path | None = None, debug_dir: Path | None = None, what_if: WhatIf = NO_CHANGES,
          run: RunContext | None = None) -> Placed:
    """Place replicas for the forecast (scaled by ``what_if``) and write ``out``, its flows and its JSON (all or
    none)."""
    from planner.catalog import load_catalog
    from planner.forecast.scaling import scale_forecast
    from planner.placement.capacity import validate_capacity
    from planner.placement.place import place_plan
    from planner.storage import file_sha256, read_table

    scenario, profiles = load_planning_inputs(scenario_file, what_if.overrides)
    what_if.record(run)
    settings = resolve_settings(os.environ, seed=None, default_seed=scenario.seeds.base, quantile=options.quantile,
                                default_quantile=scenario.capacity.forecast_quantile)
    hashes = {**scenario_hashes(scenario_file, scenario), "forecast": file_sha256(forecast_file)}
    capacity = None
    if capacity_file is not None:
        capacity = validate_capacity(read_table(capacity_file), where=capacity_file)
        hashes["capacity"] = file_sha256(capacity_file)
    forecast = scale_forecast(read_named(forecast_file), what_if.demand)
    result = place_plan(
        scenario, forecast, load_catalog(), profiles, capacity=capacity, solver=options.solver,
        node_limit=options.node_limit, time_limit_s=options.time_limit_s, gap=options.gap,
        quantile=settings.quantile, periods=options.periods,
        debug=placement_debug_writer(debug_dir) if debug_dir is not None else None, input_hashes=hashes,
    )
    written = write_plan_outputs(result, out)
    if run is not None:
        meta = result.meta
        run.add_figures(plan_cost_usd=meta["cost_usd"]["total"], status=meta["status"],
                        slo_checked=meta["slo_checked"], reproducible=meta["reproducible"])
        run.add_warnings(*meta["warnings"])
        run.add_output(*written)
    return Placed(result, written)

"""``planner sweep``: read the scenario and history, forecast once, run the loop per value, write the folder."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.storage import file_sha256, read_table, staged_outputs
from planner.workflows.calibration_cache import folder_store
from planner.workflows.common import (
    NO_CHANGES,
    Announce,
    WhatIf,
    prepare_simulator,
    read_histograms,
    read_named,
    record_settings,
)
from planner.workflows.files import check_replaced_folder
from planner.workflows.plan import LoopOptions, Notify, resolve_loop

if TYPE_CHECKING:
    import pandas as pd

    from planner.runs import RunContext

SWEEP_FILES = ("sweep.csv", "sweep.png", "sweep.json")


@dataclass(frozen=True)
class Swept:
    table: pd.DataFrame
    written: list[Path]


def sweep(scenario_file: Path, history_file: Path, out: Path, vary_text: str, options: LoopOptions, *,
          what_if: WhatIf = NO_CHANGES, capacity_file: Path | None = None, histogram_file: Sequence[Path] = (),
          notify: Notify | None = None,
          progress: Callable[[int, int], None] | None = None, announce: Announce | None = None,
          run: RunContext | None = None) -> Swept:
    """Run the plan loop once per ``--vary`` value on one forecast; write ``sweep.csv``, ``sweep.png`` and
    ``sweep.json`` into ``out`` together."""
    from planner.catalog import load_catalog
    from planner.loop.pipeline import forecast_for_plan, history_as_of, with_evidence
    from planner.loop.sweep import parse_vary, run_sweep, sweep_points
    from planner.placement.capacity import validate_capacity
    from planner.profiles import load_profiles
    from planner.report.sweep_chart import render_sweep_chart
    from planner.scenario import parse_scenario
    from planner.scenario.data_check import check_fits_data
    from planner.scenario.loading import overridden_source, read_scenario_data
    from planner.scenario.overrides import apply_overrides

    say = notify or (lambda _text: None)
    check_replaced_folder(out, SWEEP_FILES, "a sweep's", "a sweep", "`planner sweep`")
    vary = parse_vary(vary_text)
    data = apply_overrides(read_scenario_data(scenario_file), what_if.overrides)
    source = overridden_source(scenario_file, what_if.overrides)
    base = parse_scenario(data, source)
    points = sweep_points(vary, data, source, what_if.demand)  # every value validated before any work
    capacity = validate_capacity(read_table(capacity_file), where=capacity_file) if capacity_file else None
    settings, loop = resolve_loop(options, base)
    record_settings(run, settings)
    what_if.record(run)
    profiles = load_profiles(extra=base.profile_paths(scenario_file))
    check_fits_data(base, None, profiles, where=source)  # as `plan` does: validate's error, not an infeasible row
    known = history_as_of(read_named(history_file), None)
    loop = with_evidence(loop, base, known)
    forecast = forecast_for_plan(base, known, loop, notify=say)
    prepare_simulator(announce)
    say(f"planning {len(points)} values of {vary.path}")
    table = run_sweep(points, forecast.forecast, load_catalog(), profiles, loop,
                      histogram=read_histograms(histogram_file), store=folder_store(settings.cache_dir),
                      capacity=capacity, progress=progress)
    meta: dict[str, Any] = {"vary": vary.path, "values": list(vary.values), "what_if": what_if.describe(),
                            "settings": loop.to_dict(), "inputs_sha256": {"scenario": file_sha256(scenario_file),
                                                                          "history": file_sha256(history_file),
                                                                          **({"capacity": file_sha256(capacity_file)}
                                                                             if capacity_file else {})}}
    with staged_outputs() as outputs:
        staged = outputs.folder(out)
        (staged / "sweep.csv").write_text(table.to_csv(index=False, lineterminator="\n"))
        (staged / "sweep.png").write_bytes(render_sweep_chart(table, vary.path))
        (staged / "sweep.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    if run is not None:
        run.add_figures(points=len(table), feasible=int(table["feasible"].sum()))
        run.add_output(out)
    return Swept(table, [out / name for name in SWEEP_FILES])

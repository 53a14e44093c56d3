"""The files ``planner plan --out DIR`` writes, all together.

Every file is first written in full to a temporary file beside its destination, and
the renames happen only once all of them are complete: a failure or an interrupt while
writing leaves every earlier output in place, and no file is ever half-written.

=========================  ==================================================================
file                       what it holds
=========================  ==================================================================
forecast.csv               the forecast (region, model, traffic_class, ts, mean, q50..q99)
forecast.meta.json         its metadata: models used, fallbacks, data quality, backtest
capacity.calibrated.csv    the calibration's capacity table (when it was calibrated)
capacity.csv               the capacity table of the final round (after any derating)
plan.csv                   the final plan: period, region, sku, model, tier, replicas, gpus, usd
plan.flows.csv             routed demand per period (origin -> serving region), req/s
plan.json                  the plan's solver figures, lower bounds, baselines and input hashes
slo.csv                    the simulator's per-class results for each window of the last round
rounds.json                the loop: settings, every round (misses, changes, cost), the outcome
policies.csv               with --compare-policies: policy, gpus, usd, slo_met, rounds, binding, still_failing
=========================  ==================================================================

Same inputs and seed, same bytes: the files leave out how this run got its figures
(cache hits, wall-clock seconds), except ``plan.json``, which keeps the solver's times
(``solve_time_s`` and the bounds' ``seconds``) because they are part of what a plan
reports. Timings of the loop's rounds are in the run history (``planner history``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from planner import __version__
from planner.loop.compare import comparison_table
from planner.loop.pipeline import PipelineResult
from planner.loop.run import LoopSettings
from planner.placement.workflow import plan_json_payload
from planner.sim.result import jsonable
from planner.storage import RUN_STATE_KEYS, atomic_path, without_run_state


def _csv(frame: pd.DataFrame) -> bytes:
    frame = frame.drop(columns=[c for c in RUN_STATE_KEYS if c in frame.columns])
    return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")


def _json(payload: Any) -> bytes:
    return (json.dumps(jsonable(payload), indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def rounds_document(result: PipelineResult, settings: LoopSettings) -> dict[str, Any]:
    loop = result.loop
    return {
        "planner_version": __version__,
        "policy": loop.policy,
        "converged": loop.converged,
        "still_failing": [m.to_dict() for m in loop.misses],
        "settings": settings.to_dict(),
        "as_of": None if result.as_of is None else f"{result.as_of:%Y-%m-%dT%H:%M:%SZ}",
        "rounds": without_run_state(loop.rounds),
        "calibration": None if loop.calibration is None else without_run_state(loop.calibration.meta),
        "simulation": loop.simulation_meta,
    }


def plan_files(result: PipelineResult, settings: LoopSettings) -> dict[str, bytes]:
    """Every output file's name and bytes."""
    loop = result.loop
    files = {
        "forecast.csv": _csv(result.forecast.forecast),
        "forecast.meta.json": _json(result.forecast.metadata),
        "capacity.csv": _csv(loop.capacity),
        "plan.csv": _csv(loop.placement.plan),
        "plan.flows.csv": _csv(loop.placement.flows),
        "plan.json": _json(plan_json_payload(loop.placement, "plan.csv", "plan.flows.csv")),
        "slo.csv": _csv(loop.slo),
        "rounds.json": _json(rounds_document(result, settings)),
    }
    if loop.calibration is not None:
        files["capacity.calibrated.csv"] = _csv(loop.calibration.table)
    if result.comparison:
        files["policies.csv"] = _csv(comparison_table(result.comparison))
    return dict(sorted(files.items()))


def write_plan_run(result: PipelineResult, settings: LoopSettings, out_dir: str | Path) -> list[Path]:
    """Write the files (module docstring) into ``out_dir``; return their paths."""
    out_dir = Path(out_dir)
    files = plan_files(result, settings)
    with contextlib.ExitStack() as stack:
        for name, data in files.items():
            stack.enter_context(atomic_path(out_dir / name)).write_bytes(data)
    return [out_dir / name for name in files]

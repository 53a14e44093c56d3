"""The folder ``planner plan --out DIR`` writes, as a whole.

The folder is staged beside ``DIR`` (:func:`planner.storage.staged_outputs`): every file
is written in full into a temporary folder, and only then does that folder replace
``DIR`` (the previous one is moved aside and deleted), so ``DIR`` always holds one run's
complete set of files: a failure or an interrupt leaves the previous run's folder as it
was, and a file an earlier run wrote but this one does not (``policies.csv``) cannot
linger beside the new plan. Because ``DIR`` is replaced whole, it may hold only these
files: :func:`check_plan_folder` refuses any other folder before the work starts.

=========================  ==================================================================
file                       what it holds
=========================  ==================================================================
forecast.csv               the forecast (region, model, traffic_class, ts, mean, q50..q99)
forecast.meta.json         its metadata: models used, fallbacks, data quality, backtest
capacity.calibrated.csv    the calibration's capacity table (when it was calibrated)
capacity.csv               the capacity table of the final round (after any derating)
plan.csv                   the final plan: period, region, sku, tp_degree, model, tier, replicas,
                           gpus, usd, engine, max_num_seqs, max_num_batched_tokens
plan.flows.csv             routed demand per period (origin -> serving region), req/s
plan.json                  the plan's solver figures, lower bounds, baselines, input hashes and
                           deployments (engine settings and launch commands)
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

import json
from pathlib import Path
from typing import Any

import pandas as pd

from planner import __version__
from planner.errors import InputError
from planner.loop.compare import comparison_table
from planner.loop.pipeline import PipelineResult
from planner.loop.run import LoopSettings
from planner.placement.workflow import plan_json_payload
from planner.sim.result import jsonable
from planner.storage import RUN_STATE_KEYS, staged_outputs, without_run_state

PLAN_FILE_NAMES = frozenset({
    "forecast.csv", "forecast.meta.json", "capacity.calibrated.csv", "capacity.csv", "plan.csv", "plan.flows.csv",
    "plan.json", "slo.csv", "rounds.json", "policies.csv",
})
"""Every file this module writes (the table above); a plan folder holds nothing else."""


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


def check_plan_folder(out_dir: str | Path, option: str = "--out") -> None:
    """Refuse an ``out_dir`` that holds anything but a plan run's files (it is replaced as a whole)."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return
    foreign = sorted(entry.name for entry in out_dir.iterdir() if entry.name not in PLAN_FILE_NAMES)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise InputError(f"the folder holds files that are not a plan's ({shown}); a plan run replaces the "
                         "folder as a whole", where=f"{option} {out_dir}",
                         fix=f"pass a new or empty folder with {option}, or one an earlier `planner plan` wrote")


def write_plan_run(result: PipelineResult, settings: LoopSettings, out_dir: str | Path) -> list[Path]:
    """Write the files (module docstring) as the folder ``out_dir``, replacing it whole; return their paths."""
    out_dir = Path(out_dir)
    check_plan_folder(out_dir)
    files = plan_files(result, settings)
    with staged_outputs() as outputs:
        staged = outputs.folder(out_dir)
        for name, data in files.items():
            (staged / name).write_bytes(data)
    return [out_dir / name for name in files]

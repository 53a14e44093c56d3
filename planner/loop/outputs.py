"""The folder ``planner plan --out DIR`` writes, as a whole.

The shell (:func:`planner.workflows.files.write_plan_run`) stages the folder beside ``DIR``:
every file is written in full into a temporary folder, and only then does that folder replace
``DIR`` (the previous one is moved aside and deleted), so ``DIR`` always holds one run's
complete set of files: a failure or an interrupt leaves the previous run's folder as it
was, and a file an earlier run wrote but this one does not (``policies.csv``) cannot
linger beside the new plan. Because ``DIR`` is replaced whole, it may hold only these
files: :func:`planner.workflows.files.check_plan_folder` refuses any other folder before the work starts.

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
slo.csv                    the simulator's per-class results of the returned plan, per window: the
                           fleet peak and each pool's own peak and trough (``window``, ``period``)
rounds.json                the loop: settings, every round (windows, misses, every derate, raise and
                           back-off with its window and p99 / SLO), the round whose plan is returned
policies.csv               with --compare-policies: policy, gpus, usd, slo_met, rounds, binding, still_failing
=========================  ==================================================================

Same inputs and seed, same bytes: the files leave out how this run got its figures
(cache hits, wall-clock seconds), except ``plan.json``, which keeps the solver's times
(``solve_time_s`` and the bounds' ``seconds``) because they are part of what a plan
reports. Timings of the loop's rounds are in the run history (``planner history``).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from planner import __version__
from planner.loop.compare import comparison_table
from planner.loop.pipeline import PipelineResult
from planner.loop.run import LoopSettings
from planner.placement.place import plan_json_payload
from planner.run_state import RUN_STATE_KEYS, without_run_state
from planner.sim.result import jsonable

PLAN_FILE_NAMES = frozenset({
    "forecast.csv", "forecast.meta.json", "capacity.calibrated.csv", "capacity.csv", "plan.csv", "plan.flows.csv",
    "plan.json", "slo.csv", "rounds.json", "policies.csv",
})
"""Every file of a plan run (the table above); a plan folder holds nothing else."""


def _csv(frame: pd.DataFrame) -> bytes:
    frame = frame.drop(columns=[c for c in RUN_STATE_KEYS if c in frame.columns])
    data: bytes = frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    return data


def _json(payload: Any) -> bytes:
    return (json.dumps(jsonable(payload), indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def rounds_document(result: PipelineResult, settings: LoopSettings) -> dict[str, Any]:
    loop = result.loop
    return {
        "planner_version": __version__,
        "policy": loop.policy,
        "converged": loop.converged,
        "plan_round": loop.plan_round,
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

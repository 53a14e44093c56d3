"""Replications of one pool and their per-class table with 95 % confidence intervals.

Replication i draws its requests from child i of the pool's SeedSequence, so the same
seed gives identical results, and two policies simulated with the same seed see the same
arrivals, lengths and prediction errors (common random numbers).

Running and summarising are apart so replications can fan out: :class:`ReplicationTask`
(the pool's config and one child seed, a few kilobytes) is all a worker needs, and
:func:`run_replication_task` returns only the per-class and pool figures of that
replication (dicts of floats), never the engine's arrays. :func:`summarise_pool` then
combines them in replication order, so the table does not depend on where each ran.

Every metric of :mod:`.metrics` appears as its mean over replications and, beside it,
``<metric>_ci95``: the Student-t half-width of the 95 % interval (infinite with one
replication). SLO columns, per metric m of :data:`planner.slo.SLO_METRICS` (ttft, tpot,
e2e): ``slo_<m>_target_ms`` is the class's target, ``slo_<m>_met`` compares the mean p99
(rejections at +∞) with it, and ``slo_<m>_verdict`` says whether that holds with 95 %
confidence; ``slo_met`` is every metric met. A metric the class does not set is not
checked: its target is empty, it counts as met, and its verdict is ``not_set``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from planner.sim.replica.metrics import combine, replication_metrics, verdict
from planner.sim.replica.pool import ClassSpec, PoolConfig, run_replication
from planner.slo import SLO_METRICS, met_column, p99_column, target_column, verdict_column

NOT_SET = "not_set"
"""The verdict of a metric whose SLO the class does not set: nothing was checked."""
POOL_METRICS = (
    "replica_utilisation", "mean_batch", "kv_utilisation", "kv_peak_fraction", "throughput_tokens_per_s",
    "cost_usd_per_m_output_tokens", "littles_residual_run", "littles_residual_window",
)


@dataclass(frozen=True)
class PoolResult:
    """Per-class rows (one per traffic class) and pool-level figures of one simulated pool."""

    per_class: pd.DataFrame
    pool: dict[str, Any]


ReplicationMetrics = tuple[list[dict[str, float]], dict[str, Any]]
PREFIX_POOL_METRICS = ("prefix_hit_rate", "prefill_tokens_saved")
"""Pool figures present only with prefix data (:mod:`.metrics`), summarised like :data:`POOL_METRICS`."""


@dataclass(frozen=True)
class ReplicationTask:
    """One replication of one pool: its config and its own child SeedSequence."""

    config: PoolConfig
    seed: np.random.SeedSequence


def replication_tasks(config: PoolConfig, replications: int, seed: np.random.SeedSequence) -> list[ReplicationTask]:
    """Replication i gets child i of ``seed`` (``seed.spawn``), as a serial run would."""
    return [ReplicationTask(config, child) for child in seed.spawn(max(1, replications))]


def run_replication_task(task: ReplicationTask) -> ReplicationMetrics:
    """(per-class rows, pool figures) of one replication. Top-level so it pickles."""
    return replication_metrics(run_replication(task.config, task.seed))


def simulate_pool(config: PoolConfig, *, replications: int, seed: np.random.SeedSequence,
                  labels: dict[str, str] | None = None) -> PoolResult:
    """Run ``replications`` independent replications here and summarise them."""
    metrics = [run_replication_task(task) for task in replication_tasks(config, replications, seed)]
    return summarise_pool(config, metrics, labels)


def slo_checks(klass: ClassSpec, row: dict[str, Any], reps: list[dict[str, float]]) -> dict[str, Any]:
    """Target, met and verdict columns of every metric, then ``slo_met`` (module docstring)."""
    targets = {m: klass.slo.target(m) for m in SLO_METRICS}
    out: dict[str, Any] = {target_column(m): math.nan if t is None else t for m, t in targets.items()}
    out.update({met_column(m): t is None or bool(row[p99_column(m)] <= t) for m, t in targets.items()})
    out.update({verdict_column(m): NOT_SET if t is None else verdict([r[p99_column(m)] for r in reps], t)
                for m, t in targets.items()})
    out["slo_met"] = all(out[met_column(m)] for m in SLO_METRICS)
    return out


def _summarise_prefix(per_rep_pool: list[dict[str, Any]], pool_summary: dict[str, Any]) -> None:
    """The prefix-cache pool figures: mean and 95 % half-width, and the per-replica hit rates' means."""
    for name in PREFIX_POOL_METRICS:
        mean, half = combine([p[name] for p in per_rep_pool])
        pool_summary[name] = mean
        pool_summary[f"{name}_ci95"] = half
    by_replica = np.array([p["prefix_hit_rate_by_replica"] for p in per_rep_pool], dtype=np.float64)
    pool_summary["prefix_hit_rate_by_replica"] = tuple(
        float(np.nanmean(col)) if np.isfinite(col).any() else math.nan for col in by_replica.T)


def summarise_pool(config: PoolConfig, metrics: list[ReplicationMetrics],
                   labels: dict[str, str] | None = None) -> PoolResult:
    """Per-class rows with means and 95 % half-widths over ``metrics`` (one entry per replication)."""
    per_rep_rows = [rows for rows, _ in metrics]
    per_rep_pool = [pool for _, pool in metrics]
    pool_summary: dict[str, Any] = {}
    for name in POOL_METRICS:
        mean, half = combine([p[name] for p in per_rep_pool])
        pool_summary[name] = mean
        pool_summary[f"{name}_ci95"] = half
    if "prefix_hit_rate" in per_rep_pool[0]:
        _summarise_prefix(per_rep_pool, pool_summary)
    residuals = np.abs([p["littles_residual_run"] for p in per_rep_pool])
    residuals = residuals[np.isfinite(residuals)]
    pool_summary["littles_residual_run_max_abs"] = float(residuals.max()) if residuals.size else math.nan
    pool_summary["steps_per_replication"] = float(np.mean([p["steps"] for p in per_rep_pool]))
    out = []
    for k, klass in enumerate(config.classes):
        reps = [rows[k] for rows in per_rep_rows]
        row: dict[str, Any] = dict(labels or {})
        row["traffic_class"] = klass.name
        row["replicas"] = config.n_replicas
        row["offered_rps"] = klass.rate_rps
        for name in reps[0]:
            mean, half = combine([r[name] for r in reps])
            row[name] = mean
            row[f"{name}_ci95"] = half
        row.update(slo_checks(klass, row, reps))
        for name in POOL_METRICS:
            row[f"pool_{name}"] = pool_summary[name]
        row["length_source"] = klass.workload.source
        out.append(row)
    return PoolResult(pd.DataFrame(out), pool_summary)

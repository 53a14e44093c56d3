"""Summary statistics of a queue run: per class and overall, with batch-means intervals.

Per class k (post warm-up jobs only): count, mean wait E[W_k], mean sojourn E[T_k]
with its 95% batch-means half-width, sojourn p50/p95/p99 and max wait. Overall: the
weighted objective (1/n) Σ_j w_j T_j (by Little's law, proportional to the holding
cost Σ_k w_k E[L_k]) with its half-width, utilisation per server busy_s / t_end, and
the Little's-law residual on the window from the first kept arrival to the last
arrival (see :mod:`planner.sim.stats`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.sim.queue.run import QueueRun
from planner.sim.stats import ConfidenceInterval, LittleCheck, batch_means_ci, littles_law

N_BATCHES = 20


@dataclass(frozen=True)
class QueueSummary:
    """``per_class``: one row per class; ``overall``: run-level figures."""

    per_class: pd.DataFrame
    overall: dict[str, float]
    weighted: ConfidenceInterval
    little: LittleCheck


def utilisation(run: QueueRun) -> np.ndarray:
    """busy_s / t_end per server, t_end the last completion (all jobs, warm-up included)."""
    t_end = float(np.nanmax(run.finish))
    return run.busy / t_end if t_end > 0 else np.zeros_like(run.busy)


def summarize(run: QueueRun, n_batches: int = N_BATCHES) -> QueueSummary:
    """Per-class and overall statistics of the kept (post warm-up) jobs."""
    model = run.model
    kept = run.kept
    cls = run.cls[kept]
    wait = run.wait[kept]
    soj = run.sojourn[kept]
    weights = np.array([c.weight for c in model.classes])
    rows = []
    for k, c in enumerate(model.classes):
        mask = cls == k
        t_k = soj[mask]
        if t_k.size == 0:
            rows.append({"traffic_class": c.name, "jobs": 0})
            continue
        ci = batch_means_ci(t_k, n_batches)
        rows.append(
            {
                "traffic_class": c.name,
                "jobs": int(t_k.size),
                "mean_wait": float(wait[mask].mean()),
                "mean_sojourn": ci.mean,
                "mean_sojourn_hw": ci.half_width,
                "p50_sojourn": float(np.quantile(t_k, 0.50)),
                "p95_sojourn": float(np.quantile(t_k, 0.95)),
                "p99_sojourn": float(np.quantile(t_k, 0.99)),
                "max_wait": float(wait[mask].max()),
            }
        )
    weighted = batch_means_ci(weights[cls] * soj, n_batches)
    util = utilisation(run)
    t0 = float(run.arrival[model.warmup])
    t1 = float(run.arrival[-1])
    little = littles_law(run.arrival, run.finish, t0, t1)
    overall = {
        "jobs": int(soj.size),
        "mean_wait": float(wait.mean()),
        "mean_sojourn": float(soj.mean()),
        "p99_sojourn": float(np.quantile(soj, 0.99)),
        "max_wait": float(wait.max()),
        "weighted_objective": weighted.mean,
        "weighted_objective_hw": weighted.half_width,
        "utilisation": float(util.mean()),
        "utilisation_max": float(util.max()),
        "little_residual": little.relative_residual,
        "preemptions": run.preemptions,
    }
    return QueueSummary(pd.DataFrame(rows), overall, weighted, little)

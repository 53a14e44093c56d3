"""Fitting a block's plan into the quota the other blocks leave.

Blocks are solved with the full quota of every (region, SKU); when their plans are joined,
a block whose plan over-subscribes a quota row that earlier blocks use is re-solved
against the residual quota of every period. ``local_repair`` frees only the replicas of
the (region, model) pairs that touch an over-subscribed row and keeps every other integer
where the plan had it, so it is a small MILP; both it and a full re-solve are
restrictions of the block, so the joined plan stays feasible.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.placement.backends import run_backend
from planner.placement.instance import PlacementInstance
from planner.placement.milp import Milp
from planner.placement.status import SolveOutcome


def with_quota(inst: PlacementInstance, quota_by_period: np.ndarray, *, keep_units: bool = False) -> PlacementInstance:
    """The instance under a per-period residual quota.

    Units that no longer fit one replica are dropped, unless ``keep_units`` (then they stay
    with a bound of zero replicas, so the MILP keeps the same columns as before).
    """
    quota_by_period = np.maximum(quota_by_period, 0).astype(np.int64)
    most = quota_by_period.max(axis=2)[inst.unit_region, inst.unit_sku] // inst.unit_gpus
    base = replace(inst, quota_by_period=quota_by_period,
                   unit_max_replicas=np.minimum(inst.unit_max_replicas, most))
    return base if keep_units else base.restricted(base.unit_max_replicas >= 1)


def local_repair(milp: Milp, x: np.ndarray, over: np.ndarray, backend: str, gap: float, node_limit: int,
                 time_limit_s: float) -> SolveOutcome:
    """Re-solve only the replicas of the (region, model) pairs that touch an over-subscribed
    (region, SKU) row; every other integer stays where the plan had it."""
    inst = milp.instance
    region_hit = np.zeros((len(inst.regions), len(inst.models)), dtype=bool)
    for r, s in zip(*np.nonzero(over), strict=True):
        touching = (inst.unit_region == r) & (inst.unit_sku == s)
        region_hit[inst.unit_region[touching], inst.unit_model[touching]] = True
    lo, hi = milp.col_lo.copy(), milp.col_hi.copy()
    for name in ("R", "D", "S", "y"):
        block = milp.cols.get(name)
        if block is None or block.size == 0:
            continue
        if name == "y":
            free = region_hit[block.index["r"], block.index["m"]]
        else:
            u = block.index["u"]
            free = region_hit[inst.unit_region[u], inst.unit_model[u]]
        cols = block.start + np.flatnonzero(~free)
        fixed = np.clip(np.rint(x[cols]), lo[cols], hi[cols])
        lo[cols] = fixed
        hi[cols] = fixed
    return run_backend(backend, replace(milp, col_lo=lo, col_hi=hi, _names={}), time_limit_s=time_limit_s, gap=gap,
                       node_limit=node_limit)

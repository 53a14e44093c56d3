r"""On-demand replicas a unit keeps through most of the horizon, bought reserved instead.

The warm start fixes the reserved replicas R from the LP, where a region's replica floor
(redundancy, pool size) is met with fractions. Completed in whole replicas, the floor is
often met by on-demand replicas that run in every period, at the on-demand price. Moving
k of a unit's replicas to reserved changes its on-demand trajectory to max(D_t − k, 0):

    Δcost(k) = k g H p^R − Σ_t h_t g p^D min(k, D_t) − c_sw (Σ_t |ΔD_t| − Σ_t |Δmax(D_t − k, 0)|)

The switching term is never negative (cutting a trajectory at k never adds a step), so
the move pays when the on-demand replicas above the first k run in a large enough share
of the horizon: k = 1, 2, … while each step lowers the cost. The move changes no flow,
and in the capacity, redundancy and pool rows R_u and D_ut appear as their sum, which
only grows. Two rows can break: the quota (R_u + D_ut + S_ut ≤ Q, in the periods where
D_t was 0) and the sustained-commitment row (reserved replicas at most the load plus the
floor). So each step is checked against every row it touches and taken only when all of
them hold.
"""

from __future__ import annotations

import numpy as np

from planner.placement.by_period import switch_steps
from planner.placement.milp import Milp

TOLERANCE = 1e-6


def reserve_steady_replicas(milp: Milp, x: np.ndarray) -> np.ndarray:
    """A plan that costs no more than ``x``: each unit's steady on-demand replicas made reserved
    where that is cheaper and every row still holds (module docstring)."""
    if "R" not in milp.cols or "D" not in milp.cols:
        return x
    R, D = milp.cols["R"], milp.cols["D"]
    w = milp.cols.get("wD")
    same, previous = switch_steps(D, w) if w is not None else (np.zeros(0, dtype=np.int64),) * 2
    A = milp.A.tocsc()
    x = x.copy()
    level = A @ x
    for i, u in enumerate(R.index["u"].tolist()):
        r_col = R.start + i
        d_cols = D.start + np.flatnonzero(D.index["u"] == u)
        if not (x[d_cols] > 0.5).any():
            continue
        mine = np.flatnonzero(w.index["u"] == u) if w is not None else np.zeros(0, dtype=np.int64)
        w_cols = (w.start if w is not None else 0) + mine
        changed = np.concatenate(([r_col], d_cols, w_cols))
        touched = A[:, changed]
        rows = np.unique(touched.indices)
        while x[r_col] + 1 <= milp.col_hi[r_col] + TOLERANCE:
            trial = x.copy()
            trial[r_col] += 1
            trial[d_cols] = np.maximum(trial[d_cols] - 1, 0)
            trial[w_cols] = np.abs(trial[D.start + same[mine]] - trial[D.start + previous[mine]])
            delta = trial[changed] - x[changed]
            if float(milp.c[changed] @ delta) >= -TOLERANCE:
                break  # the next reserved replica would not pay for itself
            moved = level + touched @ delta
            if ((moved[rows] < milp.row_lo[rows] - TOLERANCE) | (moved[rows] > milp.row_hi[rows] + TOLERANCE)).any():
                break
            x, level = trial, moved
    return x

r"""On-demand replicas over time, given what each period needs, at least rental + switching cost.

With a switching cost c_sw per on-demand replica started or stopped, a fleet that follows
every hour's need exactly pays c_sw for each step; one that keeps replicas through a short
dip pays their rental instead. For one unit with per-period need L_t (the replicas its
load needs), room U_t (what the quota leaves) and rental cost p_t per replica in period t,
the best trajectory solves

    min_D  Σ_t p_t D_t + c_sw Σ_{t≥1} |D_t − D_{t−1}|     s.t.  L_t ≤ D_t ≤ U_t,  D_t integer.

Dynamic programming over the replica count v: with f_t(v) the least cost of periods 0..t
ending at v,

    f_0(v) = p_0 v,   f_t(v) = p_t v + min_{v'} [ f_{t−1}(v') + c_sw |v − v'| ]   (v in [L_t, U_t]).

The inner minimum is the L1 distance transform of f_{t−1}, two passes of a running
minimum: min_{v'≤v} f(v') + c_sw (v − v') = c_sw v + cummin(f(v') − c_sw v'), and the
mirror image for v' ≥ v. So a unit costs O(T·V) for V replica counts. Keeping replicas
above the need never breaks a row of the placement MILP (capacity, redundancy and pool
rows are ≥ on replicas), as long as the quota allows, which U_t says.

The first period has no predecessor; on cyclic periods (a week of hour-of-week blocks)
the wrap from the last period to the first is charged but not optimised here, so the
trajectory is optimal for the open chain and feasible for the cycle.
"""

from __future__ import annotations

import numpy as np


def _distance_transform(f: np.ndarray, step_cost: float) -> tuple[np.ndarray, np.ndarray]:
    """g(v) = min_{v'} f(v') + step_cost |v − v'| and the v' attaining it (lowest cost, then nearest below)."""
    v = np.arange(f.size)
    below = f - step_cost * v
    run = np.minimum.accumulate(below)
    arg_below = np.maximum.accumulate(np.where(below <= run, v, 0))
    above = (f + step_cost * v)[::-1]
    run_above = np.minimum.accumulate(above)
    arg_above = (f.size - 1 - np.maximum.accumulate(np.where(above <= run_above, v, 0)))
    from_below = run + step_cost * v
    from_above = run_above[::-1] - step_cost * v
    arg_above = arg_above[::-1]
    take_below = from_below <= from_above
    return np.where(take_below, from_below, from_above), np.where(take_below, arg_below, arg_above)


def smooth_trajectory(rental: np.ndarray, lower: np.ndarray, upper: np.ndarray, switch_cost: float) -> np.ndarray:
    """The integer trajectory D (one per period) of least rental + switching cost within [lower, upper].

    ``rental[t]`` is the cost of one replica in period t; ``lower`` and ``upper`` are
    whole numbers with lower ≤ upper. Ties go to fewer replicas.
    """
    lower = np.asarray(lower, dtype=np.int64)
    upper = np.maximum(np.asarray(upper, dtype=np.int64), lower)
    if switch_cost <= 0 or lower.size <= 1:
        return lower.copy()
    count = int(upper.max()) + 1
    values = np.arange(count, dtype=float)
    outside = (values[None, :] < lower[:, None]) | (values[None, :] > upper[:, None])
    choice = np.zeros((lower.size, count), dtype=np.int64)
    cost = np.where(outside[0], np.inf, rental[0] * values)
    for t in range(1, lower.size):
        moved, choice[t] = _distance_transform(cost, switch_cost)
        cost = np.where(outside[t], np.inf, moved + rental[t] * values)
    path = np.empty(lower.size, dtype=np.int64)
    path[-1] = int(np.argmin(cost))
    for t in range(lower.size - 1, 0, -1):
        path[t - 1] = choice[t, path[t]]
    return path

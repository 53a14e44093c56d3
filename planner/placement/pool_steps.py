r"""Choosing each pool's size step, so that a program with pool gains solves as fast as one without.

The program (``problem.py``, Pools) charges a pool of n steady replicas of unit u exactly
n · g_u(n), with one binary per (unit, period, step). Its LP relaxation is weak by nature:
n · g(n) grows faster than n (the economy of scale), and the concave envelope of such a
function over [0, M] is the line n · g_max, so the relaxation gives every fractional pool the
largest gain and branch and bound has to close the gap node by node. On the demo with gains
at pool sizes 2, 4 and 8 that search ran into its node limit after 945 s, against 37 s
without gains.

A program small enough to be solved as one block (``solve.py``, ``DIRECT_MAX_INTEGERS``) keeps
its binaries and is solved exactly. In a larger one the steps are chosen outside the program
by a fixed-point iteration, and the program is
solved with them fixed, which needs no binaries (``problem.py``: q ≤ n, n ≥ N_s, (g_s − 1) q
in (cap)):

1. solve with no step: every replica at its smallest pool size's capacity;
2. for every steady (u, t) of that plan, its load L_ut = Σ_k a_utk / cap_uk (in replicas at
   that capacity) needs ⌈L / g_j⌉ replicas at step j, and at least N_j for the step to apply;
   take the step with the fewest, max(N_j, ⌈L / g_j⌉), against ⌈L⌉ with no step (ties to
   the smaller step); a (u, t) with no steady load takes no step;
3. solve with those steps fixed, and repeat 2–3 until a round chooses the steps of a round
   before it, or after ``MAX_SOLVES`` solves.

Every plan of the iteration is a plan of the exact program (fixing z to its steps is one of
the program's choices, and q = n there), so the independent check's n · g(n) holds for it.
The cheapest plan wins (ties to the earlier one). Its proven bound is the exact program's
LP relaxation with the capacity cuts, not the fixed program's bound, so the gap the plan
JSON reports is a gap to the program with free steps. Everything is decided on values and
counts, never the clock, like the rest of the search.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from planner.placement import highs_backend
from planner.placement.instance import PlacementInstance
from planner.placement.problem import formulate
from planner.placement.result import Fleet
from planner.placement.status import SolveStatus, classify

if TYPE_CHECKING:
    from planner.placement.solve import SolveSummary

MAX_SOLVES = 4
"""The lone-capacity solve and up to three rounds of chosen steps; the demo settles in two or three."""

NO_STEP = -1


def steady_load(inst: PlacementInstance, fleet: Fleet) -> np.ndarray:
    """[u, t] the steady load on each unit and period, in replicas at the unit's smallest pool size's capacity."""
    load = np.zeros((inst.n_units, inst.n_periods))
    rows = fleet.loads[fleet.loads[:, 1] == 0] if fleet.loads.size else np.zeros((0, 5))
    if rows.size:
        u, k, t = rows[:, 0].astype(np.int64), rows[:, 2].astype(np.int64), rows[:, 3].astype(np.int64)
        np.add.at(load, (u, t), rows[:, 4] / inst.unit_cap_rps[u, k])
    return load


def choose_steps(inst: PlacementInstance, load: np.ndarray) -> np.ndarray:
    """[u, t] the step (index into the unit's pool sizes, or NO_STEP) that serves ``load`` with the fewest replicas."""
    assert inst.unit_pool_size is not None and inst.unit_pool_gain is not None
    needed = np.ceil(load - 1e-9)  # replicas with no step
    best = needed.copy()
    steps = np.full(load.shape, NO_STEP, dtype=np.int64)
    for j in range(inst.unit_pool_size.shape[1]):
        size = inst.unit_pool_size[:, j][:, None].astype(float)
        gain = np.maximum(inst.unit_pool_gain[:, j], 1.0)[:, None]
        replicas = np.maximum(size, np.ceil(load / gain - 1e-9))
        better = (size > 0) & (load > 0) & (replicas < best)
        best = np.where(better, replicas, best)
        steps = np.where(better, j, steps)
    return steps


def solve_with_steps(inst: PlacementInstance, solve: Callable[[PlacementInstance], SolveSummary],
                     net_left: Callable[[], float], gap: float) -> SolveSummary:
    """The cheapest plan of the iteration in the module docstring; ``solve`` solves an instance whose steps are
    fixed. Its bound is :func:`exact_bound`, and ``pool_steps`` records each round."""
    steps = np.full((inst.n_units, inst.n_periods), NO_STEP, dtype=np.int64)
    seen: list[bytes] = []
    best: SolveSummary | None = None
    rounds: list[dict[str, Any]] = []
    while True:
        seen.append(steps.tobytes())
        summary = solve(replace(inst, unit_pool_step=steps))
        solved = summary.status.has_solution and summary.fleet is not None
        rounds.append({"pools_with_a_step": int((steps >= 0).sum()), "status": summary.status.value,
                       "objective_usd": round(summary.objective, 2) if solved else None})
        if solved and (best is None or summary.objective < best.objective - 1e-9):
            best = summary
        if not solved or summary.fleet is None or len(seen) >= MAX_SOLVES:
            break
        steps = choose_steps(inst, steady_load(inst, summary.fleet))
        if steps.tobytes() in seen:
            break
    if best is None:
        return summary
    best.bound = best.lp_bound = min(best.objective, exact_bound(inst, net_left))
    best.status = classify(best.objective, best.bound, gap, bool(best.time_limit_hits))
    best.pool_steps = {"method": "each pool's size step chosen by a fixed-point iteration, the program solved with "
                                 "the steps fixed (planner/placement/pool_steps.py); bound: the LP relaxation with "
                                 "free steps", "rounds": rounds}
    return best


def exact_bound(inst: PlacementInstance, net_left: Callable[[], float]) -> float:
    """The LP relaxation (with the capacity cuts) of the program with free steps: a bound on every plan."""
    milp = formulate(inst, budget=True, cuts=True)
    outcome = highs_backend.LoadedLp(milp.relaxed()).solve(net_left())
    if outcome.status != SolveStatus.OPTIMAL or not math.isfinite(outcome.objective):
        return -math.inf
    return float(outcome.objective)

"""How the placement MILP is solved: decomposition by model, side by side, from LP-guided starts.

What was measured (``scenarios/global.toml``, 168 hourly periods, the demo-history stand-in
forecast, 2 cores; ``benchmarks/placement_speed.py`` prints the current figures):

* The joint model has 124k columns, 113k rows and 29k integers. Handed to HiGHS as it is
  (same warm starts), the LP relaxation alone takes 15–40 s and the run ends with a 43 %
  gap (58,108 USD against a bound of 33,080), overrunning its 120 s limit to 238 s.
* The structure that matters: **models share nothing but the quota rows** (and the
  budget). Each model's block (34–47k columns, 8–11k integers) is solved with the full
  quota; that is a relaxation of the joint problem, so the blocks' bounds add up to a
  valid bound. The blocks run **side by side in worker processes**, one HiGHS thread
  each: HiGHS's LP and most of its branch-and-bound are serial, so the two cores give each
  big block the whole time limit instead of half of it.
* The plans are then joined under the shared quota rows. A block whose plan
  over-subscribes a (region, SKU) that earlier blocks use is repaired against the quota
  they leave in every period: first locally (only the replicas of the regions touching
  the over-subscribed row may move), else by re-solving the block under that residual
  quota. On the global scenario llama2-70b and llama3-8b both want gcp:us-central1's
  A100-80GB; the local repair costs llama3-8b 20–50 USD of 9,800.
* **Warm starts from the LP** (``heuristics.py``): HiGHS on a whole block from scratch
  found 12,784 → 12,668 USD in 140 s on llama2-70b; fixing the serving regions and the
  LP's reserved replicas rounded up leaves a MILP in on-demand and spot replicas that
  solves in 1–6 s, and a local search on the reserved replicas reaches 12,792 in ~25 s.
  The backend then works on the whole block from that start for the rest of the time.
* Result: 1.99–2.3 % in 104–107 s (33,944–34,055 USD against bounds of 33,267–33,269);
  0.63 % in 33 s with 24 periods; with 720 hourly periods (125k integers) the blocks get no
  usable plan in time (84 % gap): fold a month into hour-of-week periods instead.
  The 1 % target is not reached on 168 hourly periods.
* **The bound is the hard part.** The LP relaxation is 3–7 % below the best plans: a model
  fleet of a few replicas per region rounds up lumpily (one 8-GPU replica more is several
  percent of a model's cost), and a reserved replica is one integer for all 168 periods.
  Rounded capacity cuts per region group (``strengthen.py``) add 0.5–1.7 %, and an LP with
  them is taken as a bound when it beats the solver's. Cuts inside HiGHS's own model
  made its root cut loop stall past the time limit, so the MILP runs without them.
* Time limits: HiGHS was seen to overrun its ``time_limit`` by up to a minute in long root
  phases; every call also gets an interrupt callback, the main solve keeps 10 % of the
  limit for repairs, and each block's full phase keeps 20 % for the cut LP.

A problem with at most ``DIRECT_MAX_INTEGERS`` integers (tests, small scenarios) is solved
as one block with all models; so is one whose budget row binds. LPs always go to HiGHS
(fast, with duals); MILPs go to the chosen backend.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from planner.engine import available_cores, run_tasks
from planner.placement import highs_backend
from planner.placement.backends import run_backend
from planner.placement.heuristics import warm_start
from planner.placement.instance import PlacementInstance
from planner.placement.problem import Milp, formulate
from planner.placement.result import Fleet, add_solution, drop_idle, empty_fleet, fleet_cost
from planner.placement.strengthen import group_cuts
from planner.placement.status import SolveOutcome, SolveStatus, classify, relative_gap

DIRECT_MAX_INTEGERS = 3000
WARM_START_SHARE = 0.6
FULL_PHASE_SHARE = 0.8
REPAIR_RESERVE = 0.1


@dataclass
class BlockOutcome:
    """One block (a set of models) as solved: the MILP, its best solution and its bounds."""

    models: tuple[str, ...]
    milp: Milp
    status: SolveStatus
    x: np.ndarray | None
    objective: float
    bound: float
    lp_bound: float
    heuristic_objective: float
    seconds: float
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "columns": self.milp.n_cols,
            "rows": self.milp.n_rows,
            "integers": self.milp.n_integer,
            "status": self.status.value,
            "objective": _num(self.objective),
            "bound": _num(self.bound),
            "lp_bound": _num(self.lp_bound),
            "warm_start_objective": _num(self.heuristic_objective),
            "gap": _num(relative_gap(self.objective, self.bound)),
            "seconds": round(self.seconds, 3),
            "message": self.message,
        }


@dataclass
class SolveSummary:
    status: SolveStatus
    fleet: Fleet | None
    objective: float
    bound: float
    lp_bound: float
    blocks: list[BlockOutcome] = field(default_factory=list)
    strategy: str = ""
    seconds: float = 0.0
    message: str = ""
    repaired_quota: bool = False

    @property
    def gap(self) -> float:
        return relative_gap(self.objective, self.bound)


def _num(value: float) -> float | None:
    return round(float(value), 6) if math.isfinite(value) else None


def solve_block(milp: Milp, models: tuple[str, ...], *, backend: str, time_limit_s: float,
                gap: float) -> BlockOutcome:
    """LP relaxation, LP-guided warm start, then the backend on the whole block."""
    began = time.perf_counter()
    deadline = began + time_limit_s

    def left() -> float:
        return max(deadline - time.perf_counter(), 0.05)

    lp = highs_backend.solve(milp.relaxed(), time_limit_s=left(), gap=gap)
    if lp.status == SolveStatus.INFEASIBLE:
        return BlockOutcome(models, milp, SolveStatus.INFEASIBLE, None, math.nan, math.inf, math.inf, math.nan,
                            time.perf_counter() - began, "LP relaxation infeasible")
    if lp.x is None:
        return BlockOutcome(models, milp, SolveStatus.ERROR, None, math.nan, -math.inf, -math.inf, math.nan,
                            time.perf_counter() - began, f"LP relaxation failed: {lp.message}")
    lp_bound = lp.objective
    integral = np.all(np.abs(lp.x[milp.integer] - np.rint(lp.x[milp.integer])) <= 1e-6)
    if integral:
        x = lp.x.copy()
        x[milp.integer] = np.rint(x[milp.integer])
        return BlockOutcome(models, milp, SolveStatus.OPTIMAL, x, lp_bound, lp_bound, lp_bound, lp_bound,
                            time.perf_counter() - began, "LP relaxation is integral")
    start = warm_start(milp, lp, backend, gap, time.perf_counter() + WARM_START_SHARE * left())
    heuristic = start.objective if start is not None else math.nan
    best_x, best_obj, best_bound = (start.x, start.objective, lp_bound) if start else (None, math.inf, lp_bound)
    message = ""
    if start is None or relative_gap(best_obj, best_bound) > gap:
        full = run_backend(backend, milp, time_limit_s=FULL_PHASE_SHARE * left(), gap=gap,
                           start=start.x if start is not None else None)
        if full.status == SolveStatus.INFEASIBLE and start is None:
            return BlockOutcome(models, milp, SolveStatus.INFEASIBLE, None, math.nan, math.inf, lp_bound,
                                heuristic, time.perf_counter() - began, full.message)
        if full.status.has_solution and full.objective < best_obj:
            best_x, best_obj = full.x, full.objective
        if math.isfinite(full.bound):
            best_bound = max(best_bound, full.bound)
        message = full.message
    if best_x is not None and relative_gap(best_obj, best_bound) > gap and left() > 0.2:
        cut_lp = highs_backend.solve(group_cuts(milp).relaxed(), time_limit_s=left(), gap=gap)
        if cut_lp.status == SolveStatus.OPTIMAL:
            best_bound = max(best_bound, cut_lp.objective)
    if best_x is None:
        return BlockOutcome(models, milp, SolveStatus.ERROR, None, math.nan, best_bound, lp_bound, heuristic,
                            time.perf_counter() - began, message or "no feasible plan found within the time limit")
    best_bound = min(best_bound, best_obj)
    return BlockOutcome(models, milp, classify(best_obj, best_bound, gap), best_x, best_obj, best_bound, lp_bound,
                        heuristic, time.perf_counter() - began, message)


def _blocks(inst: PlacementInstance, strategy: str) -> list[tuple[int, ...]]:
    demanded = [m for m in range(len(inst.models)) if inst.demand_rps[:, m].sum() > 0]
    if not demanded:
        return []
    if strategy == "direct":
        return [tuple(demanded)]
    return [(m,) for m in demanded]


def _gpu_use(inst: PlacementInstance, fleet: Fleet) -> np.ndarray:
    """GPUs per (region, SKU, period) of a fleet."""
    gpus = np.zeros((len(inst.regions), len(inst.skus), inst.n_periods))
    np.add.at(gpus, (inst.unit_region, inst.unit_sku), fleet.replicas.sum(axis=1) * inst.unit_gpus[:, None])
    return gpus


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


def _local_repair(milp: Milp, x: np.ndarray, over: np.ndarray, backend: str, gap: float,
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
    return run_backend(backend, replace(milp, col_lo=lo, col_hi=hi, _names={}), time_limit_s=time_limit_s, gap=gap)


def solve_instance(inst: PlacementInstance, *, backend: str = "highs", time_limit_s: float = 120.0,
                   gap: float = 0.01, strategy: str = "auto") -> SolveSummary:
    """Solve the placement MILP of ``inst`` (strategy 'auto', 'direct' or 'decomposed')."""
    began = time.perf_counter()
    if strategy == "auto":
        joint_integers = formulate(inst, budget=False, cuts=False).n_integer
        strategy = "direct" if joint_integers <= DIRECT_MAX_INTEGERS else "decomposed"
    summary = _solve_blocks(inst, backend, time_limit_s, gap, strategy, began)
    if summary.fleet is not None and strategy == "decomposed":
        if inst.budget_usd is not None and summary.status.has_solution:
            total = sum(fleet_cost(inst, summary.fleet))
            if total > inst.budget_usd and summary.bound <= inst.budget_usd:
                joint = _solve_blocks(inst, backend, max(began + time_limit_s - time.perf_counter(), 1.0), gap,
                                      "direct", time.perf_counter())
                joint.bound = max(joint.bound, summary.bound) if joint.status.has_solution else joint.bound
                summary = joint
    summary.seconds = time.perf_counter() - began
    return summary


@dataclass(frozen=True)
class _BlockTask:
    inst: PlacementInstance
    models: tuple[int, ...]
    backend: str
    deadline: float  # time.monotonic() value, comparable across processes on one machine
    gap: float
    direct: bool
    threads: int | None


def _run_block_task(task: _BlockTask) -> dict[str, Any]:
    """Solve one block (in a worker process or here); returns plain values that pickle."""
    if task.threads is not None:
        highs_backend.use_threads(task.threads)
    milp = formulate(task.inst, task.models, budget=task.direct, cuts=False)
    names = tuple(task.inst.models[m] for m in task.models)
    outcome = solve_block(milp, names, backend=task.backend,
                          time_limit_s=max(task.deadline - time.monotonic(), 0.5), gap=task.gap)
    fields = ("status", "x", "objective", "bound", "lp_bound", "heuristic_objective", "seconds", "message")
    return {name: getattr(outcome, name) for name in fields}


def _solve_blocks(inst: PlacementInstance, backend: str, time_limit_s: float, gap: float, strategy: str,
                  began: float) -> SolveSummary:
    """Solve the blocks, side by side on the available cores, then make them fit the quotas.

    Every block is solved with the full quota, so its bound is valid for its part of the
    joint problem (dropping the other models relaxes the quota rows). The blocks then join
    the plan one by one; a block whose plan over-subscribes a (region, SKU) that earlier
    blocks use is repaired against the residual quota of every period: first locally (only
    the replicas of the regions that touch the over-subscribed rows may change), else by
    solving the whole block again under the residual quota. Both are restrictions, so the
    union stays feasible, and the bound keeps the unrestricted value.

    With two or more cores the blocks run in worker processes, one HiGHS thread each (the
    LP and most of branch-and-bound are serial, so two blocks at once nearly halve the
    wall time); each worker gets the whole time limit minus a reserve for the repairs.
    """
    direct = strategy == "direct"
    groups = _blocks(inst, strategy)
    milps = {models: formulate(inst, models, budget=direct, cuts=False) for models in groups}
    groups.sort(key=lambda models: (milps[models].n_integer, models))
    workers = min(available_cores(), len(groups))
    solve_deadline = time.monotonic() + max(time_limit_s - (time.perf_counter() - began), 0.5) * (1 - REPAIR_RESERVE)
    if workers > 1:
        tasks = [_BlockTask(inst, models, backend, solve_deadline, gap, direct, 1) for models in groups]
        results = run_tasks(_run_block_task, tasks, engine="processes", workers=workers)
    else:
        results = []
        for position, models in enumerate(groups):
            weights = [milps[m].n_integer + 1 for m in groups[position:]]
            share = max(solve_deadline - time.monotonic(), 0.5) * weights[0] / sum(weights)
            task = _BlockTask(inst, models, backend, time.monotonic() + share, gap, direct, None)
            results.append(_run_block_task(task))
    deadline = began + time_limit_s
    quota = inst.quota_per_period()
    used = np.zeros_like(quota, dtype=float)
    fleet = empty_fleet(inst)
    outcomes: list[BlockOutcome] = []
    bound = lp_bound = objective = 0.0
    repaired = False
    for position, (models, result) in enumerate(zip(groups, results, strict=True)):
        names = tuple(inst.models[m] for m in models)
        outcome = BlockOutcome(models=names, milp=milps[models], **result)
        if not outcome.status.has_solution:
            return SolveSummary(outcome.status, None, math.nan, outcome.bound, outcome.lp_bound,
                                [*outcomes, outcome], strategy, message=outcome.message)
        part = add_solution(empty_fleet(inst), outcome.milp, outcome.x)
        over = (used + _gpu_use(inst, part) > quota).any(axis=2)
        if over.any():
            repaired = True
            share = max(deadline - time.perf_counter(), 0.5) / (len(groups) - position)
            fixed = _repair(inst, outcome.milp, outcome, names, quota - used, over, backend, gap, share)
            if fixed is None:
                return SolveSummary(SolveStatus.INFEASIBLE, None, math.nan, bound + outcome.bound,
                                    lp_bound + outcome.lp_bound, [*outcomes, outcome], strategy,
                                    message=f"{', '.join(names)} does not fit in the quota the other models leave")
            outcome, part = fixed
        outcomes.append(outcome)
        bound += outcome.bound
        lp_bound += outcome.lp_bound
        objective += outcome.objective
        used += _gpu_use(inst, part)
        fleet = Fleet(fleet.replicas + part.replicas, np.vstack([fleet.flows, part.flows]),
                      np.vstack([fleet.loads, part.loads]))
    fleet = drop_idle(inst, fleet)
    return SolveSummary(classify(objective, bound, gap), fleet, objective, bound, lp_bound, outcomes, strategy,
                        repaired_quota=repaired)


def _repair(inst: PlacementInstance, milp: Milp, outcome: BlockOutcome, names: tuple[str, ...],
            residual: np.ndarray, over: np.ndarray, backend: str, gap: float,
            time_limit_s: float) -> tuple[BlockOutcome, Fleet] | None:
    """Fit one block's plan into the residual quota (see ``_solve_blocks``)."""
    began = time.perf_counter()
    sub = with_quota(inst, residual, keep_units=True)
    sub_milp = formulate(sub, milp.models, budget=False, cuts=False)
    local = _local_repair(sub_milp, outcome.x, over, backend, gap, time_limit_s / 2)
    if local.status.has_solution:
        x, objective = local.x, local.objective
    else:
        again = solve_block(sub_milp, names, backend=backend, time_limit_s=max(time_limit_s - (time.perf_counter() - began), 0.5),
                            gap=gap)
        if not again.status.has_solution:
            return None
        x, objective = again.x, again.objective
    bound = min(outcome.bound, objective)
    repaired = BlockOutcome(names, sub_milp, classify(objective, bound, gap), x, objective, bound, outcome.lp_bound,
                            outcome.heuristic_objective, outcome.seconds + time.perf_counter() - began,
                            "repaired to fit the quota left by the other models")
    return repaired, add_solution(empty_fleet(inst), sub_milp, x)

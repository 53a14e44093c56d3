"""How the placement MILP is solved: blocks by model and region component, side by side.

What was measured (``scenarios/global.toml``, 168 hourly periods, the demo-history stand-in
forecast, 2 cores shared with other jobs, load average 2–5; ``benchmarks/placement_speed.py``
prints the current figures, per block):

* The joint model has 124k columns, 113k rows and 29k integers. Handed to HiGHS as it is
  (same warm starts), the LP relaxation alone takes 15–40 s and the run ends with a 43 %
  gap (58,108 USD against a bound of 33,080), overrunning its 120 s limit to 238 s.
* **Blocks.** Models share nothing but the quota rows (and the budget), and within a model
  the components of the origin–region graph share nothing at all (``components.py``):
  on the global scenario each model splits into Europe and the US with Tokyo, six blocks
  of 2.4–7.4k integers. Each is solved with the full quota, a relaxation of the joint
  problem, so the blocks' bounds add up to a valid bound. The blocks are dealt to worker
  processes, one HiGHS thread each (HiGHS's LP and most of its branch-and-bound are
  serial), heaviest first to the least loaded worker; a worker solves its blocks lightest
  first, each with its share of the time left by integer count, so time a block does not
  need (mixtral-8x22b's LPs are integral) passes to the next.
* **Per block**: LP relaxation; warm start (``heuristics.py``: serving sets by LP value,
  reserved vectors by steepest descent on a cut LP, the best few solved as MILPs); then
  the backend on the block *with* the rounded capacity cuts (``strengthen.py``) from the warm start,
  until the gap target or the time limit. On whole-model blocks the cuts stalled HiGHS's
  root cut loop past the limit; on the component blocks they close llama2-70b's Europe
  block (LP 2,716, optimum 2,983 USD) in 5–13 s, where without them it stopped at 5.9 %
  after 60 s. Per component, the bounds reached without the cuts were 1–5 % lower
  (llama2-70b Europe 2,824 against 2,964–2,980 now, US 9,338 against 9,411–9,449).
* The plans are then joined under the shared quota rows. A block whose plan
  over-subscribes a (region, SKU) that earlier blocks use is repaired against the quota
  they leave in every period: first locally (only the replicas of the regions touching
  the over-subscribed row may move), else by re-solving the block under that residual
  quota.
* **Result** (1 % target, six runs at load 2–4): 0.77–0.95 % in 108–115 s, e.g. 33,729 USD
  against a bound of 33,469; before the component blocks and the cut-LP descent it
  was 1.99–2.9 % in 104–114 s. With a 0.5 % target the runs end at the limit with
  0.63–0.78 %: what is left is llama2-70b's US block (9,546 against 9,411–9,449: reserved
  replicas rounding in three regions) and llama3-8b's Europe block (2,264–2,277 against
  2,205: one reserved SKU and per-hour spot replicas, where HiGHS branches slowly), about
  1.2 % and 2.7 % of their blocks. With 24 hourly periods: 0.53 % in 17 s. With 720
  hourly periods the LP of llama2-70b's US block alone takes 70–80 s at load 3–5 and the
  run ends without a plan for it (the earlier whole-model layout returned one at 84 %):
  fold a month into hour-of-week periods instead.
* **Tried and dropped**: a Lagrangian
  relaxation of the period coupling (reserved copies per period or per day, switching rows
  dualised, multipliers from the LP duals). Per period it gave 11,914 on llama2-70b
  against the LP's 11,831 in 105 s; per day 2,912 on its Europe block (LP 2,716) but
  needed 75 s of 445-integer sub-MILPs, and with 4 s per day it fell to 2,772. Probing
  the serving indicators against the warm start (fix y_j when the cut LP with y_j flipped
  costs more than the plan) fixed all six of llama2-70b's US block in 8–9 s, but its bound
  after the search stayed in the same 9,411–9,449 range as without; probing reserved
  replicas (R ≤ R̄ − 1, R ≥ R̄ + 1) settled none. A per-period "perfectly elastic" bound
  per component (2,837 on llama2-70b's Europe block) is below what the cut search proves.
* Time limits: HiGHS was seen to overrun its ``time_limit`` by up to a minute in long root
  phases; every call also gets an interrupt callback and the main solve keeps 10 % of the
  limit for repairs. The gap and plan reached depend on the machine's speed where a time
  limit cuts a search (warm start, branch-and-bound).

A problem with at most ``DIRECT_MAX_INTEGERS`` integers (tests, small scenarios) is solved
as one block with all models and no cut rows; so is one whose budget row binds. LPs always
go to HiGHS (fast, with duals); MILPs go to the chosen backend.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.engine import available_cores, run_tasks
from planner.placement import highs_backend
from planner.placement.backends import run_backend
from planner.placement.components import Part, lift, split
from planner.placement.heuristics import warm_start
from planner.placement.instance import PlacementInstance
from planner.placement.problem import Milp, formulate
from planner.placement.quota_repair import local_repair, with_quota
from planner.placement.result import (
    Fleet,
    add_solution,
    drop_idle,
    empty_fleet,
    fleet_cost,
)
from planner.placement.status import SolveStatus, classify, relative_gap
from planner.placement.strengthen import group_cuts

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
    regions: tuple[str, ...] = ()  # the block's serving regions (empty: every region)

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "regions": list(self.regions),
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
                gap: float, cuts: bool = False) -> BlockOutcome:
    """LP relaxation, LP-guided warm start, then the backend on the whole block.

    With ``cuts`` the backend works on the block with the rounded capacity cuts of
    ``strengthen.py`` added (valid inequalities: same plans, same columns, a tighter LP);
    without, the cut LP is solved at the end and kept as a bound when it beats the backend's.
    """
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
        full = run_backend(backend, group_cuts(milp) if cuts else milp,
                           time_limit_s=(1.0 if cuts else FULL_PHASE_SHARE) * left(), gap=gap,
                           start=start.x if start is not None else None)
        if full.status == SolveStatus.INFEASIBLE and start is None:
            return BlockOutcome(models, milp, SolveStatus.INFEASIBLE, None, math.nan, math.inf, lp_bound,
                                heuristic, time.perf_counter() - began, full.message)
        if full.status.has_solution and full.objective < best_obj:
            best_x, best_obj = full.x, full.objective
        if math.isfinite(full.bound):
            best_bound = max(best_bound, full.bound)
        message = full.message
    if not cuts and best_x is not None and relative_gap(best_obj, best_bound) > gap and left() > 0.2:
        cut_lp = highs_backend.solve(group_cuts(milp).relaxed(), time_limit_s=left(), gap=gap)
        if cut_lp.status == SolveStatus.OPTIMAL:
            best_bound = max(best_bound, cut_lp.objective)
    if best_x is None:
        return BlockOutcome(models, milp, SolveStatus.ERROR, None, math.nan, best_bound, lp_bound, heuristic,
                            time.perf_counter() - began, message or "no feasible plan found within the time limit")
    best_bound = min(best_bound, best_obj)
    return BlockOutcome(models, milp, classify(best_obj, best_bound, gap), best_x, best_obj, best_bound, lp_bound,
                        heuristic, time.perf_counter() - began, message)


def _parts(inst: PlacementInstance, strategy: str) -> list[Part]:
    """The blocks: all models at once ('direct'), else one per model and component of its regions."""
    demanded = [m for m in range(len(inst.models)) if inst.demand_rps[:, m].sum() > 0]
    if not demanded:
        return []
    if strategy == "direct":
        return [Part(tuple(demanded), tuple(range(len(inst.regions))), inst, np.arange(inst.n_units))]
    return [part for m in demanded for part in split(inst, m)]


def _gpu_use(inst: PlacementInstance, fleet: Fleet) -> np.ndarray:
    """GPUs per (region, SKU, period) of a fleet."""
    gpus = np.zeros((len(inst.regions), len(inst.skus), inst.n_periods))
    np.add.at(gpus, (inst.unit_region, inst.unit_sku), fleet.replicas.sum(axis=1) * inst.unit_gpus[:, None])
    return gpus


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
class _BinTask:
    """Blocks one worker solves in turn, each with its share of the time left."""

    parts: tuple[Part, ...]
    weights: tuple[float, ...]
    backend: str
    deadline: float  # time.monotonic() value, comparable across processes on one machine
    gap: float
    direct: bool
    threads: int | None


def _run_bin(task: _BinTask) -> list[dict[str, Any]]:
    """Solve a worker's blocks in order (in a worker process or here); plain values that pickle.

    Block i gets (time left) × w_i / Σ_{j ≥ i} w_j; a block that reaches the gap target early
    leaves its time to the next ones. Which plan a block ends with can therefore depend on
    how fast the blocks before it were solved (only when a time limit cuts a search).
    """
    if task.threads is not None:
        highs_backend.use_threads(task.threads)
    out = []
    for position, part in enumerate(task.parts):
        milp = formulate(part.inst, part.models, budget=task.direct, cuts=False)
        share = max(task.deadline - time.monotonic(), 0.5) * task.weights[position] / sum(task.weights[position:])
        names = tuple(part.inst.models[m] for m in part.models)
        outcome = solve_block(milp, names, backend=task.backend, time_limit_s=share, gap=task.gap,
                              cuts=not task.direct)
        fields = ("status", "x", "objective", "bound", "lp_bound", "heuristic_objective", "seconds", "message")
        out.append({name: getattr(outcome, name) for name in fields})
    return out


def _bins(weights: list[float], count: int) -> list[list[int]]:
    """Blocks to workers: heaviest first to the lightest worker; each worker's list lightest first."""
    loads = [0.0] * count
    bins: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        j = min(range(count), key=lambda j: (loads[j], j))
        bins[j].append(i)
        loads[j] += weights[i]
    return [sorted(b, key=lambda i: (weights[i], i)) for b in bins if b]


def _solve_blocks(inst: PlacementInstance, backend: str, time_limit_s: float, gap: float, strategy: str,
                  began: float) -> SolveSummary:
    """Solve the blocks, side by side on the available cores, then make them fit the quotas.

    Every block is solved with the full quota, so its bound is valid for its part of the
    joint problem (dropping the other models relaxes the quota rows; components of one
    model share no row, see ``components.py``). The blocks then join the plan one by one; a
    block whose plan over-subscribes a (region, SKU) that earlier blocks use is repaired
    against the residual quota of every period: first locally (only the replicas of the
    regions that touch the over-subscribed rows may change), else by solving the whole
    block again under the residual quota. Both are restrictions, so the union stays
    feasible, and the bound keeps the unrestricted value.

    With two or more cores the blocks are dealt to worker processes, one HiGHS thread each
    (the LP and most of branch-and-bound are serial, so two blocks at once nearly halve the
    wall time); each worker solves its blocks in turn within the time limit minus a reserve
    for the repairs.
    """
    direct = strategy == "direct"
    parts = _parts(inst, strategy)
    milps = [formulate(part.inst, part.models, budget=direct, cuts=False) for part in parts]
    weights = [float(milp.n_integer + 1) for milp in milps]
    workers = max(min(available_cores(), len(parts)), 1)
    solve_deadline = time.monotonic() + max(time_limit_s - (time.perf_counter() - began), 0.5) * (1 - REPAIR_RESERVE)
    bins = _bins(weights, workers)
    tasks = [_BinTask(tuple(parts[i] for i in b), tuple(weights[i] for i in b), backend, solve_deadline, gap,
                      direct, 1 if len(bins) > 1 else None) for b in bins]
    if len(tasks) > 1:
        done = run_tasks(_run_bin, tasks, engine="processes", workers=len(tasks))
    else:
        done = [_run_bin(task) for task in tasks]
    results: dict[int, dict[str, Any]] = {}
    for members, outcomes_of_bin in zip(bins, done, strict=True):
        results.update(zip(members, outcomes_of_bin, strict=True))
    order = sorted(range(len(parts)), key=lambda i: (weights[i], i))
    deadline = began + time_limit_s
    quota = inst.quota_per_period()
    used = np.zeros_like(quota, dtype=float)
    fleet = empty_fleet(inst)
    outcomes: list[BlockOutcome] = []
    bound = lp_bound = objective = 0.0
    repaired = False
    for position, i in enumerate(order):
        part = parts[i]
        names, regions = part.label(inst)
        outcome = BlockOutcome(models=names, milp=milps[i], regions=regions if not direct else (), **results[i])
        if not outcome.status.has_solution:
            return SolveSummary(outcome.status, None, math.nan, outcome.bound, outcome.lp_bound,
                                [*outcomes, outcome], strategy, message=outcome.message)
        piece = lift(inst, part, add_solution(empty_fleet(part.inst), outcome.milp, outcome.x))
        over = (used + _gpu_use(inst, piece) > quota).any(axis=2)
        if over.any():
            repaired = True
            share = max(deadline - time.perf_counter(), 0.5) / (len(order) - position)
            fixed = _repair(inst, part, outcome, quota - used, over, backend, gap, share)
            if fixed is None:
                return SolveSummary(SolveStatus.INFEASIBLE, None, math.nan, bound + outcome.bound,
                                    lp_bound + outcome.lp_bound, [*outcomes, outcome], strategy,
                                    message=f"{', '.join(names)} does not fit in the quota the other models leave")
            outcome, piece = fixed
        outcomes.append(outcome)
        bound += outcome.bound
        lp_bound += outcome.lp_bound
        objective += outcome.objective
        used += _gpu_use(inst, piece)
        fleet = Fleet(fleet.replicas + piece.replicas, np.vstack([fleet.flows, piece.flows]),
                      np.vstack([fleet.loads, piece.loads]))
    fleet = drop_idle(inst, fleet)
    return SolveSummary(classify(objective, bound, gap), fleet, objective, bound, lp_bound, outcomes, strategy,
                        repaired_quota=repaired)


def _repair(inst: PlacementInstance, part: Part, outcome: BlockOutcome, residual: np.ndarray, over: np.ndarray,
            backend: str, gap: float, time_limit_s: float) -> tuple[BlockOutcome, Fleet] | None:
    """Fit one block's plan into the residual quota (see ``_solve_blocks``)."""
    began = time.perf_counter()
    sub = with_quota(part.inst, residual, keep_units=True)
    sub_milp = formulate(sub, part.models, budget=False, cuts=False)
    local = local_repair(sub_milp, outcome.x, over, backend, gap, time_limit_s / 2)
    if local.status.has_solution:
        x, objective = local.x, local.objective
    else:
        again = solve_block(sub_milp, outcome.models, backend=backend,
                            time_limit_s=max(time_limit_s - (time.perf_counter() - began), 0.5), gap=gap)
        if not again.status.has_solution:
            return None
        x, objective = again.x, again.objective
    bound = min(outcome.bound, objective)
    repaired = BlockOutcome(outcome.models, sub_milp, classify(objective, bound, gap), x, objective, bound,
                            outcome.lp_bound, outcome.heuristic_objective,
                            outcome.seconds + time.perf_counter() - began,
                            "repaired to fit the quota left by the other models", outcome.regions)
    return repaired, lift(inst, part, add_solution(empty_fleet(sub), sub_milp, x))

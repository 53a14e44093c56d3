"""How the placement MILP is solved: blocks by model and region component, side by side.

* **Blocks.** Models share nothing but the quota rows (and the budget), and within a model
  the components of the origin–region graph share nothing at all (``components.py``).
  Each block
  is solved with the full quota, a relaxation of the joint problem, so the blocks' bounds
  add up to a valid bound. The blocks are dealt to worker processes, heaviest first to
  the least loaded worker; each block's search is bounded by counts alone
  (``limits.py``), so which worker solves it, and in which order, changes nothing.
* **Per block**: LP relaxation; the LP with the rounded capacity cuts (``strengthen.py``)
  appended and re-solved from the LP's basis, the block's first proven bound; warm start
  (``heuristics.py``: serving sets by LP value, reserved vectors by steepest descent on
  the cut LP, the best completed period by period, ``by_period.py``).
* **Branching only when the plan needs it.** The gap target is the whole plan's: when the
  blocks' warm starts against their cut-LP bounds are within it, no block is searched
  further. Otherwise the blocks above the target go to the backend (with the cut rows,
  except whole-model ``direct`` blocks, where they can stall the root cut loop), from
  their warm starts, until the gap target or the node limit. Both steps are decided on
  counts and values, never the clock, so the plan is the same on any machine. A large
  block's search runs in a worker process, stopped if the safety net expires
  (``limits.py``); the block then keeps its warm start.
* **Joining.** The plans are joined under the shared quota rows. A block whose plan
  over-subscribes a (region, SKU) that earlier blocks use is repaired against the quota
  they leave in every period: first locally (only the replicas of the regions touching
  the over-subscribed row may move), else by re-solving the block under that residual
  quota.

A problem with at most ``DIRECT_MAX_INTEGERS`` integers (tests, small scenarios) is solved
as one block with all models and no cut rows; so is one whose budget row binds. LPs always
go to HiGHS (fast, with duals); MILPs go to the chosen backend. Measured figures are
printed by ``benchmarks/placement_speed.py``; the design choices are recorded in
``docs/decisions/``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from planner.engine import available_cores
from planner.engine.processes import run_processes
from planner.placement import highs_backend
from planner.placement.backends import run_backend
from planner.placement.components import Part, lift, split
from planner.placement.heuristics import warm_start
from planner.placement.instance import PlacementInstance
from planner.placement.limits import DEFAULT_NODE_LIMIT, DEFAULT_TIME_LIMIT_S, PLAN_GRACE_S, SafetyNet
from planner.placement.milp import Milp
from planner.placement.period_relaxation import plan_by_period
from planner.placement.pool_steps import solve_with_steps
from planner.placement.problem import formulate
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
TRIAL_NODE_SHARE = 0.1
"""A warm-start MILP (serving set and reserved replicas fixed) gets this share of the node limit."""
MIN_TRIAL_NODES = 50
SUPERVISED_INTEGERS = DIRECT_MAX_INTEGERS
"""A block with more integers than this branches in a worker process even when it is the only
one, so that the safety net can stop it: HiGHS checks its interrupt callback only between
some steps of its root node, and on the largest global block it went 417 s without one."""
BRANCH_HIT = "the block's branch and bound"
"""The safety-net hit of a block's branch and bound, whether HiGHS stopped itself or its worker was stopped."""
STOP_GRACE_S = 5.0
"""How long after the safety net expires a branching worker is stopped, when HiGHS has not
returned by itself."""


def trial_nodes(node_limit: int) -> int:
    return max(int(node_limit * TRIAL_NODE_SHARE), MIN_TRIAL_NODES)


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
    time_limit_hits: tuple[str, ...] = ()  # solver calls the wall-clock safety net stopped

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
            "time_limit_hits": list(self.time_limit_hits),
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
    time_limit_hits: list[str] = field(default_factory=list)
    pool_steps: dict[str, Any] | None = None  # how each pool's size step was chosen (``pool_steps.py``)

    @property
    def gap(self) -> float:
        return relative_gap(self.objective, self.bound)

    @property
    def reproducible(self) -> bool:
        """No solver call was stopped by the wall clock: the same inputs give this plan on any machine."""
        return not self.time_limit_hits


def _num(value: float) -> float | None:
    return round(float(value), 6) if math.isfinite(value) else None


def solve_block(milp: Milp, models: tuple[str, ...], *, backend: str, gap: float, node_limit: int,
                net: SafetyNet, cuts: bool = False, branch: bool = True) -> BlockOutcome:
    """LP relaxation, the cut LP's bound, LP-guided warm start, then (with ``branch``) the backend.

    The rounded capacity cuts of ``strengthen.py`` are valid inequalities (same plans, a
    tighter LP): their LP is solved before the warm start and is the block's first proven
    bound. With ``branch`` the backend then searches the block (with the cut rows when
    ``cuts``) from the warm start, unless the warm start is within ``gap`` already;
    without, the outcome is the warm start, and :func:`branch_block` may search later.
    The search is bounded by ``node_limit`` (and the warm start's counts); ``net`` is the
    wall-clock safety net, whose hits the outcome lists.
    """
    began = time.perf_counter()
    hits_before = len(net.hits)

    def done(status: SolveStatus, x: np.ndarray | None, objective: float, bound: float, lp_bound: float,
             heuristic: float, message: str = "") -> BlockOutcome:
        return BlockOutcome(models, milp, status, x, objective, bound, lp_bound, heuristic,
                            time.perf_counter() - began, message, time_limit_hits=tuple(net.hits[hits_before:]))

    relaxation = highs_backend.LoadedLp(milp.relaxed())
    lp = net.watch(relaxation.solve(net.left()), "the LP relaxation")
    if lp.status == SolveStatus.INFEASIBLE:
        return done(SolveStatus.INFEASIBLE, None, math.nan, math.inf, math.inf, math.nan, "LP relaxation infeasible")
    if lp.x is None and lp.hit_time_limit:
        # the net stopped the block's LP: the periods one by one still give a plan and a bound
        found, bound = plan_by_period(group_cuts(milp), net.with_grace(PLAN_GRACE_S))
        if found is None or found.x is None:
            status = SolveStatus.INFEASIBLE if bound == math.inf else SolveStatus.ERROR
            return done(status, None, math.nan, bound, bound, math.nan,
                        "the safety net stopped the LP relaxation, and the period relaxation gave no plan")
        bound = min(bound, found.objective)
        return done(classify(found.objective, bound, gap, True), found.x, found.objective, bound, bound,
                    found.objective, "the safety net stopped the LP relaxation: planned from the period relaxation")
    if lp.x is None:
        return done(SolveStatus.ERROR, None, math.nan, -math.inf, -math.inf, math.nan,
                    f"LP relaxation failed: {lp.message}")
    lp_bound = lp.objective
    integral = np.all(np.abs(lp.x[milp.integer] - np.rint(lp.x[milp.integer])) <= 1e-6)
    if integral:
        x = lp.x.copy()
        x[milp.integer] = np.rint(x[milp.integer])
        return done(SolveStatus.OPTIMAL, x, lp_bound, lp_bound, lp_bound, lp_bound, "LP relaxation is integral")
    relaxation.add_rows(group_cuts(milp).relaxed())  # re-solved from the LP's basis
    cut_lp = net.watch(relaxation.solve(net.left()), "the cut LP bound")
    bound = max(lp_bound, cut_lp.objective) if cut_lp.status == SolveStatus.OPTIMAL else lp_bound
    start = warm_start(milp, lp, backend, gap, trial_nodes(node_limit), net, relaxation)
    if (start is None or start.x is None) and net.expired:  # no search left to find one: the periods' plan
        start, _ = plan_by_period(group_cuts(milp), net.with_grace(PLAN_GRACE_S))
    if start is None or start.x is None:
        if not branch:
            return done(SolveStatus.ERROR, None, math.nan, bound, lp_bound, math.nan,
                        "no warm start: the block needs its branch and bound")
        outcome = done(SolveStatus.ERROR, None, math.nan, bound, lp_bound, math.nan)
    else:
        best_bound = min(bound, start.objective)
        outcome = done(classify(start.objective, best_bound, gap, bool(net.hits[hits_before:])), start.x,
                       start.objective, best_bound, lp_bound, start.objective)
    if branch:
        outcome = branch_block(outcome, backend=backend, gap=gap, node_limit=node_limit, net=net, cuts=cuts)
    return outcome


def branch_block(outcome: BlockOutcome, *, backend: str, gap: float, node_limit: int, net: SafetyNet,
                 cuts: bool = False) -> BlockOutcome:
    """The backend's branch and bound on the block from its warm start, unless that is within ``gap``.

    With ``cuts`` the backend works on the block with the rounded capacity cuts added.
    """
    if outcome.x is not None and relative_gap(outcome.objective, outcome.bound) <= gap:
        return outcome
    began = time.perf_counter()
    hits_before = len(net.hits)
    milp = outcome.milp
    full = net.watch(run_backend(backend, group_cuts(milp) if cuts else milp, time_limit_s=net.left(), gap=gap,
                                 node_limit=node_limit, start=outcome.x), BRANCH_HIT)
    seconds = outcome.seconds + time.perf_counter() - began
    hits = (*outcome.time_limit_hits, *net.hits[hits_before:])
    if full.status == SolveStatus.INFEASIBLE and outcome.x is None:
        return replace(outcome, status=SolveStatus.INFEASIBLE, bound=math.inf, seconds=seconds,
                       message=full.message, time_limit_hits=hits)
    x, objective, bound = outcome.x, outcome.objective if outcome.x is not None else math.inf, outcome.bound
    if full.status.has_solution and full.objective < objective:
        x, objective = full.x, full.objective
    if math.isfinite(full.bound):
        bound = max(bound, full.bound)
    if x is None:
        return replace(outcome, status=SolveStatus.ERROR, bound=bound, seconds=seconds,
                       message=full.message or "no feasible plan found within the node limit", time_limit_hits=hits)
    bound = min(bound, objective)
    return replace(outcome, status=classify(objective, bound, gap, full.hit_time_limit), x=x, objective=objective,
                   bound=bound, seconds=seconds, message=full.message, time_limit_hits=hits)


def _parts(inst: PlacementInstance, strategy: str) -> list[Part]:
    """The blocks: all models at once ('direct'), else one per model and component of its regions."""
    demanded = [m for m in range(len(inst.models)) if inst.demand_rps[:, m].sum() > 0]
    if not demanded:
        return []
    if strategy == "direct":
        return [Part(tuple(demanded), tuple(range(len(inst.regions))), inst, np.arange(inst.n_units))]
    return [part for m in demanded for part in split(inst, m)]


def gpu_use(inst: PlacementInstance, fleet: Fleet) -> np.ndarray:
    """GPUs per (region, SKU, period) of a fleet."""
    gpus = np.zeros((len(inst.regions), len(inst.skus), inst.n_periods))
    np.add.at(gpus, (inst.unit_region, inst.unit_sku), fleet.replicas.sum(axis=1) * inst.unit_gpus[:, None])
    return gpus


def solve_instance(inst: PlacementInstance, *, backend: str = "highs", node_limit: int = DEFAULT_NODE_LIMIT,
                   time_limit_s: float = DEFAULT_TIME_LIMIT_S, gap: float = 0.01, strategy: str = "auto",
                   net: SafetyNet | None = None) -> SolveSummary:
    """Solve the placement MILP of ``inst`` (strategy 'auto', 'direct' or 'decomposed').

    ``node_limit`` bounds each MILP's search; ``time_limit_s`` is the wall-clock safety net
    (``net``, when given, is one shared with other solves of the same placement).
    """
    began = time.perf_counter()
    net = net if net is not None else SafetyNet.starting_now(time_limit_s)
    if inst.has_pool_gains() and inst.unit_pool_step is None \
            and formulate(inst, budget=False, cuts=False).n_integer > DIRECT_MAX_INTEGERS:
        summary = solve_with_steps(inst, lambda fixed: solve_instance(
            fixed, backend=backend, node_limit=node_limit, gap=gap, strategy=strategy, net=net), net.left, gap)
        summary.seconds = time.perf_counter() - began
        return summary
    if strategy == "auto":
        joint_integers = formulate(inst, budget=False, cuts=False).n_integer
        strategy = "direct" if joint_integers <= DIRECT_MAX_INTEGERS else "decomposed"
    summary = _solve_blocks(inst, backend, node_limit, gap, strategy, net)
    if summary.fleet is not None and strategy == "decomposed":
        if inst.budget_usd is not None and summary.status.has_solution:
            total = sum(fleet_cost(inst, summary.fleet))
            if total > inst.budget_usd and summary.bound <= inst.budget_usd:
                joint = _solve_blocks(inst, backend, node_limit, gap, "direct", net)
                joint.bound = max(joint.bound, summary.bound) if joint.status.has_solution else joint.bound
                summary = joint
    summary.seconds = time.perf_counter() - began
    summary.time_limit_hits = list(dict.fromkeys(net.hits))
    return summary


@dataclass(frozen=True)
class _BinTask:
    """Blocks one worker solves in turn: their warm starts, or (``found`` given) their branch and bound."""

    parts: tuple[Part, ...]
    backend: str
    node_limit: int
    net: SafetyNet
    gap: float
    direct: bool
    found: tuple[dict[str, Any], ...] | None = None


_OUTCOME_FIELDS = ("status", "x", "objective", "bound", "lp_bound", "heuristic_objective", "seconds", "message",
                   "time_limit_hits")


def _run_bin(task: _BinTask) -> list[dict[str, Any]]:
    """Solve a worker's blocks in order (in a worker process or here); plain values that pickle.

    Each block's search is bounded by counts alone, so its result does not depend on the
    blocks solved before it, on this worker or any other.
    """
    out = []
    for i, part in enumerate(task.parts):
        milp = formulate(part.inst, part.models, budget=task.direct, cuts=False)
        names = tuple(part.inst.models[m] for m in part.models)
        net = replace(task.net, hits=[])
        if task.found is None:
            outcome = solve_block(milp, names, backend=task.backend, gap=task.gap, node_limit=task.node_limit,
                                  net=net, cuts=not task.direct, branch=False)
        else:
            outcome = branch_block(BlockOutcome(models=names, milp=milp, **task.found[i]), backend=task.backend,
                                   gap=task.gap, node_limit=task.node_limit, net=net, cuts=not task.direct)
        out.append({name: getattr(outcome, name) for name in _OUTCOME_FIELDS})
    return out


def _needs_branch(result: dict[str, Any], gap: float) -> bool:
    """A warm-started block above its gap target, or one with a bound but no warm start."""
    if result["x"] is None:
        return result["status"] == SolveStatus.ERROR and math.isfinite(result["bound"])
    return relative_gap(result["objective"], result["bound"]) > gap


def _run_phase(tasks: list[_BinTask], bins: list[list[int]], workers: int,
               deadline: float | None = None) -> dict[int, dict[str, Any]]:
    """Run the bins' tasks side by side, results by block: in worker processes when there are
    two or more, or when a ``deadline`` must be kept; a bin unfinished at the deadline has none."""
    if len(tasks) > 1 or deadline is not None:
        done = run_processes(_run_bin, tasks, max(min(workers, len(tasks)), 1), None, deadline=deadline)
    else:
        done = [_run_bin(task) for task in tasks]
    results: dict[int, dict[str, Any]] = {}
    for members, outcomes_of_bin in zip(bins, done, strict=True):
        if outcomes_of_bin is not None:
            results.update(zip(members, outcomes_of_bin, strict=True))
    return results


def _solve_parts(parts: list[Part], weights: list[float], backend: str, node_limit: int, gap: float, direct: bool,
                 net: SafetyNet) -> dict[int, dict[str, Any]]:
    """Every block's warm start; then, only if the whole plan is above ``gap``, branch and bound on the
    blocks above it. The gap target is the plan's: a block a little above it may be offset by
    the others, and its search would cost far more than theirs."""
    workers = max(min(available_cores(), len(parts)), 1)
    bins = _bins(weights, workers)
    results = _run_phase([_BinTask(tuple(parts[i] for i in b), backend, node_limit, net, gap, direct)
                          for b in bins], bins, workers)
    objective = sum(r["objective"] for r in results.values() if r["x"] is not None)
    bound = sum(r["bound"] for r in results.values())
    solved = all(r["x"] is not None for r in results.values())
    if solved and relative_gap(objective, bound) <= gap:
        return results
    todo = sorted((i for i in results if _needs_branch(results[i], gap)), key=lambda i: (weights[i], i))
    if todo and not net.skip("branch and bound on the blocks above the gap target"):
        # one block per task, lightest first: a search the net stops loses only its own
        # block's search, and the most blocks finish before it expires
        tasks = [_BinTask((parts[i],), backend, node_limit, net, gap, direct, (results[i],)) for i in todo]
        supervised = len(todo) > 1 or weights[todo[-1]] > SUPERVISED_INTEGERS
        branched = _run_phase(tasks, [[i] for i in todo], workers,
                              net.deadline + STOP_GRACE_S if supervised else None)
        for i in todo:
            results[i] = branched.get(i) or _stopped(results[i], gap)
    return results


def _stopped(result: dict[str, Any], gap: float) -> dict[str, Any]:
    """A block whose branch and bound the safety net stopped: its warm start, marked as stopped on time."""
    status = classify(result["objective"], result["bound"], gap, True) if result["x"] is not None else result["status"]
    return {**result, "status": status, "time_limit_hits": (*result["time_limit_hits"], BRANCH_HIT)}


def _bins(weights: list[float], count: int) -> list[list[int]]:
    """Blocks to workers: heaviest first to the lightest worker; each worker's list lightest first."""
    loads = [0.0] * count
    bins: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        j = min(range(count), key=lambda j: (loads[j], j))
        bins[j].append(i)
        loads[j] += weights[i]
    return [sorted(b, key=lambda i: (weights[i], i)) for b in bins if b]


def _solve_blocks(inst: PlacementInstance, backend: str, node_limit: int, gap: float, strategy: str,
                  net: SafetyNet) -> SolveSummary:
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
    wall time); each worker solves its blocks in turn.
    """
    direct = strategy == "direct"
    parts = _parts(inst, strategy)
    milps = [formulate(part.inst, part.models, budget=direct, cuts=False) for part in parts]
    weights = [float(milp.n_integer + 1) for milp in milps]
    results = _solve_parts(parts, weights, backend, node_limit, gap, direct, net)
    for result in results.values():
        net.hits.extend(result["time_limit_hits"])
    order = sorted(range(len(parts)), key=lambda i: (weights[i], i))
    quota = inst.quota_per_period()
    used = np.zeros_like(quota, dtype=float)
    fleet = empty_fleet(inst)
    outcomes: list[BlockOutcome] = []
    bound = lp_bound = objective = 0.0
    repaired = False
    for i in order:
        part = parts[i]
        names, regions = part.label(inst)
        outcome = BlockOutcome(models=names, milp=milps[i], regions=regions if not direct else (), **results[i])
        if not outcome.status.has_solution or outcome.x is None:
            return SolveSummary(outcome.status, None, math.nan, outcome.bound, outcome.lp_bound,
                                [*outcomes, outcome], strategy, message=outcome.message)
        piece = lift(inst, part, add_solution(empty_fleet(part.inst), outcome.milp, outcome.x))
        over = (used + gpu_use(inst, piece) > quota).any(axis=2)
        if over.any():
            repaired = True
            fixed = _repair(inst, part, outcome, quota - used, over, backend, gap, node_limit, net)
            if fixed is None:
                return SolveSummary(SolveStatus.INFEASIBLE, None, math.nan, bound + outcome.bound,
                                    lp_bound + outcome.lp_bound, [*outcomes, outcome], strategy,
                                    message=f"{', '.join(names)} does not fit in the quota the other models leave")
            outcome, piece = fixed
        outcomes.append(outcome)
        bound += outcome.bound
        lp_bound += outcome.lp_bound
        objective += outcome.objective
        used += gpu_use(inst, piece)
        fleet = Fleet(fleet.replicas + piece.replicas, np.vstack([fleet.flows, piece.flows]),
                      np.vstack([fleet.loads, piece.loads]))
    fleet = drop_idle(inst, fleet)
    stopped_on_time = any(o.time_limit_hits for o in outcomes)
    return SolveSummary(classify(objective, bound, gap, stopped_on_time), fleet, objective, bound, lp_bound, outcomes,
                        strategy, repaired_quota=repaired)


def _repair(inst: PlacementInstance, part: Part, outcome: BlockOutcome, residual: np.ndarray, over: np.ndarray,
            backend: str, gap: float, node_limit: int, net: SafetyNet) -> tuple[BlockOutcome, Fleet] | None:
    """Fit one block's plan into the residual quota (see ``_solve_blocks``)."""
    if outcome.x is None:  # only a block with a plan is repaired
        return None
    began = time.perf_counter()
    hits_before = len(net.hits)
    sub = with_quota(part.inst, residual, keep_units=True)
    sub_milp = formulate(sub, part.models, budget=False, cuts=False)
    local = net.watch(local_repair(sub_milp, outcome.x, over, backend, gap, node_limit, net.left()),
                      "a quota repair")
    if local.status.has_solution and local.x is not None:
        x, objective = local.x, local.objective
    else:
        again = solve_block(sub_milp, outcome.models, backend=backend, gap=gap, node_limit=node_limit, net=net)
        if not again.status.has_solution or again.x is None:
            return None
        x, objective = again.x, again.objective
    bound = min(outcome.bound, objective)
    repaired = BlockOutcome(outcome.models, sub_milp, classify(objective, bound, gap, len(net.hits) > hits_before), x,
                            objective, bound, outcome.lp_bound, outcome.heuristic_objective,
                            outcome.seconds + time.perf_counter() - began,
                            "repaired to fit the quota left by the other models", outcome.regions,
                            (*outcome.time_limit_hits, *net.hits[hits_before:]))
    return repaired, lift(inst, part, add_solution(empty_fleet(sub), sub_milp, x))

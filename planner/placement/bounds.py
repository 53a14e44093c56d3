"""Lower bounds and baselines that put a plan's cost in context.

* **LP relaxation**: the placement MILP with integrality dropped, per model block (the
  quota rows shared between models relaxed), summed. Computed during the solve.
* **Perfectly elastic bound**: every period on its own, as if capacity could follow demand
  hour by hour: reserved replicas may change every period (priced per hour at the
  reserved rate), no switching cost, serving regions chosen per period. Every plan of
  the real problem is feasible for each period's problem at no higher cost, so the sum of
  the per-period optima is a lower bound. Each period is a small MILP (all models, a few
  hundred integers), searched to ``ELASTIC_GAP`` or ``ELASTIC_NODE_LIMIT`` nodes; the sum
  of their proven dual bounds is used, so a period stopped on its node limit still gives
  a valid (if weaker) term. The periods are solved side by side, one per core.
* **Best single-SKU plan**: the whole fleet on one SKU type (the cheapest such plan among
  the SKUs every demanded model may run on), solved like the real plan with the same node
  limit; if no SKU serves every model, each model on its own best single SKU. It is a
  baseline, not a bound: it shows what mixing SKUs saves.

All are searched with node limits only, so they are the same on any machine, and each
carries its status (:func:`reference_status`): optimal, within its gap target, stopped on its
node limit with the proven gap, or infeasible. They have a wall-clock safety net of their
own, apart from the main solve's, so a long main solve leaves them the same work; a
bound or baseline that net stops is not reported at all (``time_limit``), since its value
would depend on the clock. When the single-SKU plan costs less than the plan the search
found, ``place.py`` returns it (it is feasible for the same constraints) and says so.
"""

from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planner.engine import available_cores
from planner.placement import highs_backend
from planner.placement.instance import PlacementInstance
from planner.placement.limits import SafetyNet
from planner.placement.periods import Periods
from planner.placement.problem import formulate
from planner.placement.result import Fleet, empty_fleet
from planner.placement.solve import SolveSummary, solve_instance
from planner.placement.status import SolveOutcome, SolveStatus, classify, relative_gap

ELASTIC_GAP = 0.005
ELASTIC_NODE_LIMIT = 50
"""Nodes per period's MILP: enough to prove the bound a larger limit proves (figures: decision 0001)."""
ELASTIC_OPTIONS: dict[str, float | int | str | bool] = {"mip_heuristic_run_root_reduced_cost": False}
"""HiGHS's root reduced-cost heuristic solves a sub-MIP at the root of every period's MILP;
on these small MILPs it takes a quarter of the time and the bound comes out no weaker
without it (decision 0031)."""


def period_instance(inst: PlacementInstance, t: int) -> PlacementInstance:
    """Period t alone: one period of its own hours (reserved priced for those hours only)."""
    periods = Periods((inst.periods.labels[t],), inst.periods.hours[t:t + 1], (inst.periods.first_ts[t],), False,
                      inst.periods.spec)
    quota = None if inst.quota_by_period is None else inst.quota_by_period[:, :, t:t + 1]
    return replace(inst, periods=periods, demand_rps=inst.demand_rps[..., t:t + 1], quota_by_period=quota)


def reference_status(status: str, gap: float | None = None) -> dict[str, Any]:
    """How a bound or baseline was reached: ``optimal``, ``feasible_within_gap`` or ``node_limit`` (with the
    proven gap), ``infeasible``, or ``time_limit`` (the safety net stopped it: no number is given)."""
    out: dict[str, Any] = {"status": status}
    if gap is not None and math.isfinite(gap) and status in ("feasible_within_gap", "node_limit"):
        out["gap"] = round(float(gap), 6)
    return out


def status_of(status: SolveStatus, gap: float) -> dict[str, Any]:
    names = {SolveStatus.OPTIMAL: "optimal", SolveStatus.FEASIBLE_WITHIN_GAP: "feasible_within_gap",
             SolveStatus.NODE_LIMIT_WITH_INCUMBENT: "node_limit", SolveStatus.INFEASIBLE: "infeasible",
             SolveStatus.TIME_LIMIT_WITH_INCUMBENT: "time_limit"}
    return reference_status(names.get(status, "error"), gap)


def elastic_bound(inst: PlacementInstance, net: SafetyNet, threads: int | None = None) -> dict[str, Any]:
    """Σ_t (proven lower bound of period t's MILP), with its status (the worst of the periods').

    The periods' MILPs are independent, so they are solved side by side on ``threads``
    threads (default: the cores this process may use). HiGHS releases the interpreter
    while it solves and keeps one scheduler per calling thread, and each MILP runs
    single-threaded, so every period's outcome, and the sum taken in period order, are
    the same as one after another. A period the safety net stops leaves the bound
    unreported: its value would depend on the clock.
    """
    workers = max(min(threads or available_cores(), inst.n_periods), 1)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="elastic-bound") as pool:
        futures = [pool.submit(_period_bound, inst, t, net) for t in range(inst.n_periods)]
        try:
            return _elastic_sum(inst, futures)
        finally:
            for future in futures:
                future.cancel()  # an early answer (a stopped or infeasible period) needs none of the rest


def _period_bound(inst: PlacementInstance, t: int, net: SafetyNet) -> SolveOutcome | None:
    """Period t's MILP, searched to ``ELASTIC_GAP`` or ``ELASTIC_NODE_LIMIT``; None when the net skipped it."""
    what = _period_what(inst, t)
    if net.skip(what):
        return None
    milp = formulate(period_instance(inst, t), budget=False, cuts=False)
    return net.watch(highs_backend.solve(milp, time_limit_s=net.left(), gap=ELASTIC_GAP,
                                         node_limit=ELASTIC_NODE_LIMIT, options=ELASTIC_OPTIONS), what)


def _period_what(inst: PlacementInstance, t: int) -> str:
    return f"the elastic bound's MILP of period {inst.periods.labels[t]}"


def _elastic_sum(inst: PlacementInstance, outcomes: list[Future[SolveOutcome | None]]) -> dict[str, Any]:
    """The bound from the periods' outcomes, read in period order (each waited for when read)."""
    total, objective, worst = 0.0, 0.0, SolveStatus.OPTIMAL
    order = (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE_WITHIN_GAP, SolveStatus.NODE_LIMIT_WITH_INCUMBENT)
    for t, future in enumerate(outcomes):
        label, what = inst.periods.labels[t], _period_what(inst, t)
        outcome = future.result()
        if outcome is None:
            return {"usd": None, "note": f"{what} was skipped by the wall-clock safety net",
                    **reference_status("time_limit")}
        if outcome.hit_time_limit:
            return {"usd": None, "note": f"{what} was stopped by the wall-clock safety net",
                    **reference_status("time_limit")}
        if outcome.status == SolveStatus.INFEASIBLE:
            return {"usd": None, "note": f"period {label} is infeasible on its own", **reference_status("infeasible")}
        if not math.isfinite(outcome.bound):
            return {"usd": None, "note": f"no bound for period {label}", **reference_status("error")}
        status = classify(outcome.objective, outcome.bound, ELASTIC_GAP) if outcome.status.has_solution \
            else SolveStatus.NODE_LIMIT_WITH_INCUMBENT
        worst = max(worst, status, key=order.index)
        total += outcome.bound
        objective += outcome.objective if outcome.status.has_solution else math.inf
    gap = relative_gap(objective, total)
    return {"usd": round(total, 2), "periods_solved_as_milp": inst.n_periods, **status_of(worst, gap)}


def _single_sku_candidates(inst: PlacementInstance) -> tuple[list[str], list[int]]:
    demanded = [m for m in range(len(inst.models)) if inst.demand_rps[:, m].sum() > 0]
    common = [s for s in range(len(inst.skus))
              if all(((inst.unit_model == m) & (inst.unit_sku == s)).any() for m in demanded)]
    return [inst.skus[s] for s in common], demanded


@dataclass
class SingleSku:
    """The best single-SKU baseline: its JSON figures and its plan (in the full instance's units)."""

    figures: dict[str, Any]
    fleet: Fleet | None = None
    objective: float = math.inf


def best_single_sku(inst: PlacementInstance, *, backend: str, gap: float, node_limit: int,
                    net: SafetyNet, strategy: str = "auto") -> SingleSku:
    """The cheapest plan on one SKU (whole fleet), or per model when no SKU serves every model; each program solved
    by ``solve_instance`` with ``strategy``.

    A solve the safety net stops leaves the baseline unreported (its value would depend on the clock).
    """
    skus, demanded = _single_sku_candidates(inst)

    def solve(keep: np.ndarray, demand: np.ndarray | None = None) -> tuple[SolveSummary, Fleet | None]:
        sub = inst.restricted(keep) if demand is None else replace(inst.restricted(keep), demand_rps=demand)
        summary = solve_instance(sub, backend=backend, node_limit=node_limit, gap=gap, net=net, strategy=strategy)
        lifted = None if summary.fleet is None else _lift(inst, np.flatnonzero(keep), summary.fleet)
        return summary, lifted

    if skus:
        results = []
        for sku in skus:
            summary, fleet = solve(inst.unit_sku == inst.skus.index(sku))
            if summary.time_limit_hits:
                return _stopped(f"the {sku} solve")
            if summary.status.has_solution:
                results.append((summary.objective, sku, summary, fleet))
        if not results:
            return SingleSku({"usd": None, "note": "no single SKU can serve the whole demand",
                              **reference_status("infeasible")})
        objective, sku, summary, fleet = min(results, key=lambda item: (item[0], item[1]))
        return SingleSku({"usd": round(objective, 2), "sku": sku, "scope": "whole fleet", "skus_tried": skus,
                          **status_of(summary.status, summary.gap)}, fleet, objective)
    per_model: dict[str, Any] = {}
    total, fleets, worst = 0.0, [], (SolveStatus.OPTIMAL, 0.0)
    for m in demanded:
        options = []
        for si in sorted({int(s) for s in inst.unit_sku[inst.unit_model == m]}):
            summary, fleet = solve((inst.unit_model == m) & (inst.unit_sku == si), _only_model(inst.demand_rps, m))
            if summary.time_limit_hits:
                return _stopped(f"the {inst.models[m]} on {inst.skus[si]} solve")
            if summary.status.has_solution:
                options.append((summary.objective, inst.skus[si], summary.status, summary.gap, fleet))
        if not options:
            return SingleSku({"usd": None, "note": f"no single SKU can serve {inst.models[m]}",
                              **reference_status("infeasible")})
        cost, sku, status, model_gap, fleet = min(options, key=lambda item: (item[0], item[1]))
        per_model[inst.models[m]] = {"sku": sku, "usd": round(cost, 2)}
        total += cost
        fleets.append(fleet)
        if status != SolveStatus.OPTIMAL and model_gap >= worst[1]:
            worst = (status, model_gap)
    joined = _join(inst, fleets) if all(f is not None for f in fleets) else None
    return SingleSku({"usd": round(total, 2), "scope": "one SKU per model", "per_model": per_model,
                      **status_of(*worst)}, joined, total)


def _stopped(what: str) -> SingleSku:
    return SingleSku({"usd": None, "note": f"{what} was stopped by the wall-clock safety net",
                      **reference_status("time_limit")})


def _lift(inst: PlacementInstance, units: np.ndarray, fleet: Fleet) -> Fleet:
    """A restricted instance's fleet in the full instance's unit indices."""
    replicas = np.zeros((inst.n_units, *fleet.replicas.shape[1:]), dtype=fleet.replicas.dtype)
    replicas[units] = fleet.replicas
    loads = fleet.loads.copy()
    if loads.size:
        loads[:, 0] = units[loads[:, 0].astype(np.int64)]
    return Fleet(replicas, fleet.flows.copy(), loads)


def _join(inst: PlacementInstance, fleets: list[Any]) -> Fleet:
    """Fleets of disjoint models as one (they may together exceed a shared quota: the caller checks)."""
    out = empty_fleet(inst)
    for fleet in fleets:
        out = Fleet(out.replicas + fleet.replicas, np.vstack([out.flows, fleet.flows]),
                    np.vstack([out.loads, fleet.loads]))
    return out


def _only_model(demand: np.ndarray, m: int) -> np.ndarray:
    out = np.zeros_like(demand)
    out[:, m] = demand[:, m]
    return out

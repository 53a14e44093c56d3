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
  a valid (if weaker) term.
* **Best single-SKU plan**: the whole fleet on one SKU type (the cheapest such plan among
  the SKUs every demanded model may run on), solved like the real plan with the same node
  limit; if no SKU serves every model, each model on its own best single SKU. It is a
  baseline, not a bound: it shows what mixing SKUs saves.

Both are searched with node limits only, so they are the same on any machine; the
wall-clock safety net of the placement (``limits.py``) is shared with the main solve.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from planner.placement import highs_backend
from planner.placement.instance import PlacementInstance
from planner.placement.limits import SafetyNet
from planner.placement.periods import Periods
from planner.placement.problem import formulate
from planner.placement.solve import SolveSummary, solve_instance

ELASTIC_GAP = 0.005
ELASTIC_NODE_LIMIT = 50
"""Nodes per period's MILP: enough to prove the bound a larger limit proves (figures: decision 0001)."""


def period_instance(inst: PlacementInstance, t: int) -> PlacementInstance:
    """Period t alone: one period of its own hours (reserved priced for those hours only)."""
    periods = Periods((inst.periods.labels[t],), inst.periods.hours[t:t + 1], (inst.periods.first_ts[t],), False,
                      inst.periods.spec)
    quota = None if inst.quota_by_period is None else inst.quota_by_period[:, :, t:t + 1]
    return replace(inst, periods=periods, demand_rps=inst.demand_rps[..., t:t + 1], quota_by_period=quota)


def elastic_bound(inst: PlacementInstance, net: SafetyNet) -> dict[str, Any]:
    """Σ_t (proven lower bound of period t's MILP); a period the safety net reaches expired uses its LP value."""
    total, solved, lp_only = 0.0, 0, 0
    for t in range(inst.n_periods):
        milp = formulate(period_instance(inst, t), budget=False, cuts=False)
        if not net.skip(f"the elastic bound's MILP of period {inst.periods.labels[t]}"):
            outcome = highs_backend.solve(milp, time_limit_s=net.left(), gap=ELASTIC_GAP, node_limit=ELASTIC_NODE_LIMIT)
            net.watch(outcome, f"the elastic bound's MILP of period {inst.periods.labels[t]}")
            solved += 1
        else:
            outcome = highs_backend.solve(milp.relaxed(), time_limit_s=60.0, gap=ELASTIC_GAP)
            lp_only += 1
        if outcome.status.value == "infeasible":
            return {"usd": None, "note": f"period {inst.periods.labels[t]} is infeasible on its own"}
        if not math.isfinite(outcome.bound):
            return {"usd": None, "note": f"no bound for period {inst.periods.labels[t]}"}
        total += outcome.bound
    return {"usd": round(total, 2), "periods_solved_as_milp": solved, "periods_lp_only": lp_only}


def _single_sku_candidates(inst: PlacementInstance) -> tuple[list[str], list[int]]:
    demanded = [m for m in range(len(inst.models)) if inst.demand_rps[:, m].sum() > 0]
    common = [s for s in range(len(inst.skus))
              if all(((inst.unit_model == m) & (inst.unit_sku == s)).any() for m in demanded)]
    return [inst.skus[s] for s in common], demanded


def best_single_sku(inst: PlacementInstance, *, backend: str, gap: float, node_limit: int,
                    net: SafetyNet) -> dict[str, Any]:
    """The cheapest plan on one SKU (whole fleet), or per model when no SKU serves every model."""
    skus, demanded = _single_sku_candidates(inst)

    def solve(sub: PlacementInstance) -> SolveSummary:
        return solve_instance(sub, backend=backend, node_limit=node_limit, gap=gap, net=net)

    if skus:
        results = []
        for sku in skus:
            summary = solve(inst.restricted(inst.unit_sku == inst.skus.index(sku)))
            if summary.status.has_solution:
                results.append((summary.objective, sku, summary))
        if not results:
            return {"usd": None, "note": "no single SKU can serve the whole demand"}
        objective, sku, summary = min(results, key=lambda item: (item[0], item[1]))
        return {"usd": round(objective, 2), "sku": sku, "scope": "whole fleet", "status": summary.status.value,
                "gap": round(summary.gap, 6), "skus_tried": skus}
    per_model: dict[str, Any] = {}
    total = 0.0
    for m in demanded:
        options = []
        for si in sorted({int(s) for s in inst.unit_sku[inst.unit_model == m]}):
            keep = (inst.unit_model == m) & (inst.unit_sku == si)
            summary = solve(replace(inst.restricted(keep), demand_rps=_only_model(inst.demand_rps, m)))
            if summary.status.has_solution:
                options.append((summary.objective, inst.skus[si]))
        if not options:
            return {"usd": None, "note": f"no single SKU can serve {inst.models[m]}"}
        cost, sku = min(options)
        per_model[inst.models[m]] = {"sku": sku, "usd": round(cost, 2)}
        total += cost
    return {"usd": round(total, 2), "scope": "one SKU per model", "per_model": per_model}


def _only_model(demand: np.ndarray, m: int) -> np.ndarray:
    out = np.zeros_like(demand)
    out[:, m] = demand[:, m]
    return out

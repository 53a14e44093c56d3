"""Lower bounds and baselines that put a plan's cost in context.

* **LP relaxation**: the placement MILP with integrality dropped, per model block (the
  quota rows shared between models relaxed), summed. Computed during the solve.
* **Perfectly elastic bound**: every period on its own, as if capacity could follow demand
  hour by hour: reserved replicas may change every period (priced per hour at the
  reserved rate), no switching cost, serving regions chosen per period. Every plan of
  the real problem is feasible for each period's problem at no higher cost, so the sum of
  the per-period optima is a lower bound. Each period is a small MILP (all models, a few
  hundred integers); the sum of their proven dual bounds is used, so a period stopped early
  still gives a valid (if weaker) term.
* **Best single-SKU plan**: the whole fleet on one SKU type (the cheapest such plan among
  the SKUs every demanded model may run on), solved like the real plan but with a shorter
  time limit; if no SKU serves every model, each model on its own best single SKU. It is
  a baseline, not a bound: it shows what mixing SKUs saves.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import numpy as np

from planner.placement import highs_backend
from planner.placement.instance import PlacementInstance
from planner.placement.periods import Periods
from planner.placement.problem import formulate
from planner.placement.solve import solve_instance

ELASTIC_GAP = 0.005


def period_instance(inst: PlacementInstance, t: int) -> PlacementInstance:
    """Period t alone: one period of its own hours (reserved priced for those hours only)."""
    periods = Periods((inst.periods.labels[t],), inst.periods.hours[t:t + 1], (inst.periods.first_ts[t],), False,
                      inst.periods.spec)
    quota = None if inst.quota_by_period is None else inst.quota_by_period[:, :, t:t + 1]
    return replace(inst, periods=periods, demand_rps=inst.demand_rps[..., t:t + 1], quota_by_period=quota)


def elastic_bound(inst: PlacementInstance, time_limit_s: float) -> dict[str, Any]:
    """Σ_t (proven lower bound of period t's MILP); periods not reached in time use their LP value."""
    began = time.perf_counter()
    total, solved, lp_only = 0.0, 0, 0
    for t in range(inst.n_periods):
        milp = formulate(period_instance(inst, t), budget=False, cuts=False)
        left = time_limit_s - (time.perf_counter() - began)
        per_period = left / (inst.n_periods - t)
        if per_period >= 0.02:
            outcome = highs_backend.solve(milp, time_limit_s=per_period, gap=ELASTIC_GAP)
            solved += 1
        else:
            outcome = highs_backend.solve(milp.relaxed(), time_limit_s=1.0, gap=ELASTIC_GAP)
            lp_only += 1
        if outcome.status.value == "infeasible":
            return {"usd": None, "note": f"period {inst.periods.labels[t]} is infeasible on its own"}
        if not math.isfinite(outcome.bound):
            return {"usd": None, "note": f"no bound for period {inst.periods.labels[t]} within the time limit"}
        total += outcome.bound
    return {"usd": round(total, 2), "periods_solved_as_milp": solved, "periods_lp_only": lp_only,
            "seconds": round(time.perf_counter() - began, 3)}


def _single_sku_candidates(inst: PlacementInstance) -> tuple[list[str], list[int]]:
    demanded = [m for m in range(len(inst.models)) if inst.demand_rps[:, m].sum() > 0]
    common = [s for s in range(len(inst.skus))
              if all(((inst.unit_model == m) & (inst.unit_sku == s)).any() for m in demanded)]
    return [inst.skus[s] for s in common], demanded


def best_single_sku(inst: PlacementInstance, *, backend: str, time_limit_s: float, gap: float) -> dict[str, Any]:
    """The cheapest plan on one SKU (whole fleet), or per model when no SKU serves every model."""
    began = time.perf_counter()
    skus, demanded = _single_sku_candidates(inst)
    if skus:
        results = []
        for position, sku in enumerate(skus):
            share = max(time_limit_s - (time.perf_counter() - began), 1.0) / (len(skus) - position)
            summary = solve_instance(inst.restricted(inst.unit_sku == inst.skus.index(sku)), backend=backend,
                                     time_limit_s=share, gap=gap)
            if summary.status.has_solution:
                results.append((summary.objective, sku, summary))
        if not results:
            return {"usd": None, "note": "no single SKU can serve the whole demand"}
        objective, sku, summary = min(results, key=lambda item: (item[0], item[1]))
        return {"usd": round(objective, 2), "sku": sku, "scope": "whole fleet", "status": summary.status.value,
                "gap": round(summary.gap, 6), "skus_tried": skus}
    per_model: dict[str, Any] = {}
    total = 0.0
    for position, m in enumerate(demanded):
        options = []
        model_skus = sorted({int(s) for s in inst.unit_sku[inst.unit_model == m]})
        for sku in model_skus:
            share = max(time_limit_s - (time.perf_counter() - began), 1.0) / ((len(demanded) - position)
                                                                             * len(model_skus))
            keep = (inst.unit_model == m) & (inst.unit_sku == sku)
            sub = replace(inst.restricted(keep), demand_rps=_only_model(inst.demand_rps, m))
            summary = solve_instance(sub, backend=backend, time_limit_s=share, gap=gap)
            if summary.status.has_solution:
                options.append((summary.objective, inst.skus[sku]))
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

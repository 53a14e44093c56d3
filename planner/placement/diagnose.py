"""Why a placement is infeasible: the demand that cannot be served and the constraint at fault.

Two passes, cheapest first.

1. **Pre-checks** per demanded (origin, model, class), from the instance alone:
   * *spot*: units of the model can carry the class, but only on spot, and the class is not
     spot-tolerant (or spot counts for nothing: ``spot_reliable_fraction`` 0) - typically
     ``capacity.tiers = ["spot"]``; naming the SKUs here would send the user to the wrong fix;
   * *quota*: no unit of the model can carry the class, but some (region, SKU) that could has a
     quota below one replica (a quota of 0, say): raising that quota is the fix, so it is named;
   * *no SKU in an allowed region can run the model*: no unit of the model anywhere that can
     carry the class (no offer, no profile, no capacity coefficient; the excluded candidates say
     which);
   * *residency*: units exist, but none in a zone the origin's traffic may be served in;
   * *latency*: units exist within residency, but all beyond the class's RTT budget.
2. **Elastic LP**: the LP relaxation with a slack e_omkt on every demand row, priced far above
   any rental. Slack left at the optimum means the demand cannot be served even
   fractionally, and the only remaining reason is capacity: the *quota* of the SKUs in the
   regions it may use (the quota rows of those regions are named). If no slack is left but
   the budget is exceeded by the cheapest fractional plan, the fault is the *budget*.

If the LP is feasible and within budget but the MILP is not, integer replicas are at fault
(quota rows that cannot hold whole replicas, or the redundancy minimum): the elastic MILP
is solved for a few seconds to find the demand it drops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from planner.errors import InfeasibleError
from planner.placement import highs_backend
from planner.placement.instance import PlacementInstance, QuotaBlocked
from planner.placement.problem import formulate

CAUSES = ("spot", "no_sku", "residency", "latency", "quota", "budget", "integer")
CAUSE_TEXT = {
    "spot": "spot only",
    "no_sku": "no SKU in an allowed region can run the model",
    "residency": "residency",
    "latency": "latency",
    "quota": "quota",
    "budget": "budget",
    "integer": "quota, redundancy or the pool minimum with whole replicas",
}
MAX_NAMED = 5


@dataclass(frozen=True)
class Finding:
    cause: str
    origin: str
    model: str
    traffic_class: str
    period: str
    rps: float
    detail: str

    def sentence(self) -> str:
        return (f"demand of origin {self.origin}, model {self.model}, class {self.traffic_class} in period "
                f"{self.period} ({self.rps:.4g} req/s) cannot be served: {CAUSE_TEXT[self.cause]}: {self.detail}")


def _peak(inst: PlacementInstance, o: int, m: int, k: int) -> tuple[str, float]:
    t = int(np.argmax(inst.demand_rps[o, m, k]))
    return inst.periods.labels[t], float(inst.demand_rps[o, m, k, t])


def precheck(inst: PlacementInstance) -> list[Finding]:
    """Structural causes, one finding per (origin, model, class) that has demand."""
    findings: list[Finding] = []
    steady = np.isfinite(inst.unit_price[:, 0]) | np.isfinite(inst.unit_price[:, 1])
    spot = inst.spot_usable() if "spot" in inst.tiers and inst.spot_fraction > 0 else np.zeros(inst.n_units, bool)
    for o, origin in enumerate(inst.origins):
        for m, model in enumerate(inst.models):
            for k, klass in enumerate(inst.classes):
                if inst.demand_rps[o, m, k].max() <= 0:
                    continue
                can = (inst.unit_model == m) & (inst.unit_cap_rps[:, k] > 0) & (steady | (spot & inst.spot_tolerant[k]))
                period, rps = _peak(inst, o, m, k)
                regions = set(inst.unit_region[can].tolist())
                if not regions:
                    cause, detail = _no_unit(inst, o, m, k, steady)
                    findings.append(Finding(cause, origin, model, klass, period, rps, detail))
                    continue
                allowed = [r for r in regions if inst.eligible[o, k, r]]
                if allowed:
                    continue
                residency_ok = [r for r in regions if inst.residency[o, r]]
                if not residency_ok:
                    where = ", ".join(sorted(inst.regions[r] for r in regions))
                    findings.append(Finding("residency", origin, model, klass, period, rps,
                                            f"{model} can run only in {where}, outside the zones {origin}'s "
                                            "traffic may be served in"))
                else:
                    nearest = min(residency_ok, key=lambda r: inst.rtt_ms[o, r])
                    findings.append(Finding("latency", origin, model, klass, period, rps,
                                            f"the nearest region that can run {model} within residency is "
                                            f"{inst.regions[nearest]} at {inst.rtt_ms[o, nearest]:g} ms, beyond the "
                                            f"{klass} latency budget of {inst.latency_budget_ms[k]:g} ms"))
    return findings


def _no_unit(inst: PlacementInstance, o: int, m: int, k: int, steady: np.ndarray) -> tuple[str, str]:
    """Why no unit can carry model m's class k at all: spot only, a quota below one replica, or no SKU."""
    model, klass = inst.models[m], inst.classes[k]
    carriers = (inst.unit_model == m) & (inst.unit_cap_rps[:, k] > 0)
    if carriers.any() and not (carriers & steady).any():  # only spot can carry it, and the class may not use it
        if inst.spot_tolerant[k]:
            why = f"spot_reliable_fraction is 0, so spot capacity counts for nothing, and {model} can run on spot only"
        elif not set(inst.tiers) - {"spot"}:
            why = (f"class {klass} is not spot_tolerant, and spot is the only tier enabled (capacity.tiers = "
                   "[" + ", ".join(f'"{t}"' for t in inst.tiers) + "])")
        else:
            where = ", ".join(sorted({inst.regions[r] for r in inst.unit_region[carriers]}))
            why = f"class {klass} is not spot_tolerant, and {model} is offered only on spot in {where}"
        return "spot", why
    blocked = [b for b in inst.quota_blocked if b.model == m and b.carries[k]]
    if blocked:
        eligible = [b for b in blocked if inst.eligible[o, k, b.region]]
        return "quota", f"every SKU that could run {model} has a GPU quota below one replica: " + _quotas(
            inst, eligible or blocked)
    reasons = sorted({reason for r, s, mm, reason in inst.excluded if mm == model})
    return "no_sku", "; ".join(reasons[:3]) or f"the scenario allows no SKU with a profile for {model}"


def _quotas(inst: PlacementInstance, blocked: list[QuotaBlocked]) -> str:
    """The quotas of ``blocked``, grouped by value, where it is set and the smallest replica they fall short of."""
    groups: dict[tuple[int, str, int], list[str]] = {}
    seen: set[tuple[int, int]] = set()
    for b in sorted(blocked, key=lambda b: (b.gpus, b.region, b.sku)):  # each (region, SKU) at its smallest replica
        if (b.region, b.sku) in seen:
            continue
        seen.add((b.region, b.sku))
        region, sku = inst.regions[b.region], inst.skus[b.sku]
        source = "scenario" if inst.quota_source.get(f"{region}|{sku}") == "scenario" else "catalog"
        groups.setdefault((int(inst.quota_gpus[b.region, b.sku]), source, b.gpus), []).append(f"{sku} in {region}")
    parts = []
    for (quota, source, gpus), names in groups.items():
        more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
        parts.append(f"a quota of {quota} GPUs (from the {source}), below the {gpus} GPU(s) of one replica, for "
                     f"{', '.join(names[:MAX_NAMED])}{more}")
    return "; ".join(parts)


DIAGNOSIS_NODE_LIMIT = 500
"""The elastic MILP only has to show which demand whole replicas cannot place; a bounded
search keeps the diagnosis the same on any machine."""


def elastic(inst: PlacementInstance, time_limit_s: float = 300.0, integer: bool = False) -> list[Finding]:
    """Demand the (elastic) LP or MILP leaves unserved, attributed to quota (or integer effects).

    The MILP stops at 1 % or ``DIAGNOSIS_NODE_LIMIT`` nodes; ``time_limit_s`` is a safety net.
    """
    milp = formulate(inst, budget=False, elastic=True, cuts=False)
    problem = milp if integer else milp.relaxed()
    outcome = highs_backend.solve(problem, time_limit_s=time_limit_s, gap=0.01, node_limit=DIAGNOSIS_NODE_LIMIT)
    if outcome.x is None:
        return []
    e = milp.cols["e"]
    slack = outcome.x[e.start:e.stop]
    findings: list[Finding] = []
    for i in np.argsort(-slack, kind="stable"):
        if slack[i] <= 1e-6 * max(1.0, float(milp.row_hi[milp.rows["demand"].start + i])):
            break
        o, m, k, t = (int(e.index[key][i]) for key in ("o", "m", "k", "t"))
        regions = np.flatnonzero(inst.eligible[o, k])
        units = np.flatnonzero((inst.unit_model == m) & np.isin(inst.unit_region, regions))
        quotas = sorted({f"{inst.skus[inst.unit_sku[u]]} in {inst.regions[inst.unit_region[u]]} "
                         f"({int(inst.quota_gpus[inst.unit_region[u], inst.unit_sku[u]])} GPUs)" for u in units})
        detail = (f"{slack[i]:.4g} req/s is left over when every allowed region is at its GPU quota; quotas: "
                  + "; ".join(quotas[:6]))
        findings.append(Finding("integer" if integer else "quota", inst.origins[o], inst.models[m], inst.classes[k],
                                inst.periods.labels[t], float(inst.demand_rps[o, m, k, t]), detail))
    return findings


def budget_finding(inst: PlacementInstance, lower_bound_usd: float) -> Finding:
    o, m, k = np.unravel_index(int(np.argmax(inst.demand_rps.max(axis=3))), inst.demand_rps.shape[:3])
    period, rps = _peak(inst, int(o), int(m), int(k))
    return Finding("budget", inst.origins[o], inst.models[m], inst.classes[k], period, rps,
                   f"the cheapest plan costs at least {lower_bound_usd:,.2f} USD, above the budget of "
                   f"{inst.budget_usd:,.2f} USD")


def raise_infeasible(findings: list[Finding]) -> NoReturn:
    """Raise InfeasibleError naming the first findings (and how many more there are)."""
    first = findings[0]
    lines = [f.sentence() for f in findings[:MAX_NAMED]]
    more = len(findings) - MAX_NAMED
    if more > 0:
        lines.append(f"... and {more} more")
    fixes = {
        "spot": "enable on_demand or reserved in capacity.tiers, or mark the class spot_tolerant = true if it may "
                "run on spot (with spot_reliable_fraction > 0)",
        "no_sku": "allow another SKU for the model in the scenario, or add a serving region that offers one",
        "residency": "widen the origin's residency or add a serving region in one of its zones",
        "latency": "raise the class's latency_budget_ms or add a serving region nearer to the origin",
        "quota": "raise the GPU quota (regions.serving.quotas or capacity.quotas) or allow more SKUs or regions",
        "budget": "raise capacity.budget_usd or remove it",
        "integer": "raise the quota of the SKUs named, or lower capacity.redundancy or capacity.min_replicas_per_pool",
    }
    raise InfeasibleError(f"placement is infeasible ({CAUSE_TEXT[first.cause]}):\n  - " + "\n  - ".join(lines),
                          where="placement", fix=fixes[first.cause])

"""The sentences that define a headline number beside it: why two figures that look alike differ or coincide.

* Fleet peak against the per-SKU peaks: the fleet's peak is the most GPUs in use in any one
  period; each SKU's peak is taken in its own busiest period, so their sum exceeds the
  fleet's peak whenever the SKUs peak in different periods.
* Objective against plan cost: the solver minimises rental + switching + a latency
  tie-break (``planner.placement.instance.LATENCY_PENALTY_USD_PER_REQUEST_MS``); the plan's
  cost is the rental alone (Σ usd of the plan rows).
* Lower bounds: what each one is (``planner.placement.bounds``) and, when two or more are
  equal, why.
* Ties: every option at the lowest cost is named, never one of them as "the cheapest".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from planner.report.inputs import money, number, pick

BOUND_DEFINITIONS = {
    "lp relaxation": "the placement problem with fractional replicas allowed (integrality dropped), per model",
    "solver bound": "the lower bound the integer search had proven when it stopped",
    "best proven": "the larger of the solver bound and the perfectly elastic bound",
    "perfectly elastic": "every period planned on its own, as if capacity followed demand hour by hour, with no "
                         "switching cost",
}
BOUND_DEFINITIONS["elastic"] = BOUND_DEFINITIONS["perfectly elastic"]
EQUAL_USD = 0.5
"""Two figures within half a dollar print the same and are treated as equal."""


def and_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def sku_peak_note(fleet_peak: float, by_sku: Mapping[str, float]) -> str:
    """Why the per-SKU peaks add up to more than the fleet's peak (or that they do not)."""
    total = float(sum(by_sku.values()))
    if len(by_sku) < 2:
        return "The fleet's peak is the most GPUs in use in any one period of the plan."
    if abs(total - fleet_peak) < 1e-9:
        return (f"The per-SKU peaks add up to the fleet's peak ({fleet_peak:g}): every SKU peaks in the same period "
                "as the fleet.")
    return (f"The per-SKU peaks add up to {total:g}, more than the fleet's peak of {fleet_peak:g}, because the SKUs "
            "peak in different periods: the fleet's peak is the most GPUs in use in any one period, each SKU's "
            "is taken in its own busiest period.")


def objective_note(meta: Mapping[str, Any], plan_usd: float) -> str | None:
    """What the solver's objective adds to the plan's cost (None when the objective is not reported)."""
    objective = number(pick(meta, "objective"))
    if objective is None:
        return None
    cost = pick(meta, "cost_usd", default={}) or {}
    switching = number(pick(cost, "switching")) or 0.0
    penalty = number(pick(pick(meta, "problem", default={}), "latency_penalty_usd_per_request_ms"))
    rest = objective - plan_usd - switching
    parts = [f"the rental the plan costs ({money(plan_usd)})"]
    if abs(switching) >= EQUAL_USD:
        parts.append(f"switching costs ({money(switching)}, for on-demand replicas started or stopped)")
    if abs(rest) >= EQUAL_USD:
        rate = f" ({penalty:g} USD per request per ms of round-trip time)" if penalty else ""
        parts.append(f"a latency tie-break of {money(rest)}{rate}, which only steers near-ties toward the users' "
                     "nearer regions")
    if len(parts) == 1:
        return f"The objective ({money(objective)}) equals the plan's cost: it is the rental alone."
    return (f"The objective ({money(objective)}) is what the solver minimises, not what the plan costs: "
            f"{and_list(parts)}.")


def _why_equal(names: set[str], plan_usd: float, value: float, others: Mapping[str, float]) -> str:
    reasons = []
    if "lp relaxation" in names and names & {"solver bound", "best proven"}:
        above = 100.0 * (plan_usd - value) / value if value else 0.0
        reasons.append("the LP relaxation is tight: the integer search proved no bound above it"
                       + (f", and the plan is within {above:.1f} % of it" if value else ""))
    if "best proven" in names:
        elastic = others.get("perfectly elastic")
        if "perfectly elastic" in names:
            reasons.append("best proven is the perfectly elastic bound, the larger of the two it takes")
        elif elastic is not None:
            reasons.append(f"best proven takes the solver bound, which is above the perfectly elastic bound "
                           f"({money(elastic)})")
        else:
            reasons.append("best proven is the solver bound (no perfectly elastic bound was computed)")
    if not reasons:
        reasons.append("two different relaxations reach the same figure")
    return "; ".join(reasons)


def bound_notes(bounds: Mapping[str, float], plan_usd: float) -> list[str]:
    """One sentence per lower bound saying what it is, then one per group of equal bounds saying why."""
    names = sorted(bounds, key=lambda n: (-bounds[n], n))
    notes = [f"{name} ({money(bounds[name])}): {BOUND_DEFINITIONS[name]}." for name in names
             if name in BOUND_DEFINITIONS]
    groups: list[list[str]] = []
    for name in names:
        if groups and abs(bounds[groups[-1][0]] - bounds[name]) < EQUAL_USD:
            groups[-1].append(name)
        else:
            groups.append([name])
    proven = [name for name in names if abs(bounds[name] - plan_usd) < EQUAL_USD]
    if proven:
        notes.append(f"{and_list(proven)} {'equals' if len(proven) == 1 else 'equal'} the plan's cost: no plan for "
                     "the same demand and capacity coefficients costs less, so this plan is optimal.")
    for group in (g for g in groups if len(g) > 1):
        value = bounds[group[0]]
        count = {2: "both", 3: "all three"}.get(len(group), f"all {len(group)}")
        others = {n: v for n, v in bounds.items() if n not in group}
        notes.append(f"{count.capitalize()} bounds ({and_list(group)}) equal {money(value)}: "
                     f"{_why_equal(set(group), plan_usd, value, others)}.")
    notes = [note.replace("lp relaxation", "LP relaxation") for note in notes]
    return [note[:1].upper() + note[1:] for note in notes]  # each note is a sentence


def lowest(costs: Mapping[str, float]) -> list[str]:
    """Every name whose cost is within ``EQUAL_USD`` of the lowest, sorted."""
    if not costs:
        return []
    best = min(costs.values())
    return sorted(name for name, usd in costs.items() if usd - best < EQUAL_USD)

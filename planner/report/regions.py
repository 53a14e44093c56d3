"""Why a serving region gets no capacity: latency, quota or price.

A serving region the plan leaves empty has one of three reasons, checked in this order:

* latency: no origin with demand may send any class there: its round-trip time is over every
  class's ``latency_budget_ms``, or the origins' residency excludes the region's zone;
* quota: no GPU quota (or no available offer on an enabled tier) for any SKU the models may
  run on;
* price: a region that does get capacity reaches the same origins within their latency
  budgets at a lower price per GPU-hour for the (SKU, tier) the plan uses most. When no region in use
  is cheaper per GPU-hour, the reason is still price: the solver found serving those origins
  from the regions in use cheaper overall (quotas, redundancy and tiers included).

:func:`idle_region_reason` decides from plain facts (:class:`RegionFacts`); :func:`region_facts`
derives those facts from the scenario, the catalog's offers and the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from planner.catalog import Catalog
from planner.placement.check import quota_limit_gpus
from planner.scenario import Scenario

IDLE_REGION_COLUMNS = ("region", "reason", "detail")


@dataclass(frozen=True)
class RegionFacts:
    """What decides whether a serving region can and should get capacity.

    ``reachable``: origins with demand whose residency and some class's latency budget allow
    the region. ``nearest``: the nearest origin with demand and its round-trip time in ms;
    ``budget_ms``: the largest latency budget of any class; ``residency_allows``: some origin
    with demand may be served in the region's zone. ``quota_gpus``: GPU quota summed over the
    SKUs the models may run on. ``prices``: ((SKU, tier), USD per GPU-hour) for the (SKU, tier)
    pairs the plan uses and the region offers, the plan's most used (in GPUs) first. ``gpus``: GPUs the plan puts there
    at its peak.
    """

    region: str
    reachable: tuple[str, ...]
    nearest: tuple[str, float] | None
    budget_ms: float
    residency_allows: bool
    quota_gpus: int
    prices: tuple[tuple[tuple[str, str], float], ...]
    gpus: float


def _cheaper(facts: RegionFacts, other: RegionFacts) -> tuple[tuple[str, str], float, float] | None:
    """((SKU, tier), other's price, this region's price) for the first pair both price, when other's is lower."""
    here = dict(facts.prices)
    for offer, price in other.prices:
        if offer in here:
            return (offer, price, here[offer]) if price < here[offer] else None
    return None


def idle_region_reason(facts: RegionFacts, regions: Sequence[RegionFacts]) -> tuple[str, str] | None:
    """(reason, detail) for a region without capacity, None for one with some (see the module docstring)."""
    if facts.gpus > 0:
        return None
    if not facts.reachable:
        if not facts.residency_allows:
            return "latency", "no origin with demand may be served in its zone (residency)"
        where = f": the nearest origin, {facts.nearest[0]}, is {facts.nearest[1]:g} ms away" if facts.nearest else ""
        return "latency", f"outside every class's latency budget (at most {facts.budget_ms:g} ms){where}"
    if facts.quota_gpus <= 0 or not facts.prices:
        return "quota", "no GPU quota or no available offer for any SKU the models may run on"
    used = [r for r in regions if r.gpus > 0 and r.region != facts.region and set(r.reachable) & set(facts.reachable)]
    options = sorted(((c[1], r.region), c, r) for r in used if (c := _cheaper(facts, r)) is not None)
    origins = ", ".join(facts.reachable)
    if options:
        _, ((sku, tier), price, here), other = options[0]
        shared = [o for o in facts.reachable if o in other.reachable]
        which = "the same origins" if shared == list(facts.reachable) else "of its origins"
        return "price", (f"{other.region} serves {which} ({', '.join(shared)}) within their latency budgets at "
                         f"${price:.2f} per {sku} GPU-hour ({tier}) against ${here:.2f} here")
    names = ", ".join(r.region for r in used) or "the regions in use"
    return "price", (f"its origins ({origins}) are served within their latency budgets from {names}, which the "
                     "solver found cheaper overall (quotas, redundancy and tiers included)")


def idle_regions(regions: Sequence[RegionFacts]) -> pd.DataFrame:
    """One row per region without capacity: region, reason, detail (sorted by region)."""
    rows = []
    for facts in sorted(regions, key=lambda r: r.region):
        found = idle_region_reason(facts, regions)
        if found is not None:
            rows.append({"region": facts.region, "reason": found[0], "detail": found[1]})
    return pd.DataFrame(rows, columns=list(IDLE_REGION_COLUMNS))


def region_facts(scenario: Scenario, catalog: Catalog, plan: pd.DataFrame,
                 origins: Sequence[str] | None = None) -> list[RegionFacts]:
    """The facts of every serving region of ``scenario``; ``origins``: those with demand (None: every origin)."""
    demanded = tuple(o for o in scenario.origin_names if origins is None or o in set(origins))
    gpus: dict[str, float] = {}
    used: list[tuple[str, str]] = []
    if len(plan):
        frame = plan.assign(period=plan["period"] if "period" in plan.columns else 0)
        peaks = frame.groupby(["period", "region"])["gpus"].sum().groupby(level="region").max()
        gpus = {str(r): float(v) for r, v in peaks.items()}
        by_offer = frame.groupby(["sku", "tier"])["gpus"].sum().sort_values(ascending=False, kind="stable")
        used = [(str(sku), str(tier)) for sku, tier in by_offer.index]
    allowed = sorted({s for m in scenario.model_names for s in scenario.allowed_skus(m)})
    offers = catalog.offers[catalog.offers["available"] & catalog.offers["tier"].isin(scenario.capacity.tiers)]
    budget = max(k.latency_budget_ms for k in scenario.classes)
    out = []
    for region in scenario.serving_keys:
        zone = scenario.serving_region(region).zone
        reachable = tuple(o for o in demanded
                          if any(region in scenario.eligible_serving(o, k) for k in scenario.class_names))
        nearest = min(((o, float(scenario.rtt_ms(o, region))) for o in demanded), key=lambda p: (p[1], p[0]),
                      default=None)
        here = offers[offers["region_key"] == region].groupby(["sku", "tier"])["usd_per_gpu_hour"].min()
        out.append(RegionFacts(
            region=region, reachable=reachable, nearest=nearest, budget_ms=float(budget),
            residency_allows=any(zone in scenario.origin(o).residency for o in demanded),
            quota_gpus=sum(quota_limit_gpus(scenario, catalog, region, s) for s in allowed),
            prices=tuple((offer, float(here[offer])) for offer in used if offer in here.index),
            gpus=gpus.get(region, 0.0)))
    return out

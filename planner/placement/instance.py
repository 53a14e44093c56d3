"""The numbers of one placement problem, gathered from scenario, catalog, profiles and capacity.

A *unit* u = (r, s, tp, m) is a way to run model m on replicas of ``tp`` GPUs of SKU s
in serving region r. It exists when the scenario allows s and tp for m, a profile sizes
that replica, the catalog offers s in r on at least one enabled tier, some class can run
on it (a capacity coefficient), and the quota admits at least one replica. Each
tensor-parallel degree of a (model, SKU) is its own unit: the program chooses among them,
except that a degree a smaller one dominates is left out (``_dominating_tp``; not where
the scenario charges switching on an on-demand offer, which makes the larger replica cheaper
to switch).
Every candidate that fails one of these is kept in ``excluded`` with the reason, for the
infeasibility diagnosis.

Quotas. The program has one quota row per (region, SKU) in GPUs, counting every tier
and every model. The value is the scenario's override (the region's own ``quotas``, else
``capacity.quotas``), else the catalog's ``quota_gpus``. The catalog states a quota per
(region, SKU, tier), but as a planning default that is the same on every tier; summing
the tiers would triple it, so the **largest** catalog quota of the enabled, available
tiers is used (on the bundled catalog this is the same as any one tier's figure).

Pools. A capacity table calibrated at several pool sizes gives each unit its steps (N_j, g_j):
from N_j steady replicas on, a replica carries g_j times its ``unit_cap_rps``
(:func:`planner.placement.capacity.pool_gains`; steps above the unit's replica limit are dropped).

Prices are USD per GPU-hour; a replica costs tp × price per hour. Renting happens in
instances of ``gpus_per_instance`` GPUs: packing replicas into whole instances is not
modelled (at most ``gpus_per_instance − 1`` idle GPUs per region, SKU and tier).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from planner.catalog import Catalog
from planner.contracts import TIER_NAMES as TIERS
from planner.placement.capacity import at_smallest_pool, pool_gains
from planner.placement.periods import Demand, Periods
from planner.scenario import Scenario

LATENCY_PENALTY_USD_PER_REQUEST_MS = 1e-8
"""Tie-breaking latency penalty: USD per request per ms of RTT (0.01 USD per million requests per ms).
It is a tiny fraction of any plan's cost, far below any solver gap, so it only breaks
near-ties toward the users."""


class QuotaBlocked(NamedTuple):
    """A (region, SKU, TP, model) that has an offer, a profile and capacity, left out only because its quota is
    below one replica: the infeasibility diagnosis names the quota, not the SKU, when nothing else can run."""

    region: int
    sku: int
    model: int
    gpus: int
    carries: tuple[bool, ...]  # [k] the class could run on it


@dataclass(frozen=True, eq=False)
class PlacementInstance:
    """Everything the MILP needs, as names and numpy arrays (no pandas, no files)."""

    origins: tuple[str, ...]
    regions: tuple[str, ...]
    skus: tuple[str, ...]
    models: tuple[str, ...]
    classes: tuple[str, ...]
    tiers: tuple[str, ...]
    periods: Periods
    demand_rps: np.ndarray  # [o, m, k, t]
    unit_region: np.ndarray  # [u] -> r
    unit_sku: np.ndarray  # [u] -> s
    unit_model: np.ndarray  # [u] -> m
    unit_gpus: np.ndarray  # [u] GPUs per replica (tensor-parallel degree)
    unit_price: np.ndarray  # [u, tier] USD per GPU-hour, NaN where not offered
    unit_cap_rps: np.ndarray  # [u, k] planned req/s per replica (utilisation cap applied), 0 = cannot run
    unit_max_replicas: np.ndarray  # [u] floor(quota / GPUs per replica)
    quota_gpus: np.ndarray  # [r, s]
    eligible: np.ndarray  # [o, k, r] bool: residency and latency allow
    residency: np.ndarray  # [o, r] bool: residency alone allows
    rtt_ms: np.ndarray  # [o, r]
    region_zone: tuple[str, ...]
    spot_tolerant: np.ndarray  # [k] bool
    latency_budget_ms: np.ndarray  # [k]
    spot_fraction: float
    redundancy: int
    budget_usd: float | None
    switching_cost_usd: float
    latency_penalty: float = LATENCY_PENALTY_USD_PER_REQUEST_MS
    excluded: tuple[tuple[str, str, str, str], ...] = ()  # (region, sku or "sku xTP", model, reason)
    quota_blocked: tuple[QuotaBlocked, ...] = ()  # the excluded whose only fault is a quota below one replica
    quota_source: dict[str, str] = field(default_factory=dict)
    quota_by_period: np.ndarray | None = None  # [r, s, t]: a residual quota that varies by period
    min_replicas_per_pool: int = 1  # replicas of any tier a serving (region, model) keeps in every period
    reserved_sustained_only: bool = False  # the horizon is shorter than the reserved term (``problem.py``)
    reserved_load_scale: np.ndarray | None = None  # [m] share of the sustained load reserved replicas may cover
    # (< 1 where a short history shows less than the forecast: ``reserved.py``); None: all of it
    unit_pool_size: np.ndarray | None = None  # [u, J] pool sizes N_j at which a replica carries more (0: none)
    unit_pool_gain: np.ndarray | None = None  # [u, J] g_j = c(N_j) / c(N_0), increasing in j (0: none)
    unit_pool_step: np.ndarray | None = None  # [u, T] a fixed step j per unit and period (-1: below the first);
    # None: the program chooses (``planner/placement/pool_steps.py``)

    def pool_gain_max(self) -> np.ndarray:
        """[u] the most a steady replica of the unit carries, in replicas at its ``unit_cap_rps`` (1: no pool gain)."""
        if self.unit_pool_gain is None or self.unit_pool_gain.shape[1] == 0:
            return np.ones(self.n_units)
        if self.unit_pool_step is not None:  # the largest gain of the fixed steps
            fixed: np.ndarray = np.where(self.unit_pool_step >= 0, np.take_along_axis(
                self.unit_pool_gain, np.maximum(self.unit_pool_step, 0), axis=1), 1.0).max(axis=1, initial=1.0)
            return fixed
        most: np.ndarray = np.maximum(self.unit_pool_gain.max(axis=1), 1.0)
        return most

    def has_pool_gains(self) -> bool:
        """Some unit carries more per replica in a larger pool."""
        return self.unit_pool_size is not None and bool((self.unit_pool_size > 0).any())

    @property
    def pool_floor(self) -> int:
        """Replicas a serving (region, model) keeps in every period: redundancy and the pool minimum."""
        return max(self.redundancy, self.min_replicas_per_pool, 1)

    def quota_per_period(self) -> np.ndarray:
        """Quota in GPUs per (region, SKU, period)."""
        if self.quota_by_period is not None:
            return self.quota_by_period
        repeated: np.ndarray = np.repeat(self.quota_gpus[:, :, None], self.n_periods, axis=2)
        return repeated

    @property
    def n_units(self) -> int:
        return len(self.unit_region)

    @property
    def n_periods(self) -> int:
        return len(self.periods)

    @property
    def total_hours(self) -> float:
        return float(self.periods.hours.sum())

    def unit_name(self, u: int) -> tuple[str, str, str, str]:
        return (self.regions[self.unit_region[u]], self.skus[self.unit_sku[u]], f"tp{int(self.unit_gpus[u])}",
                self.models[self.unit_model[u]])

    def tier_index(self, tier: str) -> int:
        return TIERS.index(tier)

    def offered(self, tier: str) -> np.ndarray:
        """[u] bool: the unit can be bought on this tier."""
        offered: np.ndarray = np.isfinite(self.unit_price[:, TIERS.index(tier)])
        return offered

    def spot_usable(self) -> np.ndarray:
        """[u] bool: spot is offered and some spot-tolerant class can run on the unit."""
        return self.offered("spot") & (self.unit_cap_rps[:, self.spot_tolerant] > 0).any(axis=1)

    def restricted(self, keep: np.ndarray) -> PlacementInstance:
        """The same instance with only the units where ``keep`` is true (e.g. one SKU)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for name in ("unit_region", "unit_sku", "unit_model", "unit_gpus", "unit_price", "unit_cap_rps",
                     "unit_max_replicas", "unit_pool_size", "unit_pool_gain", "unit_pool_step"):
            if fields[name] is not None:
                fields[name] = fields[name][keep]
        return PlacementInstance(**fields)


def _dominating_tp(gpus: int, caps: list[float], gain: float,
                   candidates: list[tuple[int, list[float], int, tuple[tuple[int, float], ...]]]) -> int | None:
    """A smaller TP degree of the same (region, SKU, model) that makes this one redundant, or None.

    Replicas of ``g`` GPUs, ``gpus / g`` of them in place of one replica of ``gpus``, use the
    same GPUs at the same price; when together they carry at least as much of every class,
    any plan with the larger replica is matched, at no more cost, by one without it. Degrees
    are powers of two, so ``gpus / g`` is whole. The switching cost is the exception: it is
    charged per on-demand replica started or stopped, and the smaller replicas switch
    ``gpus / g`` times as often, so ``build_instance`` does not apply the rule where the
    scenario charges switching and the unit can be bought on demand. Where pools of the larger
    replica carry more per replica (``gain`` at most), the smaller ones must match that most.
    """
    for g, other, _, _ in candidates:
        if g < gpus and gpus % g == 0 and all((gpus // g) * o >= c * gain
                                              for o, c in zip(other, caps, strict=True)):
            return g
    return None


def _catalog_quota(offers: pd.DataFrame, tiers: tuple[str, ...]) -> dict[tuple[str, str], int]:
    usable = offers[offers["available"] & offers["tier"].isin(tiers)]
    return {(str(r), str(s)): int(q) for (r, s), q in usable.groupby(["region_key", "sku"])["quota_gpus"].max().items()}


def build_instance(
    scenario: Scenario,
    demand: Demand,
    catalog: Catalog,
    profiles: pd.DataFrame,
    capacity: pd.DataFrame,
) -> PlacementInstance:
    """Assemble the placement instance; ``capacity`` holds raw max req/s per replica per (model, SKU, TP, class).

    ``profiles`` are the rows the scenario may deploy (``planner.scenario.usable_profiles``).
    """
    origins, regions = scenario.origin_names, scenario.serving_keys
    models, classes = scenario.model_names, scenario.class_names
    tiers = tuple(t for t in TIERS if t in scenario.capacity.tiers)
    skus = tuple(sorted({sku for m in models for sku in scenario.allowed_skus(m)}))
    quota, quota_source = _quotas(scenario, catalog, regions, skus, tiers)
    tables = _Tables.read(catalog, regions, tiers, profiles, capacity)
    steps_at = max((len(v) for v in tables.gains.values()), default=0)
    units = _Units(excluded=[])
    for mi, m in enumerate(models):
        for s in scenario.allowed_skus(m):
            for ri, r in enumerate(regions):
                _add_units(units, scenario, _Offer(ri, skus.index(s), mi, r, s, m), tables, quota)
    n_classes = len(classes)
    return PlacementInstance(
        origins=origins,
        regions=regions,
        skus=skus,
        models=models,
        classes=classes,
        tiers=tiers,
        periods=demand.periods,
        demand_rps=demand.rps,
        unit_region=np.asarray(units.region, dtype=np.int64),
        unit_sku=np.asarray(units.sku, dtype=np.int64),
        unit_model=np.asarray(units.model, dtype=np.int64),
        unit_gpus=np.asarray(units.gpus, dtype=np.int64),
        unit_price=np.asarray(units.price, dtype=float).reshape(-1, len(TIERS)),
        unit_cap_rps=np.asarray(units.cap, dtype=float).reshape(-1, n_classes),
        unit_max_replicas=np.asarray(units.most, dtype=np.int64),
        quota_gpus=quota,
        eligible=_eligible(scenario),
        residency=np.array([[scenario.serving_region(r).zone in scenario.origin(o).residency for r in regions]
                            for o in origins], dtype=bool),
        rtt_ms=np.array([[scenario.rtt_ms(o, r) for r in regions] for o in origins], dtype=float),
        region_zone=tuple(scenario.serving_region(r).zone for r in regions),
        spot_tolerant=np.array([scenario.traffic_class(k).spot_tolerant for k in classes], dtype=bool),
        latency_budget_ms=np.array([scenario.traffic_class(k).latency_budget_ms for k in classes], dtype=float),
        spot_fraction=scenario.capacity.spot_reliable_fraction,
        redundancy=scenario.capacity.redundancy,
        budget_usd=scenario.capacity.budget_usd,
        switching_cost_usd=scenario.capacity.switching_cost_usd,
        excluded=tuple(units.excluded),
        quota_blocked=tuple(units.quota_blocked),
        quota_source=quota_source,
        min_replicas_per_pool=scenario.capacity.min_replicas_per_pool,
        reserved_sustained_only=float(demand.periods.hours.sum()) < scenario.capacity.reserved_term_hours,
        unit_pool_size=np.array([[n for n, _ in steps] + [0] * (steps_at - len(steps)) for steps in units.steps],
                                dtype=np.int64).reshape(-1, steps_at) if steps_at else None,
        unit_pool_gain=np.array([[g for _, g in steps] + [0.0] * (steps_at - len(steps)) for steps in units.steps],
                                dtype=float).reshape(-1, steps_at) if steps_at else None,
    )


def _quotas(scenario: Scenario, catalog: Catalog, regions: tuple[str, ...], skus: tuple[str, ...],
            tiers: tuple[str, ...]) -> tuple[np.ndarray, dict[str, str]]:
    """GPU quota per (region, SKU) and where each came from ('scenario' or 'catalog'; module docstring)."""
    catalog_quota = _catalog_quota(catalog.offers[catalog.offers["region_key"].isin(regions)], tiers)
    quota = np.zeros((len(regions), len(skus)), dtype=np.int64)
    quota_source: dict[str, str] = {}
    for ri, r in enumerate(regions):
        for si, s in enumerate(skus):
            override = scenario.quota_gpus(r, s)
            quota[ri, si] = override if override is not None else catalog_quota.get((r, s), 0)
            quota_source[f"{r}|{s}"] = "scenario" if override is not None else "catalog"
    return quota, quota_source


def _eligible(scenario: Scenario) -> np.ndarray:
    """[o, k, r] bool: residency and the class's latency budget let origin o's class k go to region r."""
    origins, classes, regions = scenario.origin_names, scenario.class_names, scenario.serving_keys
    eligible = np.zeros((len(origins), len(classes), len(regions)), dtype=bool)
    for oi, o in enumerate(origins):
        for ki, k in enumerate(classes):
            for r in scenario.eligible_serving(o, k):
                eligible[oi, ki, regions.index(r)] = True
    return eligible


@dataclass(frozen=True)
class _Tables:
    """The input tables as lookups: prices of the enabled offers, TP degrees profiled, raw capacity."""

    price: dict[tuple[str, str, str], float]  # (region, SKU, tier) -> USD per GPU-hour
    tps: dict[tuple[str, str], list[int]]  # (model, SKU) -> profiled TP degrees
    cap: dict[tuple[str, str, int, str], float]  # (model, SKU, TP, class) -> max req/s per replica
    gains: dict[tuple[str, str, int], tuple[tuple[int, float], ...]]  # (model, SKU, TP) -> pool steps (N_j, g_j)

    @classmethod
    def read(cls, catalog: Catalog, regions: tuple[str, ...], tiers: tuple[str, ...], profiles: pd.DataFrame,
             capacity: pd.DataFrame) -> _Tables:
        offers = catalog.offers[catalog.offers["region_key"].isin(regions) & catalog.offers["available"]]
        offers = offers[offers["tier"].isin(tiers)]
        price = {(str(r), str(s), str(t)): float(p)
                 for r, s, t, p in offers[["region_key", "sku", "tier", "usd_per_gpu_hour"]].itertuples(index=False)}
        tps: dict[tuple[str, str], list[int]] = {}
        for m, s, g in profiles[["model", "sku", "tp_degree"]].itertuples(index=False):
            degrees = tps.setdefault((str(m), str(s)), [])
            if int(g) not in degrees:  # one unit per degree: rows of several engines would repeat it
                degrees.append(int(g))
        lone = capacity[at_smallest_pool(capacity)]
        cap = {
            (str(m), str(s), int(g), str(k)): float(v)
            for m, s, g, k, v in lone[["model", "sku", "tp_degree", "traffic_class", "max_rps_per_replica"]]
            .itertuples(index=False)
        }
        return cls(price, tps, cap, pool_gains(capacity))


@dataclass(frozen=True)
class _Offer:
    """One (model, SKU, region) whose TP degrees may become units, by index and by name."""

    ri: int
    si: int
    mi: int
    region: str
    sku: str
    model: str


@dataclass
class _Units:
    """The units found so far, column by column, and the candidates left out with their reasons."""

    excluded: list[tuple[str, str, str, str]]
    quota_blocked: list[QuotaBlocked] = field(default_factory=list)
    region: list[int] = field(default_factory=list)
    sku: list[int] = field(default_factory=list)
    model: list[int] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    price: list[list[float]] = field(default_factory=list)
    cap: list[list[float]] = field(default_factory=list)
    most: list[int] = field(default_factory=list)
    steps: list[tuple[tuple[int, float], ...]] = field(default_factory=list)


def _add_units(units: _Units, scenario: Scenario, offer: _Offer, tables: _Tables, quota: np.ndarray) -> None:
    """The units of one (model, SKU, region), one per TP degree kept; the rest go to ``excluded`` with a reason."""
    r, s, m = offer.region, offer.sku, offer.model
    unit_prices = [tables.price.get((r, s, t), np.nan) for t in TIERS]
    if not np.isfinite(unit_prices).any():
        units.excluded.append((r, s, m, f"no available offer of {s} in {r} on the enabled tiers"))
        return
    tps, cap = tables.tps, tables.cap
    if (m, s) not in tps:
        units.excluded.append((r, s, m, f"no profile of {m} on {s}"))
        return
    util = scenario.capacity.utilisation_cap
    limit = quota[offer.ri, offer.si]
    candidates = []
    for gpus in sorted(tps[(m, s)]):
        caps = [util * cap.get((m, s, gpus, k), 0.0) for k in scenario.class_names]
        if max(caps) <= 0:
            units.excluded.append((r, f"{s} x{gpus}", m,
                                   f"no capacity coefficient for {m} on {gpus} x {s} for any class"))
            continue
        most = int(limit // gpus)
        if most < 1:
            units.excluded.append((r, f"{s} x{gpus}", m, f"quota of {limit} {s} GPUs in {r} is below "
                                                         f"the {gpus} GPUs one replica of {m} needs"))
            units.quota_blocked.append(QuotaBlocked(offer.ri, offer.si, offer.mi, gpus, tuple(c > 0 for c in caps)))
            continue
        candidates.append((gpus, caps, most, tables.gains.get((m, s, gpus), ())))
    switching = scenario.capacity.switching_cost_usd > 0 and bool(np.isfinite(unit_prices[TIERS.index("on_demand")]))
    for gpus, caps, most, steps in candidates:
        gain = max((g for _, g in steps), default=1.0)
        smaller = None if switching else _dominating_tp(gpus, caps, gain, candidates)
        if smaller is not None:
            units.excluded.append((r, f"{s} x{gpus}", m, f"dominated by {smaller} x {s}: {gpus // smaller} of "
                                                         f"those replicas carry as much of every class on the "
                                                         "same GPUs"))
            continue
        units.region.append(offer.ri)
        units.sku.append(offer.si)
        units.model.append(offer.mi)
        units.gpus.append(gpus)
        units.price.append(unit_prices)
        units.cap.append(caps)
        units.most.append(most)
        units.steps.append(tuple((n, g) for n, g in steps if n <= most))

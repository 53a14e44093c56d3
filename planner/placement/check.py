"""Independent re-scoring of a placement plan: is it feasible, and what does it really cost?

``check_plan`` never looks at the solver's arrays. It rebuilds every fact it needs from
the inputs themselves (scenario, catalog, profiles, capacity table, demand) and the
three plan tables, so a bug in the problem builder or a backend's decoding shows up as
a violation instead of a wrong plan written to disk. It checks:

* shape: replicas are positive whole numbers, ``gpus = replicas × tp_degree``, every
  (model, SKU, TP) has a profile, every (region, SKU, tier) is an available offer on an
  enabled tier, every SKU and TP is allowed for its model; reserved replicas are the same in
  every period;
* demand: every (origin, model, class, period) gets its demand routed (req/s);
* residency and latency: every flow goes to a region in the origin's residency zones and
  within the class's RTT budget;
* capacity (Mélange form): per (region, SKU, TP, model, period),
  Σ_k steady load_k / cap_k ≤ n · g(n), n the reserved + on-demand replicas and g(n) the
  table's pool gain at n (1 without pool sizes; :func:`planner.placement.capacity.pool_gains`), and
  Σ_k spot load_k / (φ·cap_k) ≤ spot replicas, spot load only for spot-tolerant classes,
  and the loads add up to the flows arriving in the region;
* quotas: GPUs per (region, SKU, period) ≤ quota;
* redundancy: every (region, model) that carries traffic keeps ≥ N reserved + on-demand
  replicas in every period;
* pool floor: every (region, model) that carries traffic keeps ≥ ``min_replicas_per_pool``
  reserved + on-demand replicas in every period (when redundancy is 0 and all of its
  traffic may use spot: replicas of any tier in each period it carries traffic);
* cost: USD recomputed from the catalog price, per row and in total (rental + switching),
  and the budget.

Tolerances: rates in req/s (written to 6 decimals) are compared with an absolute 1e-5 plus
a relative 1e-6; capacity may be exceeded by at most 1e-4 of a replica, the order of a
solver's feasibility tolerance (1e-6) times the largest 1/capacity coefficient. Neither
could hide a missing replica.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planner.catalog import Catalog
from planner.contracts import FLOW_COLUMNS, LOAD_COLUMNS, PLAN_COLUMNS
from planner.placement.capacity import at_smallest_pool, pool_gain_at, pool_gains
from planner.placement.periods import Demand, Periods
from planner.scenario import Scenario

TOL_ABS = 1e-5
TOL_REL = 1e-6
TOL_REPLICA = 1e-4
MAX_LISTED = 20


@dataclass
class CheckReport:
    """Outcome of ``check_plan``: violations (empty when the plan is valid) and recomputed costs."""

    violations: list[str] = field(default_factory=list)
    rental_usd: float = 0.0
    switching_usd: float = 0.0
    checks: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def total_usd(self) -> float:
        return self.rental_usd + self.switching_usd

    def add(self, text: str) -> None:
        self.violations.append(text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "violations": self.violations[:MAX_LISTED],
            "violation_count": len(self.violations),
            "recomputed_rental_usd": round(self.rental_usd, 2),
            "recomputed_switching_usd": round(self.switching_usd, 2),
            "recomputed_total_usd": round(self.total_usd, 2),
            "checks": list(self.checks),
        }


def _close(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    close: np.ndarray = np.abs(np.asarray(a) - np.asarray(b)) <= TOL_ABS + TOL_REL * np.maximum(np.abs(a), np.abs(b))
    return close


def quota_limit_gpus(scenario: Scenario, catalog: Catalog, region: str, sku: str) -> int:
    """The GPU quota of (region, SKU): the scenario's override, else the catalog's on the enabled tiers."""
    override = scenario.quota_gpus(region, sku)
    if override is not None:
        return int(override)
    offers = catalog.offers
    rows = offers[(offers["region_key"] == region) & (offers["sku"] == sku) & offers["available"]
                  & offers["tier"].isin(scenario.capacity.tiers)]
    return int(rows["quota_gpus"].max()) if len(rows) else 0


def check_plan(
    plan: pd.DataFrame,
    flows: pd.DataFrame,
    loads: pd.DataFrame,
    *,
    scenario: Scenario,
    catalog: Catalog,
    profiles: pd.DataFrame,
    capacity: pd.DataFrame,
    demand: Demand,
) -> CheckReport:
    """Re-score a plan from the inputs alone; see the module docstring for every rule."""
    report = CheckReport(checks=("shape", "offers", "reserved_constant", "demand", "residency", "latency",
                                 "capacity", "spot_classes", "quota", "redundancy", "pool_floor", "cost",
                                 "budget"))
    for name, frame, columns in (("plan", plan, PLAN_COLUMNS), ("flows", flows, FLOW_COLUMNS),
                                 ("loads", loads, LOAD_COLUMNS)):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            report.add(f"{name} table lacks column(s) {', '.join(missing)}")
    if report.violations:
        return report
    _check_rows(report, plan, scenario, catalog, profiles, demand.periods)
    _check_reserved_constant(report, plan, demand.periods)
    report.switching_usd = _switching_usd(plan, scenario, demand.periods)
    _check_flows(report, flows, scenario, demand)
    _check_capacity(report, plan, loads, scenario, capacity)
    _check_flows_carried(report, flows, loads)
    _check_quotas(report, plan, scenario, catalog)
    _check_redundancy(report, plan, flows, scenario, demand.periods)
    _check_pool_floor(report, plan, flows, scenario, demand.periods)
    budget = scenario.capacity.budget_usd
    if budget is not None and report.total_usd > budget * (1 + 1e-9):
        report.add(f"cost {report.total_usd:.2f} USD exceeds the budget of {budget:.2f} USD")
    return report


def _check_rows(report: CheckReport, plan: pd.DataFrame, scenario: Scenario, catalog: Catalog,
                profiles: pd.DataFrame, periods: Periods) -> None:
    """Shape, offers and cost of every plan row; adds each row's recomputed rental to the report."""
    hours = dict(zip(periods.labels, periods.hours.tolist(), strict=True))
    profiled = {(str(m), str(s), int(g)) for m, s, g in profiles[["model", "sku", "tp_degree"]].itertuples(index=False)}
    price = {(r, s, t): float(p) for r, s, t, p, ok in
             catalog.offers[["region_key", "sku", "tier", "usd_per_gpu_hour", "available"]].itertuples(index=False)
             if ok}
    for row in plan.itertuples(index=False):
        where = f"plan row ({row.period}, {row.region}, {row.tp_degree} x {row.sku}, {row.model}, {row.tier})"
        if row.period not in hours:
            report.add(f"{where}: unknown period")
            continue
        if not (float(row.replicas).is_integer() and row.replicas > 0):
            report.add(f"{where}: replicas {row.replicas} is not a positive whole number")
        if row.tier not in scenario.capacity.tiers:
            report.add(f"{where}: tier {row.tier} is not enabled in the scenario")
        if row.sku not in scenario.allowed_skus(row.model):
            report.add(f"{where}: {row.sku} is not an allowed SKU for {row.model}")
        if row.tp_degree not in scenario.allowed_tps(row.model):
            report.add(f"{where}: TP {row.tp_degree} is not allowed for {row.model}")
        if (row.model, row.sku, int(row.tp_degree)) not in profiled:
            report.add(f"{where}: no profile of {row.model} on {row.tp_degree} x {row.sku}")
            continue
        gpus = int(row.tp_degree)
        if row.gpus != row.replicas * gpus:
            report.add(f"{where}: gpus {row.gpus} != {row.replicas} replicas × {gpus} GPUs")
        unit_price = price.get((row.region, row.sku, row.tier))
        if unit_price is None:
            report.add(f"{where}: no available catalog offer")
            continue
        usd = row.replicas * gpus * unit_price * hours[row.period]
        report.rental_usd += usd
        if abs(usd - row.usd) > 0.01 + 1e-6 * usd:
            report.add(f"{where}: usd {row.usd} but the catalog price gives {usd:.4f}")


def _check_reserved_constant(report: CheckReport, plan: pd.DataFrame, periods: Periods) -> None:
    reserved = plan[plan["tier"] == "reserved"]
    for (r, s, g, m), group in reserved.groupby(["region", "sku", "tp_degree", "model"]):
        counts = group.set_index("period")["replicas"].reindex(list(periods.labels)).fillna(0)
        if counts.nunique() > 1:
            report.add(f"reserved replicas of {m} on {g} x {s} in {r} change between periods "
                       f"({counts.min()}..{counts.max()})")


def _switching_usd(plan: pd.DataFrame, scenario: Scenario, periods: Periods) -> float:
    """Switching cost of the on-demand replicas started or stopped between consecutive periods."""
    cost = scenario.capacity.switching_cost_usd
    if not (cost > 0 and len(periods) > 1):
        return 0.0
    on_demand = plan[plan["tier"] == "on_demand"].pivot_table(
        index=["region", "sku", "tp_degree", "model"], columns="period", values="replicas", aggfunc="sum",
        fill_value=0)
    matrix = on_demand.reindex(columns=list(periods.labels), fill_value=0).to_numpy(dtype=float)
    steps = np.abs(np.diff(matrix, axis=1)).sum()
    if periods.cyclic:
        steps += np.abs(matrix[:, 0] - matrix[:, -1]).sum()
    return float(cost * steps)


def _check_flows(report: CheckReport, flows: pd.DataFrame, scenario: Scenario, demand: Demand) -> None:
    """Demand routed in full; every flow within its origin's residency and its class's RTT budget."""
    periods = demand.periods
    origins, models, classes = scenario.origin_names, scenario.model_names, scenario.class_names
    served = np.zeros_like(demand.rps)
    index = {label: i for i, label in enumerate(periods.labels)}
    for row in flows.itertuples(index=False):
        where = f"flow {row.origin}→{row.region} ({row.model}, {row.traffic_class}, {row.period})"
        if row.rps < -TOL_ABS:
            report.add(f"{where}: negative rate {row.rps}")
        origin = scenario.origin(row.origin)
        zone = scenario.serving_region(row.region).zone
        if zone not in origin.residency:
            report.add(f"{where}: region zone {zone!r} is outside the residency {list(origin.residency)}")
        rtt, budget = (scenario.rtt_ms(row.origin, row.region),
                       scenario.traffic_class(row.traffic_class).latency_budget_ms)
        if rtt > budget:
            report.add(f"{where}: RTT {rtt:g} ms exceeds the class budget {budget:g} ms")
        served[origins.index(row.origin), models.index(row.model), classes.index(row.traffic_class),
               index[row.period]] += row.rps
    short = np.argwhere(served < demand.rps - (TOL_ABS + TOL_REL * demand.rps))
    for o, m, k, t in short[:MAX_LISTED]:
        report.add(f"demand of ({origins[o]}, {models[m]}, {classes[k]}) in {periods.labels[t]} is "
                   f"{demand.rps[o, m, k, t]:.6g} req/s but only {served[o, m, k, t]:.6g} is routed")


def _check_capacity(report: CheckReport, plan: pd.DataFrame, loads: pd.DataFrame, scenario: Scenario,
                    capacity: pd.DataFrame) -> None:
    """Capacity in the Mélange form per (unit, period) and pool, and spot load for spot-tolerant classes only."""
    cap_cfg = scenario.capacity
    gains = pool_gains(capacity)
    capacity = capacity[at_smallest_pool(capacity)]  # the coefficients are the smallest pool size's
    cap = {(m, s, int(g), k): cap_cfg.utilisation_cap * float(v) for m, s, g, k, v in
           capacity[["model", "sku", "tp_degree", "traffic_class", "max_rps_per_replica"]].itertuples(index=False)}
    keys = ["period", "region", "sku", "tp_degree", "model"]
    steady_count = plan[plan["tier"].isin(["reserved", "on_demand"])].groupby(keys)["replicas"].sum().to_dict()
    spot_count = plan[plan["tier"] == "spot"].groupby(keys)["replicas"].sum().to_dict()
    live = loads[loads["rps"] > TOL_ABS]
    coefficient = np.array([cap.get((m, s, int(g), k), 0.0) for m, s, g, k in
                            live[["model", "sku", "tp_degree", "traffic_class"]].itertuples(index=False)])
    spot_pool = (live["pool"] == "spot").to_numpy()
    tolerant = {k: scenario.traffic_class(k).spot_tolerant for k in scenario.class_names}
    for row in live[(coefficient <= 0)].itertuples(index=False):
        report.add(f"load of {row.traffic_class} on {row.model}/{row.tp_degree} x {row.sku} in {row.region}: "
                   "no capacity coefficient")
    for row in live[spot_pool & ~live["traffic_class"].map(tolerant).fillna(False).to_numpy(dtype=bool)].itertuples(
            index=False):
        report.add(f"class {row.traffic_class} is on spot replicas of {row.model}/{row.tp_degree} x {row.sku} "
                   f"in {row.region} "
                   f"({row.period}) but is not spot-tolerant")
    usable = coefficient > 0
    share = live[usable].assign(
        used=live["rps"].to_numpy()[usable]
        / (coefficient[usable] * np.where(spot_pool[usable], cap_cfg.spot_reliable_fraction, 1.0)))
    for (period, region, sku, tp, model, pool), used in share.groupby([*keys, "pool"])["used"].sum().items():
        have = (spot_count if pool == "spot" else steady_count).get((period, region, sku, tp, model), 0)
        worth = have if pool == "spot" else have * pool_gain_at(gains.get((model, sku, int(tp)), ()), have)
        if used > worth + TOL_REPLICA:
            report.add(f"{model}/{tp} x {sku} in {region} ({period}): {pool} load needs {used:.6f} replicas, "
                       f"plan has {have:g}" + (f", worth {worth:.6f} in a pool of that size" if worth != have else ""))


def _check_flows_carried(report: CheckReport, flows: pd.DataFrame, loads: pd.DataFrame) -> None:
    """The loads of each (period, region, model, class) add up to the flows arriving there."""
    arriving = flows.groupby(["period", "region", "model", "traffic_class"])["rps"].sum()
    carried = loads.groupby(["period", "region", "model", "traffic_class"])["rps"].sum()
    both = pd.concat([arriving.rename("in"), carried.rename("out")], axis=1).fillna(0.0)
    bad = both[~_close(both["in"].to_numpy(), both["out"].to_numpy())]
    for key, row in bad.head(MAX_LISTED).iterrows():
        report.add(f"flows into {key} total {row['in']:.6g} req/s but loads carry {row['out']:.6g}")


def _check_quotas(report: CheckReport, plan: pd.DataFrame, scenario: Scenario, catalog: Catalog) -> None:
    gpus = plan.groupby(["period", "region", "sku"])["gpus"].sum()
    quotas = {(region, sku): quota_limit_gpus(scenario, catalog, region, sku)  # a catalog scan each: once per pair
              for region, sku in {(region, sku) for _, region, sku in gpus.index}}
    for (period, region, sku), used in gpus.items():
        quota = quotas[region, sku]
        if used > quota:
            report.add(f"{used} {sku} GPUs in {region} ({period}) exceed the quota of {quota}")


def _check_redundancy(report: CheckReport, plan: pd.DataFrame, flows: pd.DataFrame, scenario: Scenario,
                      periods: Periods) -> None:
    """Every (region, model) that carries traffic keeps N reserved + on-demand replicas in every period."""
    redundancy = scenario.capacity.redundancy
    if redundancy <= 0:
        return
    steady = plan[plan["tier"].isin(["reserved", "on_demand"])].groupby(["region", "model", "period"])[
        "replicas"].sum()
    serving = flows[flows["rps"] > TOL_ABS][["region", "model"]].drop_duplicates()
    for region, model in serving.itertuples(index=False):
        for label in periods.labels:
            count = int(steady.get((region, model, label), 0))
            if count < redundancy:
                report.add(f"{region} serves {model} but has {count} reserved/on-demand replicas in {label} "
                           f"(redundancy {redundancy})")
                break


def _check_pool_floor(report: CheckReport, plan: pd.DataFrame, flows: pd.DataFrame, scenario: Scenario,
                      periods: Periods) -> None:
    """Every (region, model) that carries traffic keeps the pool minimum (module docstring)."""
    floor = scenario.capacity.min_replicas_per_pool
    steady = plan[plan["tier"].isin(["reserved", "on_demand"])].groupby(["region", "model", "period"])[
        "replicas"].sum()
    every_tier = plan.groupby(["region", "model", "period"])["replicas"].sum()
    live = flows[flows["rps"] > TOL_ABS]
    tolerant = {k.name for k in scenario.classes if k.spot_tolerant}
    for (region, model), rows in live.groupby(["region", "model"]):
        if scenario.capacity.redundancy == 0 and set(rows["traffic_class"]) <= tolerant:
            labels, counts, what = sorted(set(rows["period"])), every_tier, ""  # only where and when it serves
        else:
            labels, counts, what = list(periods.labels), steady, "reserved/on-demand "
        for label in labels:
            count = int(counts.get((region, model, label), 0))
            if count < floor:
                report.add(f"{region} serves {model} but has {count} {what}replicas in {label} "
                           f"(min_replicas_per_pool {floor})")
                break

"""From solution vectors to the plan tables, and the result object the command renders.

A solution of one or several MILPs (one per model block) is first turned into a *fleet*
in the instance's index space: replicas per (unit, tier, period), flows per
(origin, region, model, class, period) and loads per (unit, pool, class, period). Replicas
of a (region, model) that carries no traffic at all are dropped: they only add cost, and
the redundancy rule applies only to regions that serve a model.

The plan table has one row per (period, region, SKU, TP degree, model, tier) with replicas > 0;
reserved replicas are repeated in every period, each row priced for that period's hours,
so summing ``usd`` gives the rental cost of the horizon (switching cost is in the JSON).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planner.contracts import FLOW_COLUMNS, LOAD_COLUMNS, PLAN_COLUMNS
from planner.contracts import TIER_NAMES as TIERS
from planner.placement.instance import PlacementInstance
from planner.placement.milp import Milp
from planner.placement.status import SolveStatus

RPS_DECIMALS = 6
USD_DECIMALS = 4


@dataclass
class Fleet:
    replicas: np.ndarray  # [u, tier, t] integers
    flows: np.ndarray  # [n, 6]: o, r, m, k, t, rps
    loads: np.ndarray  # [n, 5]: u, pool (0 steady, 1 spot), k, t, rps


def empty_fleet(inst: PlacementInstance) -> Fleet:
    return Fleet(np.zeros((inst.n_units, len(TIERS), inst.n_periods), dtype=np.int64),
                 np.zeros((0, 6)), np.zeros((0, 5)))


def add_solution(fleet: Fleet, milp: Milp, x: np.ndarray) -> Fleet:
    """Add one block's solution to the fleet (blocks have disjoint units and demand)."""
    T = milp.instance.n_periods
    rep = fleet.replicas.copy()
    for name, tier in (("R", 0), ("D", 1), ("S", 2)):
        block = milp.cols.get(name)
        if block is None or block.size == 0:
            continue
        values = np.rint(x[block.start:block.stop]).astype(np.int64)
        if name == "R":
            rep[block.index["u"], tier, :] = values[:, None] * np.ones(T, dtype=np.int64)
        else:
            rep[block.index["u"], tier, block.index["t"]] = values
    parts = [fleet.flows]
    f = milp.cols["f"]
    if f.size:
        parts.append(np.column_stack([f.index[k] for k in ("o", "r", "m", "k", "t")] + [x[f.start:f.stop]]))
    loads = [fleet.loads]
    for name, pool in (("a", 0), ("b", 1)):
        block = milp.cols.get(name)
        if block is not None and block.size:
            loads.append(np.column_stack([block.index["u"], np.full(block.size, pool), block.index["k"],
                                          block.index["t"], x[block.start:block.stop]]))
    return Fleet(rep, np.vstack(parts), np.vstack(loads))


def drop_idle(inst: PlacementInstance, fleet: Fleet) -> Fleet:
    """Remove replicas of (region, model) pairs that carry no traffic in any period."""
    busy = np.zeros((len(inst.regions), len(inst.models)), dtype=bool)
    live = fleet.flows[fleet.flows[:, 5] > 1e-9]
    busy[live[:, 1].astype(int), live[:, 2].astype(int)] = True
    keep = busy[inst.unit_region, inst.unit_model]
    replicas = fleet.replicas * keep[:, None, None]
    return Fleet(replicas, fleet.flows, fleet.loads)


def fleet_cost(inst: PlacementInstance, fleet: Fleet) -> tuple[float, float]:
    """(rental USD, switching USD) of a fleet, from the instance's prices."""
    hourly = inst.unit_gpus[:, None] * np.nan_to_num(inst.unit_price)  # [u, tier]
    rental = float(np.einsum("uit,ui,t->", fleet.replicas, hourly, inst.periods.hours))
    switching = 0.0
    if inst.switching_cost_usd > 0 and inst.n_periods > 1:
        on_demand = fleet.replicas[:, 1, :].astype(float)
        steps = np.abs(np.diff(on_demand, axis=1)).sum()
        if inst.periods.cyclic:
            steps += np.abs(on_demand[:, 0] - on_demand[:, -1]).sum()
        switching = inst.switching_cost_usd * float(steps)
    return rental, switching


def plan_frames(inst: PlacementInstance, fleet: Fleet) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The plan, flows and loads tables, sorted for byte-identical output."""
    labels = inst.periods.labels
    u, tier, t = np.nonzero(fleet.replicas)
    count = fleet.replicas[u, tier, t]
    gpus = count * inst.unit_gpus[u]
    usd = gpus * inst.unit_price[u, tier] * inst.periods.hours[t]
    plan = pd.DataFrame({
        "period": [labels[i] for i in t],
        "region": [inst.regions[i] for i in inst.unit_region[u]],
        "sku": [inst.skus[i] for i in inst.unit_sku[u]],
        "tp_degree": inst.unit_gpus[u].astype(np.int64),
        "model": [inst.models[i] for i in inst.unit_model[u]],
        "tier": [TIERS[i] for i in tier],
        "replicas": count.astype(np.int64),
        "gpus": gpus.astype(np.int64),
        "usd": np.round(usd, USD_DECIMALS),
        "_t": t, "_tier": tier,
    }).sort_values(["_t", "region", "sku", "tp_degree", "model", "_tier"], kind="stable").drop(columns=["_t", "_tier"])
    live = fleet.flows[fleet.flows[:, 5] > 1e-9]
    flows = pd.DataFrame({
        "period": [labels[int(i)] for i in live[:, 4]],
        "origin": [inst.origins[int(i)] for i in live[:, 0]],
        "region": [inst.regions[int(i)] for i in live[:, 1]],
        "model": [inst.models[int(i)] for i in live[:, 2]],
        "traffic_class": [inst.classes[int(i)] for i in live[:, 3]],
        "rps": np.round(live[:, 5], RPS_DECIMALS),
        "_t": live[:, 4].astype(int),
    }).sort_values(["_t", "origin", "region", "model", "traffic_class"], kind="stable").drop(columns="_t")
    busy = fleet.loads[fleet.loads[:, 4] > 1e-9]
    units = busy[:, 0].astype(int)
    loads = pd.DataFrame({
        "period": [labels[int(i)] for i in busy[:, 3]],
        "region": [inst.regions[i] for i in inst.unit_region[units]],
        "sku": [inst.skus[i] for i in inst.unit_sku[units]],
        "tp_degree": inst.unit_gpus[units].astype(np.int64),
        "model": [inst.models[i] for i in inst.unit_model[units]],
        "pool": np.where(busy[:, 1] > 0, "spot", "steady"),
        "traffic_class": [inst.classes[int(i)] for i in busy[:, 2]],
        "rps": np.round(busy[:, 4], RPS_DECIMALS),
        "_t": busy[:, 3].astype(int),
    }).sort_values(["_t", "region", "sku", "tp_degree", "model", "pool", "traffic_class"], kind="stable"
                   ).drop(columns="_t")
    return (plan.loc[:, list(PLAN_COLUMNS)].reset_index(drop=True),
            flows.loc[:, list(FLOW_COLUMNS)].reset_index(drop=True),
            loads.loc[:, list(LOAD_COLUMNS)].reset_index(drop=True))


@dataclass
class PlacementResult:
    """What ``place_plan`` returns: the plan tables, the JSON-able metadata and the status."""

    plan: pd.DataFrame
    flows: pd.DataFrame
    loads: pd.DataFrame
    meta: dict[str, Any]
    status: SolveStatus
    periods: pd.DataFrame = field(default_factory=pd.DataFrame)

    def summary_rows(self) -> list[dict[str, Any]]:
        """GPUs and USD by region, SKU and tier: peak GPUs over the periods, GPU-hours and USD."""
        if self.plan.empty:
            return []
        hours = dict(zip(self.periods["period"], self.periods["hours"], strict=True)) if len(self.periods) else {}
        frame = self.plan.assign(gpu_hours=self.plan["gpus"] * self.plan["period"].map(hours).fillna(1.0))
        per_period = frame.groupby(["region", "sku", "tier", "period"])["gpus"].sum()
        peak = per_period.groupby(level=[0, 1, 2]).max().rename("gpus_peak")
        totals = frame.groupby(["region", "sku", "tier"])[["gpu_hours", "usd"]].sum()
        table = pd.concat([peak, totals], axis=1).reset_index()
        order = {name: i for i, name in enumerate(TIERS)}
        table = table.assign(_tier=table["tier"].map(order)).sort_values(["region", "sku", "_tier"])
        return [
            {"region": r.region, "sku": r.sku, "tier": r.tier, "gpus_peak": int(r.gpus_peak),
             "gpu_hours": round(float(r.gpu_hours), 1), "usd": round(float(r.usd), 2)}
            for r in table.itertuples(index=False)
        ]

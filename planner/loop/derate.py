r"""Correcting capacity coefficients from the simulator's SLO misses.

The placement program sizes each pool so that Σ_k f_k / cap_{s,m,k} ≤ replicas (Mélange
form), with cap from the calibration. A pool that still misses a class's p99 SLO in the
simulation carries more of that class per replica than the class tolerates there (the
calibration saw one replica at the scenario's class mix; the real pool has another mix,
another size and routed demand). The correction lowers cap_{u,m,k} for every deployment
u = (SKU, TP degree) of the failing (region, model) pool and the failing class k, by the
measured shortfall:

    shortfall = p99_measured / p99_target         (the worst over the metrics the class sets for
                                                   the model, of TTFT, TPOT and e2e; > 1 on a miss)
    cap' = cap · clip(1 / shortfall, MIN_FACTOR, MAX_FACTOR)

A metric the class does not set (no target in the simulator's row) is never a miss.
Latency grows faster than linearly near saturation (ρ/(1 − ρ) for the queueing part),
so 1 / shortfall removes at least the load that the miss suggests and usually more
than needed near the knee; MAX_FACTOR = 0.95 guarantees progress (every miss costs at
least 5 % of the coefficient) and MIN_FACTOR = 0.5 stops one noisy miss from halving a
fleet's capacity twice over. A miss with an infinite p99 (more than 1 % of the class's
requests rejected by admission control) has no finite shortfall and takes MIN_FACTOR.
A table calibrated at several pool sizes has one row per size; every size of the coefficient
takes the same factor, so capacity still grows with the pool. The capacity table is per
(model, SKU, TP, class), not per region, so a correction found
in one region applies to the model's pools everywhere: conservative, never optimistic.
When several windows or regions miss the same (model, SKU, TP, class), the largest
correction wins. Every change is returned, so a round records what changed and why.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from planner.slo import SLO_METRICS, p99_column, target_column

DERATED = " · derated by the loop"
MIN_FACTOR = 0.5
MAX_FACTOR = 0.95


@dataclass(frozen=True)
class Miss:
    """One class that missed its SLO in one window: by how much, on which metric."""

    window: str
    period: str
    region: str
    model: str
    traffic_class: str
    metric: str
    p99_ms: float
    target_ms: float
    shortfall: float
    rejected_fraction: float
    units: tuple[tuple[str, int], ...]  # (SKU, TP degree) of each deployment in the pool

    def describe(self) -> str:
        measured = "rejections (p99 infinite)" if not math.isfinite(self.p99_ms) else f"{self.p99_ms:,.0f} ms"
        return (f"{self.window} {self.period}: {self.region} / {self.model} / {self.traffic_class} {self.metric} p99 "
                f"{measured} vs {self.target_ms:,.0f} ms")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["units"] = [f"{sku} x{tp}" for sku, tp in self.units]
        out["p99_ms"] = self.p99_ms if math.isfinite(self.p99_ms) else None
        out["shortfall"] = self.shortfall if math.isfinite(self.shortfall) else None
        return out


def _value(row: dict[str, Any], column: str) -> float:
    """A finite number, or +inf for a missing, non-numeric or NaN value (a p99 the simulator could not give)."""
    value: Any = row.get(column)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.inf
    return math.inf if math.isnan(number) else number


def _targets(row: dict[str, Any]) -> dict[str, float]:
    """metric -> target for the metrics the row's class sets (an empty, NaN or absent target is not set)."""
    out = {}
    for metric in SLO_METRICS:
        target = _value(row, target_column(metric))
        if math.isfinite(target):
            out[metric] = target
    return out


def worst_metric(row: dict[str, Any]) -> tuple[float, str, float, float]:
    """(shortfall, metric, p99, target) of the set metric furthest over its target.

    A row marked missed with no metric over its target (the simulator's own verdict) counts
    as rejections on its first set metric: an infinite shortfall.
    """
    targets = _targets(row)
    worst: tuple[float, str, float, float] | None = None
    for metric, target in targets.items():
        measured = _value(row, p99_column(metric))
        if measured <= target:
            continue
        shortfall = measured / target if target > 0 else math.inf
        if worst is None or shortfall > worst[0]:
            worst = (shortfall, metric, measured, target)
    if worst is None:
        metric = next(iter(targets), SLO_METRICS[0])
        worst = (math.inf, metric, math.inf, targets.get(metric, math.inf))
    return worst


def slo_ratio(row: dict[str, Any]) -> float:
    """The largest p99 / target over the metrics the row's class sets; +inf when it sets none or a p99 is unknown."""
    targets = _targets(row)
    if not targets:
        return math.inf
    return max(_value(row, p99_column(metric)) / target if target > 0 else math.inf
               for metric, target in targets.items())


def find_misses(per_class: pd.DataFrame, window: str, period: str,
                pool_units: dict[tuple[str, str], tuple[tuple[str, int], ...]]) -> list[Miss]:
    """Every (region, model, class) row with traffic whose SLO is missed, on its worst metric.

    A row's own ``window`` (the name of the window its pool stands for) wins over ``window``.
    """
    misses = []
    for row in per_class.to_dict("records"):
        if bool(row.get("slo_met", True)):
            continue
        worst = worst_metric(row)
        region, model = str(row["region"]), str(row["model"])
        misses.append(Miss(str(row.get("window") or window), period, region, model, str(row["traffic_class"]),
                           worst[1], worst[2], worst[3],
                           worst[0], float(row.get("rejected_fraction") or 0.0),
                           pool_units.get((region, model), ())))
    return misses


def factor_for(shortfall: float) -> float:
    """The multiplier applied to a coefficient for a miss of this size (see the module docstring)."""
    if not math.isfinite(shortfall):
        return MIN_FACTOR
    return min(MAX_FACTOR, max(MIN_FACTOR, 1.0 / shortfall))


def derate(table: pd.DataFrame, misses: list[Miss]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The capacity table with each missed (model, SKU, TP, class) coefficient lowered; and the changes made."""
    factors: dict[tuple[str, str, int, str], tuple[float, Miss]] = {}
    for miss in misses:
        factor = factor_for(miss.shortfall)
        for sku, tp in miss.units:
            key = (miss.model, sku, int(tp), miss.traffic_class)
            if key not in factors or factor < factors[key][0]:
                factors[key] = (factor, miss)
    out = table.copy()
    changes = []
    keys = list(zip(out["model"].astype(str), out["sku"].astype(str), out["tp_degree"].astype(int),
                    out["traffic_class"].astype(str), strict=True))
    pools = pool_sizes(out)
    for index, key in enumerate(keys):
        if key not in factors:
            continue
        factor, miss = factors[key]
        before = float(out.iloc[index]["max_rps_per_replica"])
        after = round(before * factor, 6)
        out.iloc[index, out.columns.get_loc("max_rps_per_replica")] = after
        changes.append({"kind": "derate", "model": key[0], "sku": key[1], "tp_degree": key[2],
                        "traffic_class": key[3], "pool_replicas": pools[index],
                        "before_rps": before, "after_rps": after, "factor": round(factor, 4),
                        "window": f"{miss.window} {miss.period}",
                        "p99_over_slo": round(miss.shortfall, 4) if math.isfinite(miss.shortfall) else None,
                        "because": miss.describe()})
    if "source" in out.columns and changes:
        changed = {(c["model"], c["sku"], c["tp_degree"], c["traffic_class"]) for c in changes}
        out["source"] = [text if key not in changed or str(text).endswith(DERATED) else f"{text}{DERATED}"
                         for key, text in zip(keys, out["source"], strict=True)]
    return out, sorted(changes, key=change_order)


def pool_sizes(table: pd.DataFrame) -> list[int]:
    """Each row's pool size (1 for a table calibrated at one size)."""
    if "pool_replicas" not in table.columns:
        return [1] * len(table)
    return [int(n) for n in table["pool_replicas"]]


def change_order(change: dict[str, Any]) -> tuple[str, str, int, str, int]:
    return (change["model"], change["sku"], change["tp_degree"], change["traffic_class"],
            int(change.get("pool_replicas", 1)))

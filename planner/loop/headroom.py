r"""Taking back headroom: raising a coefficient whose pools sit far below their SLOs, and backing off.

Derating (:mod:`planner.loop.derate`) only lowers coefficients, and it lowers cap_{u,m,k}
for the model's pools everywhere, so a pool the correction did not need can keep capacity
that its p99 never uses. The loop raises cap_{u,m,k} of a deployment u = (SKU, TP degree)
of model m for class k when all of these hold:

* every (region, m) pool that ran u in a window it was replayed in met every SLO of every
  class in every window of the round;
* in each of those pools, class k's p99 is below RAISE_BELOW = 0.5 of its SLO (the largest
  p99 / target over the metrics the class sets) in every window where k had traffic: the
  pool's own peak and trough, and the fleet peak when the pool was replayed there;
* the coefficient is below its calibrated value (the loop's starting table) and has never
  been backed off. A table calibrated at several pool sizes raises each size's row towards
  its own calibrated value, so a fleet-sized pool may come back up to what its size supports.

The step is bounded: cap' = min(calibrated, cap · RAISE_STEP) with RAISE_STEP = 1.15. At
half the SLO a pool is far from the knee of its latency curve, so 15 % more load per
replica does not cross it in one step, and the next round checks the new plan before any
further step.

Back-off: a raised coefficient that misses in a later round is set back to exactly the
value it had before its latest raise, a value whose plan met every SLO, instead of being
derated by the shortfall (a raise that costs the pool a replica shows rejections, and
derating by those would cut far below what was already proven), and it is never raised
again. If it misses again, the next round derates it like any other. This makes the loop
converge instead of oscillating: each coefficient has at most one run of raises (they stop
at the calibrated value, and the first miss after a raise ends them for good), and derates
remain bounded by the rounds, as before. The loop is settled when no class misses and no
coefficient qualifies for a raise. A table with several pool sizes keeps each coefficient
non-decreasing in the pool size after every round (:func:`non_decreasing_in_pool`). Every
change (derate, raise, back-off) is returned with its unit, values, window and p99 / SLO ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from planner.loop.derate import Miss, change_order, derate, pool_sizes, slo_ratio
from planner.loop.windows import Pool

RAISE_BELOW = 0.5
RAISE_STEP = 1.15

Key = tuple[str, str, int, str]
"""A capacity coefficient: (model, SKU, TP degree, traffic class)."""
Row = tuple[Key, int]
"""One row of the table: a coefficient at one pool size."""
Unit = tuple[str, int]
"""A deployment: (SKU, TP degree)."""


@dataclass(frozen=True)
class Check:
    """One class of one pool checked in one window, with traffic: its p99 as a share of its SLO."""

    window: str
    period: str
    region: str
    model: str
    traffic_class: str
    ratio: float

    def describe(self) -> str:
        return (f"{self.window} {self.period}: {self.region} / {self.model} / {self.traffic_class} p99 at "
                f"{self.ratio:.2f} of its SLO")


def _has_traffic(row: dict[str, Any]) -> bool:
    """Whether the simulated class saw requests (a class without traffic has no p99 to judge)."""
    value = row.get("arrived", row.get("offered_rps"))
    try:
        return value is None or float(value) > 0
    except (TypeError, ValueError):
        return True


def checks_of(slo: pd.DataFrame) -> list[Check]:
    """Every simulated (window, pool, class) row with traffic, as a :class:`Check`."""
    return [Check(str(row.get("window", "")), str(row.get("period", "")), str(row["region"]), str(row["model"]),
                  str(row["traffic_class"]), slo_ratio(row))
            for row in slo.to_dict("records") if _has_traffic(row)]


def raise_candidates(slo: pd.DataFrame, pool_units: dict[Pool, set[Unit]],
                     misses: list[Miss]) -> dict[Key, Check]:
    """Every coefficient whose pools all sit below RAISE_BELOW of the SLO in every window; with its highest check.

    ``pool_units`` holds the (SKU, TP) deployments of each pool over the periods it was replayed in.
    """
    failing = {(m.region, m.model) for m in misses}
    by_pool_class: dict[tuple[Pool, str], list[Check]] = {}
    for check in checks_of(slo):
        by_pool_class.setdefault(((check.region, check.model), check.traffic_class), []).append(check)
    verdict: dict[Key, Check | None] = {}
    for (pool, klass), checks in sorted(by_pool_class.items()):
        highest = max(checks, key=lambda c: c.ratio)
        fits = pool not in failing and highest.ratio < RAISE_BELOW
        for sku, tp in sorted(pool_units.get(pool, set())):
            key = (pool[1], sku, int(tp), klass)
            known = verdict.get(key, highest)
            if not fits or known is None:
                verdict[key] = None
            else:
                verdict[key] = highest if highest.ratio >= known.ratio else known
    blocked = {(model, sku, int(tp)) for region, model in failing for sku, tp in pool_units.get((region, model), ())}
    return {key: check for key, check in verdict.items() if check is not None and key[:3] not in blocked}


def _keys(table: pd.DataFrame) -> list[Key]:
    return list(zip(table["model"].astype(str), table["sku"].astype(str), table["tp_degree"].astype(int),
                    table["traffic_class"].astype(str), strict=True))


def _rows(table: pd.DataFrame) -> list[Row]:
    return list(zip(_keys(table), pool_sizes(table), strict=True))


def _change(kind: str, row: Row, before: float, after: float, window: str, ratio: float | None,
            because: str) -> dict[str, Any]:
    key, pool = row
    return {"kind": kind, "model": key[0], "sku": key[1], "tp_degree": key[2], "traffic_class": key[3],
            "pool_replicas": pool, "before_rps": before, "after_rps": after,
            "factor": round(after / before, 4) if before else None,
            "window": window, "p99_over_slo": None if ratio is None or not math.isfinite(ratio) else round(ratio, 4),
            "because": because}


@dataclass
class Headroom:
    """What the loop remembers across rounds to raise and back off (see the module docstring)."""

    calibrated: dict[Row, float]
    raised_from: dict[Row, float] = field(default_factory=dict)
    backed_off: set[Key] = field(default_factory=set)

    @classmethod
    def of(cls, table: pd.DataFrame) -> Headroom:
        """The ceiling of every coefficient at every pool size: its value in the loop's starting table."""
        return cls(dict(zip(_rows(table), table["max_rps_per_replica"].astype(float), strict=True)))

    def adjust(self, table: pd.DataFrame, misses: list[Miss], slo: pd.DataFrame,
               pool_units: dict[Pool, set[Unit]]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
        """One round's corrections: derate the misses (backing off raised coefficients), then raise."""
        table, derated = derate(table, misses) if misses else (table, [])
        if misses and not derated:  # a miss no coefficient can correct: the loop stops, nothing else moves
            return table, []
        table, changes = self._back_off(table, derated)
        table, raised = self.raise_coefficients(table, raise_candidates(slo, pool_units, misses),
                                                skip={(c["model"], c["sku"], c["tp_degree"], c["traffic_class"])
                                                      for c in changes})
        return non_decreasing_in_pool(table), changes + raised

    def _back_off(self, table: pd.DataFrame,
                  derated: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
        """Derates of raised coefficients become back-offs: to the value before the latest raise."""
        out, changes, index = table.copy(), [], {row: i for i, row in enumerate(_rows(table))}
        column = out.columns.get_loc("max_rps_per_replica")
        for change in derated:
            key = (change["model"], change["sku"], change["tp_degree"], change["traffic_class"])
            row = (key, int(change.get("pool_replicas", 1)))
            if row in self.raised_from:
                after = self.raised_from.pop(row)
                self.backed_off.add(key)
                out.iloc[index[row], column] = after
                change = {**change, "kind": "back off", "after_rps": after,
                          "factor": round(after / change["before_rps"], 4),
                          "because": f"{change['because']}; undoes the loop's raise, never raised again"}
            changes.append(change)
        return out, changes

    def raise_coefficients(self, table: pd.DataFrame, candidates: dict[Key, Check],
                           skip: set[Key] | None = None) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
        """``table`` with each candidate below its calibrated value raised one bounded step; and the raises."""
        out, changes = table.copy(), []
        column = out.columns.get_loc("max_rps_per_replica")
        for index, row in enumerate(_rows(out)):
            key = row[0]
            check = candidates.get(key)
            ceiling = self.calibrated.get(row)
            if check is None or ceiling is None or key in self.backed_off or key in (skip or set()):
                continue
            before = float(out.iloc[index, column])
            after = round(min(ceiling, before * RAISE_STEP), 6)
            if after <= before:
                continue
            self.raised_from[row] = before
            out.iloc[index, column] = after
            changes.append(_change("raise", row, before, after, f"{check.window} {check.period}", check.ratio,
                                   f"p99 below {RAISE_BELOW:g} of the SLO in every window of every pool running "
                                   f"it; highest: {check.describe()}"
                                   + ("; back at its calibrated value" if after >= ceiling else "")))
        return out, sorted(changes, key=change_order)


def non_decreasing_in_pool(table: pd.DataFrame) -> pd.DataFrame:
    """Each coefficient's rows at no more than its rows at larger pool sizes (the running minimum from the right,
    as calibration tabulates them): a back-off to a raise's value and a derate of another size in the same round
    can otherwise leave a smaller pool above a larger one."""
    if "pool_replicas" not in table.columns:
        return table
    order = table.sort_values(["model", "sku", "tp_degree", "traffic_class", "pool_replicas"], ascending=[
        True, True, True, True, False], kind="stable")
    lowest = order.groupby(["model", "sku", "tp_degree", "traffic_class"], sort=False)["max_rps_per_replica"].cummin()
    return table.assign(max_rps_per_replica=lowest.reindex(table.index))

"""The economics of a reserved replica: its term, and the utilisation at which it pays.

A reserved replica is a commitment of the scenario's ``reserved_term``, billed per hour of
the term at the catalog's reserved price p^R. Bought instead of on-demand capacity (p^D per
hour, paid only while it runs), it pays when it would otherwise run for at least
p^R / p^D of the term: the *break-even utilisation*. The placement program charges the
horizon its share of the term and, when the horizon is shorter than the term, lets reserved
replicas cover only what the forecast sustains through the whole horizon (``problem.py``).
This module gives the figures the plan JSON and the report show beside the tiers, and each
commitment's total: the plan charges its horizon of ``H`` hours ``H p^R`` per reserved GPU, so
the whole term of ``T`` hours costs that charge times ``T / H``, whatever the horizon.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from planner.placement.instance import PlacementInstance

SUSTAINED_RULE = ("the horizon is shorter than the reserved term: a pool's reserved replicas cover at most its "
                  "lowest steady load over the horizon plus its replica floor")
WHOLE_TERM_RULE = "the horizon covers the reserved term: the program weighs reserved against on-demand itself"


def break_even(inst: PlacementInstance) -> list[dict[str, Any]]:
    """Per (region, SKU) offered on both tiers: the prices per GPU-hour and p^R / p^D, sorted by name."""
    reserved = inst.unit_price[:, inst.tier_index("reserved")]
    on_demand = inst.unit_price[:, inst.tier_index("on_demand")]
    both = np.isfinite(reserved) & np.isfinite(on_demand) & (on_demand > 0)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for u in np.flatnonzero(both):
        key = (inst.regions[inst.unit_region[u]], inst.skus[inst.unit_sku[u]])
        rows.setdefault(key, {"region": key[0], "sku": key[1],
                              "reserved_usd_per_gpu_hour": round(float(reserved[u]), 6),
                              "on_demand_usd_per_gpu_hour": round(float(on_demand[u]), 6),
                              "break_even_utilisation": round(float(reserved[u] / on_demand[u]), 4)})
    return [rows[key] for key in sorted(rows)]


def commitments(plan: pd.DataFrame, horizon_hours: float, term_hours: int) -> list[dict[str, Any]]:
    """Each reserved commitment of ``plan`` per (region, SKU): the GPUs held for the whole term, what the plan's
    horizon is charged for them, and what the term costs in total (module docstring), sorted by name."""
    reserved = plan[plan["tier"] == "reserved"]
    if reserved.empty or horizon_hours <= 0:
        return []
    per_period = reserved.groupby(["region", "sku", "period"], sort=True)[["gpus", "usd"]].sum()
    by = per_period.groupby(["region", "sku"], sort=True).agg(gpus=("gpus", "max"), usd=("usd", "sum"))
    return [{"region": str(region), "sku": str(sku), "gpus": int(row.gpus), "term_hours": int(term_hours),
             "horizon_usd": round(float(row.usd), 2),
             "term_usd": round(float(row.usd) * term_hours / horizon_hours, 2)}
            for (region, sku), row in by.iterrows()]


def reserved_terms(inst: PlacementInstance, term_hours: int, plan: pd.DataFrame) -> dict[str, Any]:
    """The plan JSON's ``reserved`` entry: the term against the horizon, the rule applied, the break-even table,
    and the commitments the plan makes with their totals over the term."""
    made = commitments(plan, float(inst.total_hours), term_hours)
    return {"term_hours": term_hours, "horizon_hours": inst.total_hours,
            "rule": SUSTAINED_RULE if inst.reserved_sustained_only else WHOLE_TERM_RULE,
            "break_even": break_even(inst), "commitments": made,
            "commitments_total_usd": round(sum(c["term_usd"] for c in made), 2),
            "commitments_gpus": sum(c["gpus"] for c in made)}

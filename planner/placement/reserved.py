"""The economics of a reserved replica: its term, and the utilisation at which it pays.

A reserved replica is a commitment of the scenario's ``reserved_term``, billed per hour of
the term at the catalog's reserved price p^R. Bought instead of on-demand capacity (p^D per
hour, paid only while it runs), it pays when it would otherwise run for at least
p^R / p^D of the term: the *break-even utilisation*. The placement program charges the
horizon its share of the term and, when the horizon is shorter than the term, lets reserved
replicas cover only what the forecast sustains through the whole horizon (``problem.py``).
This module gives the figures the plan JSON and the report show beside the tiers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


def reserved_terms(inst: PlacementInstance, term_hours: int) -> dict[str, Any]:
    """The plan JSON's ``reserved`` entry: the term against the horizon, the rule applied, the break-even table."""
    return {"term_hours": term_hours, "horizon_hours": inst.total_hours,
            "rule": SUSTAINED_RULE if inst.reserved_sustained_only else WHOLE_TERM_RULE,
            "break_even": break_even(inst)}

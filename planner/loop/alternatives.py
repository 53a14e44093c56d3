"""What would change the plan: its cost under each neighbouring purchase-tier choice, from a small built-in sweep.

For every tier the scenario allows (when it allows more than one) the plan is placed again
without it, and for every tier it does not allow, with it. Each is one placement with the
loop's final capacity table, over the same forecast and periods: it prices the choice
without re-simulating it, which is right for tiers (a tier changes the price and the
spot-tolerance of the replicas, not how fast a replica serves). An SLO choice changes the
capacity per replica and needs calibration and the simulator again: that is what
``planner sweep`` does, and the report names the command.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd

from planner.contracts.names import Tier
from planner.errors import InfeasibleError
from planner.placement.place import place_plan

if TYPE_CHECKING:
    from planner.catalog import Catalog
    from planner.loop.run import LoopResult, LoopSettings
    from planner.placement.window import PlanningWindow
    from planner.scenario import Scenario

ALTERNATIVE_COLUMNS = ("choice", "set", "feasible", "usd", "usd_vs_plan", "usd_vs_plan_pct", "note")


def tier_choices(scenario: Scenario) -> list[tuple[str, tuple[str, ...]]]:
    """(label, tiers) of every neighbouring tier choice: each allowed tier dropped, each other tier added."""
    allowed = [str(t) for t in scenario.capacity.tiers]
    choices = []
    for tier in (str(t) for t in Tier):
        if tier in allowed and len(allowed) > 1:
            choices.append((f"without {tier}", tuple(t for t in allowed if t != tier)))
        elif tier not in allowed:
            choices.append((f"with {tier}", (*allowed, tier)))
    return choices


def what_would_change(loop: LoopResult, scenario: Scenario, forecast: pd.DataFrame, catalog: Catalog,
                      profiles: pd.DataFrame, settings: LoopSettings,
                      window: PlanningWindow | None = None) -> pd.DataFrame:
    """One row per tier choice: its plan cost against the loop's plan, or why it is infeasible; cheapest first."""
    rows = []
    for label, tiers in tier_choices(scenario):
        changed = scenario.model_copy(update={"capacity": scenario.capacity.model_copy(update={"tiers": tiers})})
        row = {"choice": label, "set": f"--set 'capacity.tiers={json.dumps(list(tiers))}'"}
        try:
            placed = place_plan(changed, forecast, catalog, profiles, capacity=loop.capacity, solver=settings.solver,
                                node_limit=settings.node_limit, time_limit_s=settings.time_limit_s, gap=settings.gap,
                                quantile=settings.quantile, periods=settings.periods, baselines=False,
                                window=window)
        except InfeasibleError as exc:
            rows.append({**row, "feasible": False, "note": exc.message.split("\n")[0].rstrip(": ")})
            continue
        usd = float(placed.meta["cost_usd"]["total"])
        rows.append({**row, "feasible": True, "usd": usd, "usd_vs_plan": usd - loop.cost_usd,
                     "usd_vs_plan_pct": 100.0 * (usd - loop.cost_usd) / loop.cost_usd if loop.cost_usd else None,
                     "note": "placement only: not re-simulated"})
    table = pd.DataFrame(rows, columns=list(ALTERNATIVE_COLUMNS))
    return table.sort_values(["feasible", "usd", "choice"], ascending=[False, True, True], kind="stable",
                             na_position="last").reset_index(drop=True)

"""The report's "What would change the plan" section: the cost of each neighbouring tier choice, what the prefix
cache saves, the price of each safety margin, and the command that prices an SLO choice
(:mod:`planner.loop.alternatives` computes the table)."""

from __future__ import annotations

import pandas as pd

from planner.loop.alternatives import CACHE, MARGIN, TIER
from planner.report.inputs import ReportInputs, money, rounded
from planner.report.model import Section, Table

SWEEP_HINT = ("An SLO choice changes what each replica can serve, so it needs calibration and the simulator again: "
              "`planner sweep --scenario S --history H --vary classes.{cls}.ttft_p99_ms=V1,V2,...` runs the whole "
              "loop once per value and draws the cost curve.")


def changes_section(inputs: ReportInputs) -> Section:
    section = Section("changes", "What would change the plan")
    table = inputs.alternatives
    if table is None or table.empty:
        return section.no_data("the neighbouring tier choices were not priced for this run.")
    # an all-empty kind column reads back as float: cast before filling with the tier's name
    kind = table["kind"].astype(object).fillna(TIER) if "kind" in table.columns else pd.Series(TIER, index=table.index)
    cached, margins = table[kind == CACHE], table[kind == MARGIN]
    table_all, table = table, table[kind == TIER]
    feasible = table[table["feasible"].astype(bool)]
    cheaper = feasible[pd.to_numeric(feasible["usd_vs_plan"], errors="coerce") < -0.005]
    if not cheaper.empty:
        best = cheaper.iloc[0]
        section.paragraphs.append(
            f"Cheaper: {best['choice']}, {money(float(best['usd']))} ({money(-float(best['usd_vs_plan']))} or "
            f"{-float(best['usd_vs_plan_pct']):.1f} % less), priced by placement alone: check it with "
            f"`planner plan --scenario S --history H {best['set']}` before buying, since the loop has not "
            "simulated it.")
    elif not feasible.empty:
        nearest = feasible.iloc[0]
        section.paragraphs.append(
            f"No neighbouring tier choice is cheaper: the tiers in use are the cheapest mix. The nearest, "
            f"{nearest['choice']}, costs {money(float(nearest['usd']))} "
            f"({float(nearest['usd_vs_plan_pct']):+.1f} %).")
    infeasible = table[~table["feasible"].astype(bool)]
    if not infeasible.empty:
        section.paragraphs.append("Not possible: " + "; ".join(
            f"{row['choice']} ({row['note']})" for _, row in infeasible.iterrows()) + ".")
    section.paragraphs += [_cache_text(row) for _, row in cached.iterrows()]
    if not margins.empty:
        section.paragraphs.append(_margins_text(margins))
    section.paragraphs.append(SWEEP_HINT.format(cls=inputs.tightest_class or "interactive"))
    section.tables.append(Table(
        "plan_alternatives", "Plan cost under each neighbouring tier choice"
        + (", with prefix caching off" if not cached.empty else "")
        + (", and without each safety margin" if not margins.empty else ""),
        rounded(table_all, {"usd": 2, "usd_vs_plan": 2, "usd_vs_plan_pct": 1}),
        "Each tier row places the same forecast with the loop's final capacity per replica and one tier dropped or "
        "added" + ("; the prefix-caching row places it on capacity calibrated with caching off" if not cached.empty
                   else "")
        + ("; each margin row places it with that margin alone removed (the median forecast, utilisation cap 1, "
           "no redundancy, pool floor 1, or capacity calibrated at 50 % confidence)" if not margins.empty else "")
        + " (placement only, not re-simulated); `set` is the option that makes the choice; `gpus_vs_plan` is the "
          "change in GPUs at the fleet peak."))
    return section


def _margins_text(margins: pd.DataFrame) -> str:
    """What each safety margin costs: the plan's USD and GPUs above the plan placed without it."""
    parts = []
    for _, row in margins.iterrows():
        name = str(row["choice"]).split(":")[0]
        if not bool(row["feasible"]):
            parts.append(f"{name}: the plan without it is not possible ({row['note']})")
            continue
        usd, gpus = -float(row["usd_vs_plan"]), -int(row["gpus_vs_plan"])
        parts.append(f"{name} {money(usd)} ({-float(row['usd_vs_plan_pct']):.1f} %) and {gpus:d} "
                     f"GPU{'' if abs(gpus) == 1 else 's'} at the peak")
    return ("Safety margins the plan carries, each priced by placing the plan without it (what it protects "
            "against is in the table's notes): " + "; ".join(parts) + ".")


def _cache_text(row: pd.Series) -> str:
    """What the prefix cache saves, from the plan placed again with caching off."""
    if not bool(row["feasible"]):
        return f"With prefix caching off the plan is not possible ({row['note']}): the cache is what makes it fit."
    return (f"The prefix cache saves {money(float(row['usd_vs_plan']))} ({float(row['usd_vs_plan_pct']):.1f} % of "
            f"the plan): with caching off the same forecast costs {money(float(row['usd']))}, "
            f"{row['note']}. To check it: `planner plan --scenario S --history H {row['set']}`.")

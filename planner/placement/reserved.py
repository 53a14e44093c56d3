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

A term longer than the evidence. With less history than ``EVIDENCE_WEEKS_PER_YEAR`` weeks per
year of term, the forecast's sustained load rests on too little to commit a year to it: a
forecast from two weeks extrapolates two weeks. Then, unless the user allows it
(``--commit-on-short-history``), reserved replicas cover at most the *history's* steady load
of each model, ``L_m`` = the 5th percentile of its hourly request rate over the history (all
origins and classes; a level it kept up 95 % of the time, so an outage hour or a quiet night
does not set it, and a rate it only reached at peaks does not either). In the program this
scales the load that (sustained) counts for the model by ``σ_m = min(1, L_m / F_m)``, with
``F_m`` the model's forecast demand in its quietest period: its quietest period then counts
no more than ``L_m``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from planner.placement.instance import PlacementInstance

EVIDENCE_WEEKS_PER_YEAR = 8
"""History a reserved commitment needs per year of its term: two months show a trend and several weekly cycles;
two weeks show neither."""
STEADY_QUANTILE = 0.05
SHORT_HISTORY_RULE = ("the history is shorter than {needed:,} hours ({weeks} weeks per year of term): reserved "
                      "replicas cover at most the history's steady load of each model (its hourly rate's 5th "
                      "percentile); --commit-on-short-history lifts this limit")
SUSTAINED_RULE = ("the horizon is shorter than the reserved term: a pool's reserved replicas cover at most its "
                  "lowest steady load over the horizon plus its replica floor")
WHOLE_TERM_RULE = "the horizon covers the reserved term: the program weighs reserved against on-demand itself"


def needed_history_hours(term_hours: float) -> float:
    """The history a commitment of ``term_hours`` needs: ``EVIDENCE_WEEKS_PER_YEAR`` weeks per year of term."""
    return EVIDENCE_WEEKS_PER_YEAR * 168 * term_hours / 8760


def history_evidence(history: pd.DataFrame, term_hours: int, allow: bool) -> dict[str, Any]:
    """What the history offers a commitment of ``term_hours``: its span, the span the term needs, each model's
    steady load (req/s), and whether the limit of the module docstring applies (``limited``)."""
    stamps = pd.to_datetime(history["ts"], utc=True)
    span = int((stamps.max() - stamps.min()) / pd.Timedelta(hours=1)) + 1 if len(stamps) else 0
    needed = int(round(needed_history_hours(term_hours)))
    hourly = history.assign(hour=stamps).groupby(["model", "hour"])["requests"].sum() / 3600.0
    steady = {str(m): round(float(rates.quantile(STEADY_QUANTILE)), 6) for m, rates in hourly.groupby(level=0)}
    return {"history_hours": span, "needed_hours": needed, "steady_rps": steady,
            "limited": span < needed and not allow, "allowed_by_option": bool(allow and span < needed)}


def evidence_scale(inst: PlacementInstance, evidence: dict[str, Any]) -> np.ndarray:
    """``σ_m`` of the module docstring for each model of ``inst`` (1 for a model the history does not name)."""
    quietest = inst.demand_rps.sum(axis=(0, 2)).min(axis=1)  # [m] demand in the model's quietest period
    steady = np.array([evidence["steady_rps"].get(m, np.inf) for m in inst.models], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale: np.ndarray = np.where(quietest > 0, np.minimum(1.0, steady / quietest), 1.0)
    return scale


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


def reserved_terms(inst: PlacementInstance, term_hours: int, plan: pd.DataFrame,
                   evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan JSON's ``reserved`` entry: the term against the horizon, the rule applied, the break-even table,
    the commitments the plan makes with their totals over the term, and the history's evidence when given."""
    made = commitments(plan, float(inst.total_hours), term_hours)
    rule = SUSTAINED_RULE if inst.reserved_sustained_only else WHOLE_TERM_RULE
    extra: dict[str, Any] = {}
    if evidence is not None:
        extra["evidence"] = evidence
        if evidence["limited"]:
            rule = SHORT_HISTORY_RULE.format(needed=evidence["needed_hours"], weeks=EVIDENCE_WEEKS_PER_YEAR)
            extra["evidence"] = {**evidence, "load_scale": {m: round(float(s), 6) for m, s in
                                                            zip(inst.models, evidence_scale(inst, evidence),
                                                                strict=True)}}
    return {"term_hours": term_hours, "horizon_hours": inst.total_hours, "rule": rule, **extra,
            "break_even": break_even(inst), "commitments": made,
            "commitments_total_usd": round(sum(c["term_usd"] for c in made), 2),
            "commitments_gpus": sum(c["gpus"] for c in made)}

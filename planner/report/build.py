"""Build the monthly report model from its inputs: pure, no files, no clock.

Sections, in order: summary; demand forecast; last month's forecast against actuals;
the plan and its delta; cost against bounds and baselines; SLO evidence; policy
comparison; risks. The summary is written last from the other sections' facts:
spend over the plan's horizon (and per 30 days: spend x 720 / horizon hours), GPUs at
the fleet's peak by SKU, the SLO verdicts, and the three biggest changes: from the plan
delta when last month's plan is known (largest |USD change|), else from the demand
forecast against recent history (largest |change in demand per hour|).

Same inputs give an equal model: every table is sorted by its key and rounded by unit.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner.errors import InputError
from planner.report.changes import changes_section
from planner.report.demand import accuracy_section, forecast_measure, forecast_section
from planner.report.evidence import policy_section, slo_section
from planner.report.explain import sku_peak_note
from planner.report.fleet import PLAN_COLUMNS, cost_section, fleet_peak_gpus_by, plan_section
from planner.report.inputs import NOT_REPORTED, ReportInputs, check_header, iso, money, number, pick, present
from planner.report.model import ReportModel, Section, Table
from planner.report.risks import risks_section

HOURS_PER_30_DAYS = 720


def _horizon_hours(inputs: ReportInputs, forecast: Section) -> float | None:
    given = number(pick(inputs.plan_meta, "horizon_hours"))
    if given:
        return given
    if present(inputs.plan, "hours", "period"):
        return float(inputs.plan.groupby("period")["hours"].first().sum())
    return number(forecast.facts.get("horizon_hours"))


def _demand_changes(forecast: Section, n: int = 3) -> list[str]:
    if forecast.status != "ok" or not forecast.tables:
        return []
    table = forecast.table("forecast_by_region_model").frame
    unit = next(c for c in table.columns if c.startswith("mean_"))[len("mean_"):]
    recent = f"recent_{unit}"
    known = table[table[recent].notna()].copy()
    known["size"] = (known[f"mean_{unit}"] - known[recent]).abs()
    known = known.sort_values(["size", "region", "model"], ascending=[False, True, True], kind="stable")
    return [f"Demand for {r['model']} from {r['region']}: {r[recent]:,.0f} to {r[f'mean_{unit}']:,.0f} "
            f"{unit.replace('_', ' ')} ({r['change_pct']:+.1f} %) against recent history."
            for r in known.head(n).to_dict("records")]


def summary_section(inputs: ReportInputs, sections: dict[str, Section]) -> Section:
    section = Section("summary", "Summary")
    plan, cost, slo, risks = sections["plan"], sections["cost"], sections["slo"], sections["risks"]
    rows: list[dict[str, Any]] = []
    facts: dict[str, Any] = {}
    if plan.status == "no_data":
        section.paragraphs.append("No data yet: no placement plan was given, so spend and GPUs are not known.")
    else:
        spend = float(cost.facts["usd"])
        hours = _horizon_hours(inputs, sections["forecast"])
        per_30d = spend * HOURS_PER_30_DAYS / hours if hours else None
        by_sku = fleet_peak_gpus_by(inputs.plan, ["sku"])
        sku_text = ", ".join(f"{float(v):g} {k}" for k, v in by_sku.sort_index().items())
        section.paragraphs.append(
            f"Spend: {money(spend)} over the plan's {f'{hours:g}-hour ' if hours else ''}horizon"
            + (f", about {money(per_30d)} per 30 days" if per_30d is not None else "") + ". "
            f"GPUs at the fleet's peak: {plan.facts['gpus_peak']:g} (peak per SKU: {sku_text}). "
            + sku_peak_note(float(plan.facts["gpus_peak"]), {str(k): float(v) for k, v in by_sku.items()}))
        facts.update({"spend_usd": round(spend, 2), "horizon_hours": hours,
                      "spend_per_30_days_usd": round(per_30d, 2) if per_30d is not None else None,
                      "gpus_peak": plan.facts["gpus_peak"],
                      "gpus_peak_by_sku": {str(k): float(v) for k, v in by_sku.sort_index().items()}})
        rows += [{"figure": "spend over the horizon", "value": money(spend), "source": "plan"},
                 {"figure": "spend per 30 days", "value": money(per_30d), "source": "plan, scaled by 720 h / horizon"},
                 {"figure": "GPUs at peak", "value": f"{plan.facts['gpus_peak']:g}",
                  "source": "plan: the most GPUs in use in any one period (per-SKU peaks add up to "
                            f"{float(by_sku.sum()):g})"}]
    if slo.status == "no_data":
        section.paragraphs.append("SLO status: not verified (no simulation results were given).")
        slo_text = NOT_REPORTED
    else:
        slo_text = f"{slo.facts['met']} of {slo.facts['rows']} met"
        failing = slo.facts["failing"]
        section.paragraphs.append(f"SLO status: {slo_text}" + (f"; failing: {', '.join(failing)}" if failing else
                                                                "; every simulated class meets its p99 SLOs") + ".")
        facts.update({"slo_met": slo.facts["met"], "slo_rows": slo.facts["rows"], "slo_failing": failing})
    rows.append({"figure": "SLO rows met", "value": slo_text, "source": "simulator"})
    changes = plan.facts.get("changes") or _demand_changes(sections["forecast"])
    if changes:
        origin = "plan against last month's plan" if plan.facts.get("changes") else "demand against recent history"
        section.paragraphs.append(f"The three biggest changes ({origin}):")
        section.bullets = list(changes[:3])
    else:
        section.paragraphs.append("The biggest changes: no data yet (no plan from last month and no forecast).")
    facts["biggest_changes"] = list(changes[:3])
    forecast = sections["forecast"]
    if forecast.status != "no_data":
        measure = forecast_measure(inputs)
        rows.append({"figure": f"forecast {measure}", "value": f"{forecast.facts[f'forecast_{measure}_total']:,.0f}",
                     "source": f"forecast {forecast.facts['forecast_start']} to {forecast.facts['forecast_end']}"})
    accuracy = sections["accuracy"]
    if accuracy.status != "no_data":
        rows.append({"figure": "last month's forecast bias",
                     "value": f"{accuracy.facts['bias_pct']:+.1f} %" if accuracy.facts.get("bias_pct") is not None
                     else NOT_REPORTED, "source": "run history and actuals"})
    rows.append({"figure": "risks (high / medium)", "value": f"{risks.facts['high']} / {risks.facts['medium']}",
                 "source": "risks section"})
    facts.update({"risks_high": risks.facts["high"], "risks_medium": risks.facts["medium"]})
    section.tables.append(Table("summary", "Key figures", pd.DataFrame(rows, columns=["figure", "value", "source"])))
    section.facts = facts
    return section


def build_report(inputs: ReportInputs) -> ReportModel:
    """The report model for ``inputs`` (see the module docstring). Raises InputError for a bad month or as-of."""
    as_of = check_header(inputs)
    if inputs.plan is not None and not inputs.plan.empty and not all(c in inputs.plan.columns for c in PLAN_COLUMNS):
        missing = [c for c in PLAN_COLUMNS if c not in inputs.plan.columns]
        raise InputError(f"the plan lacks column(s) {', '.join(missing)}", where="plan",
                         fix="pass the plan table `planner place` writes (period, region, sku, model, tier, "
                             "replicas, gpus, usd)")
    built = {
        "forecast": forecast_section(inputs, as_of),
        "accuracy": accuracy_section(inputs, as_of),
        "plan": plan_section(inputs),
        "cost": cost_section(inputs),
        "slo": slo_section(inputs),
        "policies": policy_section(inputs),
        "changes": changes_section(inputs),
    }
    built["risks"] = risks_section(inputs, built["accuracy"])
    summary = summary_section(inputs, built)
    sections = [summary, *built.values()]
    window = inputs.period
    period = None if window is None else {"first_hour": iso(window.start), "last_hour": iso(window.last_hour),
                                          "hours": window.hours}
    return ReportModel(month=inputs.month, as_of=iso(as_of), scenario_name=str(inputs.scenario_name),
                       title=f"Capacity report {inputs.month}: {inputs.scenario_name}", sections=sections,
                       facts=summary.facts, period=period, what_if=list(inputs.what_if))

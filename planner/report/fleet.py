"""Report sections about the fleet: the placement plan, its delta from last month, and its cost.

A plan row is (period, region, sku, tp_degree, model, tier, replicas, gpus, usd): ``usd`` is
that row's cost over its period, so the plan's cost is Σ usd. Per (region, sku, tp_degree, tier, model)
the report shows the peak over periods of replicas and GPUs, the mean GPUs (weighted by
the period's ``hours`` when the plan has that column) and Σ usd. The fleet's peak GPUs
is max over periods of Σ gpus within the period, which is at most the sum of the
per-row peaks. A plan without a ``period`` column is one period.

Against the bounds: a lower bound L (the LP relaxation of the placement integer
program, or the elastic fleet that rents exactly the capacity each hour needs) says
no plan meeting the same demand with the same capacity coefficients costs less, so
(plan − L) / plan is the most any better solver could save. A baseline B (a simpler
plan, e.g. the best single-SKU fleet) shows what the optimisation saves: (B − plan) / B.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from planner.report.charts import ZOOM_NOTE, zoomed_range
from planner.report.explain import bound_notes, objective_note
from planner.report.inputs import (
    NOT_REPORTED,
    PLAN_KEY,
    ReportInputs,
    money,
    number,
    pct,
    pick,
    present,
    rounded,
    signed_money,
)
from planner.report.model import Chart, Section, Table

PLAN_COLUMNS = ("region", "sku", "model", "tier", "gpus", "usd")


def _normalised(plan: pd.DataFrame) -> pd.DataFrame:
    frame = plan.copy()
    if "period" not in frame.columns:
        frame["period"] = 0
    if "replicas" not in frame.columns:
        frame["replicas"] = np.nan
    if "tp_degree" not in frame.columns:  # a plan written before replicas had a TP degree of their own
        frame["tp_degree"] = pd.to_numeric(frame["gpus"], errors="coerce") / pd.to_numeric(frame["replicas"],
                                                                                          errors="coerce")
    frame["tp_degree"] = pd.to_numeric(frame["tp_degree"], errors="coerce").fillna(0).astype(int)
    for column in PLAN_KEY:
        frame[column] = frame[column].astype(str)
    for column in ("replicas", "gpus", "usd"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    frame["hours"] = pd.to_numeric(frame["hours"], errors="coerce").astype(float) if "hours" in frame else 1.0
    return frame


def plan_by_unit(plan: pd.DataFrame) -> pd.DataFrame:
    """Per (region, sku, tp_degree, tier, model): replicas_peak, gpus_peak, gpus_mean, usd (module docstring)."""
    frame = _normalised(plan)
    period_hours = frame.groupby("period")["hours"].first()
    rows = []
    for key, part in frame.groupby(list(PLAN_KEY), sort=True):
        per_period = part.groupby("period")[["replicas", "gpus"]].sum().reindex(period_hours.index, fill_value=0.0)
        rows.append({**dict(zip(PLAN_KEY, key, strict=True)),
                     "replicas_peak": float(per_period["replicas"].max()),
                     "gpus_peak": float(per_period["gpus"].max()),
                     "gpus_mean": float(np.average(per_period["gpus"], weights=period_hours.to_numpy())),
                     "usd": float(part["usd"].sum())})
    return pd.DataFrame(rows, columns=[*PLAN_KEY, "replicas_peak", "gpus_peak", "gpus_mean", "usd"])


def fleet_peak_gpus(plan: pd.DataFrame) -> float:
    """max over periods of Σ gpus in the period."""
    return float(_normalised(plan).groupby("period")["gpus"].sum().max())


def fleet_peak_gpus_by(plan: pd.DataFrame, by: list[str]) -> pd.Series:
    """Per group ``by``: max over periods of Σ gpus of the group in the period."""
    frame = _normalised(plan)
    return frame.groupby([*by, "period"])["gpus"].sum().groupby(level=list(range(len(by)))).max()


def plan_delta(current: pd.DataFrame, previous: pd.DataFrame) -> pd.DataFrame:
    """Current and previous plan side by side per (region, sku, tp_degree, tier, model), with the changes."""
    now, before = plan_by_unit(current), plan_by_unit(previous)
    merged = now.merge(before[[*PLAN_KEY, "gpus_peak", "usd"]], on=list(PLAN_KEY), how="outer",
                       suffixes=("", "_previous")).fillna({"gpus_peak": 0.0, "usd": 0.0, "gpus_peak_previous": 0.0,
                                                           "usd_previous": 0.0})
    merged["gpus_peak_change"] = merged["gpus_peak"] - merged["gpus_peak_previous"]
    merged["usd_change"] = merged["usd"] - merged["usd_previous"]
    return merged.sort_values(list(PLAN_KEY), kind="stable").reset_index(drop=True)


def biggest_changes(delta: pd.DataFrame, n: int = 3) -> list[str]:
    """The ``n`` rows of a plan delta with the largest |usd change|, as sentences (ties broken by key)."""
    moved = delta[(delta["usd_change"].abs() > 0.005) | (delta["gpus_peak_change"].abs() > 0)]
    moved = moved.assign(size=moved["usd_change"].abs()).sort_values(
        ["size", *PLAN_KEY], ascending=[False, *([True] * len(PLAN_KEY))], kind="stable")
    out = []
    for row in moved.head(n).itertuples(index=False):
        what = f"{row.model} on {row.tp_degree} x {row.sku} ({row.tier}) in {row.region}"
        if row.gpus_peak_previous == 0:
            out.append(f"New: {what}, {gpu_count(row.gpus_peak)} at peak, {money(row.usd)}.")
        elif row.gpus_peak == 0:
            out.append(f"Dropped: {what}, was {gpu_count(row.gpus_peak_previous)} at peak, {money(row.usd_previous)}.")
        else:
            gpus = (f"{gpu_count(row.gpus_peak)} at peak (unchanged)" if row.gpus_peak == row.gpus_peak_previous
                    else f"{row.gpus_peak_previous:g} to {gpu_count(row.gpus_peak)} at peak")
            relative = f" ({100 * row.usd_change / row.usd_previous:+.1f} %)" if row.usd_previous else ""
            out.append(f"{what}: {gpus}, {signed_money(row.usd_change)}{relative}.")
    return out


def gpu_count(n: float) -> str:
    return f"{n:g} GPU" + ("" if n == 1 else "s")


def _solver_line(meta: dict[str, Any]) -> str:
    parts = [f"backend {pick(meta, 'backend', default=NOT_REPORTED)}",
             f"status {pick(meta, 'status', default=NOT_REPORTED)}"]
    for name, keys, fmt in (("objective", ("objective", "objective_usd"), money),
                            ("bound", ("bound", "bound_usd", "best_bound"), money),
                            ("gap", ("gap", "mip_gap"), lambda v: f"{100 * v:.3f} %"),
                            ("solve time", ("solve_time_s",), lambda v: f"{v:.2f} s")):
        value = number(pick(meta, *keys))
        if value is None and name == "solve time":
            continue  # left out on purpose by reproducible runs: a wall-clock figure
        parts.append(f"{name} {fmt(value) if value is not None else NOT_REPORTED}")
    return "Solver: " + ", ".join(parts) + "."


def plan_section(inputs: ReportInputs) -> Section:
    section = Section("plan", "The plan and its change from last month")
    if not present(inputs.plan, *PLAN_COLUMNS):
        return section.no_data("no placement plan was given to this report run; run `planner plan` or "
                               "`planner place` first.")
    units = rounded(plan_by_unit(inputs.plan))
    peak = fleet_peak_gpus(inputs.plan)
    total = float(units["usd"].sum())
    section.paragraphs.append(f"{len(units)} (region, SKU, TP, tier, model) placements, {peak:g} GPUs at the fleet's "
                              f"peak, {money(total)} over the plan's horizon.")
    section.paragraphs.append(_solver_line(inputs.plan_meta))
    objective = objective_note(inputs.plan_meta, total)
    if objective:
        section.paragraphs.append(objective)
    _deployments(section, inputs.deployments)
    section.facts = {"placements": len(units), "gpus_peak": peak, "usd": round(total, 2)}
    _idle_regions(section, inputs.idle_regions)
    chart_table = "plan_gpus_by_region_sku"
    by_rs = fleet_peak_gpus_by(inputs.plan, ["region", "sku"]).rename("gpus_peak").reset_index()
    if present(inputs.previous_plan, *PLAN_COLUMNS):
        delta = rounded(plan_delta(inputs.plan, inputs.previous_plan))
        before = float(delta["usd_previous"].sum())
        prev_peak = fleet_peak_gpus(inputs.previous_plan)
        section.paragraphs.append(f"Last month's plan: {prev_peak:g} GPUs at peak, {money(before)}; change "
                                  f"{peak - prev_peak:+g} GPUs, {signed_money(total - before)} "
                                  f"({pct(100 * (total - before) / before, signed=True) if before else NOT_REPORTED})."
                                  " Costs compare the two plans' horizons as planned.")
        section.bullets = biggest_changes(delta)
        section.tables.append(Table("plan", "Plan per placement, against last month", delta,
                                    "gpus_peak: most GPUs in any period; usd: cost over the horizon."))
        previous = fleet_peak_gpus_by(inputs.previous_plan, ["region", "sku"]).rename("gpus_peak_previous")
        by_rs = by_rs.merge(previous.reset_index(), on=["region", "sku"], how="outer").fillna(0.0)
        section.facts.update({"previous_gpus_peak": prev_peak, "previous_usd": round(before, 2),
                              "changes": section.bullets})
        series = ["gpus_peak", "gpus_peak_previous"]
    else:
        section.paragraphs.append("No data yet: the run history holds no plan from last month, so there is no "
                                  "delta to show; next month's report will compare against this plan.")
        section.tables.append(Table("plan", "Plan per placement", units,
                                    "gpus_peak: most GPUs in any period; usd: cost over the horizon."))
        series = ["gpus_peak"]
    by_rs = rounded(by_rs.sort_values(["region", "sku"], kind="stable").reset_index(drop=True))
    section.tables.append(Table(chart_table, "Peak GPUs per region and SKU", by_rs))
    section.charts.append(Chart("plan_gpus", "Peak GPUs per region and SKU", "grouped_bars", chart_table,
                                {"label": ["region", "sku"], "values": series}, "peak GPUs per region and SKU"))
    return section


def _idle_regions(section: Section, table: pd.DataFrame | None) -> None:
    """Every serving region the plan leaves empty, with why: latency, quota or price (``planner.report.regions``)."""
    if table is None or table.empty:
        return
    section.paragraphs.append(f"{len(table)} serving region(s) get no capacity: " + "; ".join(
        f"{row.region}: {row.reason} ({row.detail})" for row in table.itertuples(index=False)) + ".")
    section.tables.append(Table("idle_regions", "Serving regions without capacity, and why", table,
                                "reason: latency (outside every class's latency budget, or residency), quota (none "
                                "for the SKUs the models may run on) or price (a region in use serves the same "
                                "origins for less)."))
    section.facts["idle_regions"] = {str(r.region): str(r.reason) for r in table.itertuples(index=False)}


def _deployments(section: Section, table: pd.DataFrame | None) -> None:
    """How each (model, SKU, TP) is deployed (engine settings and launch command), and its unit economics."""
    if table is None or table.empty:
        return
    lines = []
    for row in table.itertuples(index=False):
        what = (f"{row.model} on {row.tp_degree} x {row.sku}: {row.engine} with max_num_seqs {row.max_num_seqs}, "
                f"max_num_batched_tokens {row.max_num_batched_tokens}")
        threshold = number(row.long_prefill_token_threshold)
        what += f" and long_prefill_token_threshold {threshold:g}" if threshold else " and no long-prefill threshold"
        rate = number(row.output_tokens_per_s_per_gpu)
        if rate is not None:
            what += (f"; at its calibrated rate {rate:,.0f} output tokens/s per GPU, "
                     f"{money(number(row.usd_per_m_output_tokens_at_capacity))} per million output tokens")
        lines.append(what + ".")
    section.paragraphs.append("Deployments (the engine settings calibration chose for the SLOs): " + " ".join(lines))
    section.tables.append(Table("deployments", "Deployments: engine settings, launch command and cost per token",
                                rounded(table),
                                "rps_per_gpu and output_tokens_per_s_per_gpu at the calibrated rate (the SLO-bound "
                                "capacity); usd_per_m_output_tokens_at_capacity at the plan's average price per "
                                "GPU-hour of the deployment; launch: the serving engine's command with these "
                                "settings; prefix_hit_rate: the share of the model's prompt tokens its prefix cache "
                                "served in the simulated windows, prefill_tokens_saved_per_s the prompt tokens per "
                                "second it did not compute (per model).",
                                display=("model", "sku", "tp_degree", "engine", "max_num_seqs",
                                         "max_num_batched_tokens", "long_prefill_token_threshold", "gpus_peak",
                                         "output_tokens_per_s_per_gpu",
                                         "usd_per_m_output_tokens_at_capacity", "prefix_hit_rate",
                                         "prefill_tokens_saved_per_s")))


def status_text(status: Any) -> str:
    """How a bound or baseline was reached, in words: optimal, within or at its node limit with the gap, ..."""
    if not isinstance(status, dict) or not status.get("status"):
        return NOT_REPORTED
    gap = number(status.get("gap"))
    words = {"optimal": "optimal", "feasible_within_gap": "within its gap target",
             "node_limit": "node limit reached", "infeasible": "infeasible",
             "time_limit": "stopped by the wall-clock safety net", "error": "solver error"}
    text = words.get(str(status["status"]), str(status["status"]))
    return f"{text}, gap {pct(100.0 * gap)}" if gap is not None else text


def _reference_rows(meta: dict[str, Any], total: float) -> list[dict[str, Any]]:
    statuses = meta.get("reference_status") or {}
    rows = [{"reference": "this plan", "kind": "plan", "usd": total, "plan_vs_reference_pct": 0.0}]
    groups = (("lower bound", pick(meta, "lower_bounds", "bounds", default={})),
              ("baseline", pick(meta, "baselines", default={})))
    for kind, mapping in groups:
        for name in sorted(mapping or {}):
            value = number(mapping[name])
            if value is None:
                continue
            rows.append({"reference": name.removesuffix("_usd").replace("_", " "), "kind": kind, "usd": value,
                         "plan_vs_reference_pct": 100.0 * (total - value) / value if value else None,
                         **({"status": status_text(statuses.get(name))} if statuses else {})})
    bound = number(pick(meta, "bound", "bound_usd", "best_bound"))
    if bound is not None:
        rows.append({"reference": "solver bound", "kind": "lower bound", "usd": bound,
                     "plan_vs_reference_pct": 100.0 * (total - bound) / bound if bound else None})
    order = {"plan": 0, "lower bound": 1, "baseline": 2}
    return sorted(rows, key=lambda r: (order[r["kind"]], -r["usd"], r["reference"]))


def _break_even(section: Section, reserved: Any) -> None:
    """The reserved tier's break-even utilisation per region and SKU, and the rule the plan applied."""
    if not isinstance(reserved, dict) or not reserved.get("break_even"):
        return
    figures = ", ".join(f"{row['region']} {row['sku']} {pct(100.0 * float(row['break_even_utilisation']))}"
                        for row in reserved["break_even"])
    term = number(reserved.get("term_hours"))
    section.paragraphs.append(
        "Reserved break-even utilisation (reserved price / on-demand price: a reserved replica pays only if it "
        f"would run at least this share of its {f'{term:,.0f}-hour ' if term else ''}term): {figures}. "
        f"Rule applied: {reserved.get('rule', NOT_REPORTED)}.")


def commitment_sentence(reserved: Any, horizon_usd: float) -> str | None:
    """The plan's reserved commitments in one sentence: GPUs, term, region and SKU, the term's total beside the
    horizon's cost (the report's cost section and ``planner plan``'s summary say the same)."""
    if not isinstance(reserved, dict):
        return None
    made = reserved.get("commitments") or []
    evidence = reserved.get("evidence") or {}
    limit = (f" The history covers {float(evidence['history_hours']) / 24:,.0f} days, under the "
             f"{float(evidence['needed_hours']) / 24:,.0f} a {float(reserved['term_hours']) / 24:,.0f}-day term needs: "
             "reserved replicas were held to each model's steady load in the history "
             "(--commit-on-short-history lifts that limit).") if evidence.get("limited") else ""
    if not made:
        return f"Reserved commitments: none.{limit}" if limit else None
    days = float(made[0]["term_hours"]) / 24.0
    parts = "; ".join(f"{c['gpus']} {c['sku']} in {c['region']} {money(float(c['term_usd']))}" for c in made)
    return (f"Reserved commitments: {reserved['commitments_gpus']} GPUs for a {days:,.0f}-day term, "
            f"{money(float(reserved['commitments_total_usd']))} over the term ({parts}), beside "
            f"{money(horizon_usd)} for this plan's whole horizon: the commitment is paid for the whole term "
            f"whatever the next plans buy.{limit}")


def _commitments(section: Section, reserved: Any, horizon_usd: float) -> None:
    sentence = commitment_sentence(reserved, horizon_usd)
    if sentence is None:
        return
    section.paragraphs.append(sentence)
    section.tables.append(Table("reserved_commitments", "Reserved commitments over their term",
                                pd.DataFrame(reserved["commitments"]),
                                "gpus held for the whole term; horizon_usd: this plan's share; term_usd: the term's "
                                "total (horizon_usd x term_hours / the plan's horizon hours)."))
    section.facts["reserved_commitments_usd"] = float(reserved["commitments_total_usd"])
    section.facts["reserved_commitments_gpus"] = int(reserved["commitments_gpus"])


def cost_section(inputs: ReportInputs) -> Section:
    section = Section("cost", "Cost by region, SKU and tier")
    if not present(inputs.plan, *PLAN_COLUMNS):
        return section.no_data("no placement plan was given, so there is no cost to break down.")
    frame = _normalised(inputs.plan)
    total = float(frame["usd"].sum())
    by = frame.groupby(["region", "sku", "tier"], sort=True)["usd"].sum().rename("usd").reset_index()
    by = by.merge(fleet_peak_gpus_by(inputs.plan, ["region", "sku", "tier"]).rename("gpus_peak").reset_index(),
                  on=["region", "sku", "tier"])
    by["share_pct"] = 100.0 * by["usd"] / total if total else np.nan
    by = rounded(by[["region", "sku", "tier", "gpus_peak", "usd", "share_pct"]])
    tiers = frame.groupby("tier", sort=True)["usd"].sum()
    section.paragraphs.append(f"{money(total)} over the plan's horizon: " + ", ".join(
        f"{tier} {money(float(v))} ({pct(100 * float(v) / total) if total else NOT_REPORTED})"
        for tier, v in tiers.items()) + ".")
    if inputs.served_usd_per_m_output_tokens:
        section.paragraphs.append(
            "Per million output tokens served (the plan's cost over the output tokens the forecast expects in the "
            "plan's hours, headroom, redundancy and troughs included): " + ", ".join(
                f"{model} {money(value)}" for model, value in sorted(inputs.served_usd_per_m_output_tokens.items()))
            + ".")
        section.facts["usd_per_m_output_tokens_served"] = {m: round(v, 4) for m, v in
                                                           sorted(inputs.served_usd_per_m_output_tokens.items())}
    if inputs.served_usd_per_m_tokens:
        section.paragraphs.append(
            "Per million tokens served, prompt and output together (the figure to hold against an API's blended "
            "price; the one above also charges output tokens with the prefill of every prompt): " + ", ".join(
                f"{model} {money(value)}" for model, value in sorted(inputs.served_usd_per_m_tokens.items())) + ".")
        section.facts["usd_per_m_tokens_served"] = {m: round(v, 4) for m, v in
                                                    sorted(inputs.served_usd_per_m_tokens.items())}
    refs = pd.DataFrame(_reference_rows(inputs.plan_meta, total))
    refs = rounded(refs)
    bounds = refs[refs["kind"] == "lower bound"]
    baselines = refs[refs["kind"] == "baseline"]
    if bounds.empty:
        section.paragraphs.append("Lower bounds: not reported by the placement step.")
    else:
        best = bounds.iloc[0]
        others = "; ".join(f"{pct(float(r.plan_vs_reference_pct))} above {r.reference} ({money(float(r.usd))})"
                           for r in bounds.iloc[1:].itertuples(index=False))
        section.paragraphs.append(f"The plan costs {pct(float(best['plan_vs_reference_pct']))} above the tightest "
                                  f"lower bound ({best['reference']}, {money(float(best['usd']))}): no plan for the "
                                  "same demand and capacity coefficients can cost less than that bound"
                                  + (f". Other bounds: {others}." if others else "."))
        section.paragraphs.append("What each bound is: " + " ".join(bound_notes(
            {str(r.reference): float(r.usd) for r in bounds.itertuples(index=False)}, total)))
    if baselines.empty:
        section.paragraphs.append("Baselines: not reported by the placement step.")
    else:
        for row in baselines.itertuples(index=False):
            saving = 100.0 * (row.usd - total) / row.usd if row.usd else None
            status = f", {row.status}" if "status" in baselines.columns else ""
            section.bullets.append(f"Against {row.reference} ({money(row.usd)}{status}): the plan saves {pct(saving)}.")
    if inputs.plan_meta.get("plan_source") == "best_single_sku":
        section.bullets.append("The best single-SKU plan cost less than the plan the search found, and the two "
                               "meet the same constraints: the single-SKU plan was cheaper: returned it.")
    _break_even(section, inputs.plan_meta.get("reserved"))
    _commitments(section, inputs.plan_meta.get("reserved"), total)
    section.tables += [Table("cost_by_region_sku_tier", "Cost by region, SKU and tier", by,
                             "usd over the plan's horizon; gpus_peak: most GPUs in any period."),
                       Table("cost_vs_bounds", "Plan cost against lower bounds and baselines", refs,
                             "plan_vs_reference_pct = 100 (plan - reference) / reference.")]
    zoom_note = f" ({ZOOM_NOTE})" if zoomed_range(refs["usd"].astype(float)) is not None else ""
    section.charts += [
        Chart("cost_by_region_tier", "Cost by region and tier", "stacked_bars", "cost_by_region_sku_tier",
              {"label": ["region"], "stack": "tier", "value": "usd"}, "USD per region stacked by tier"),
        Chart("cost_vs_bounds", "Plan cost against bounds and baselines" + zoom_note, "bars", "cost_vs_bounds",
              {"label": ["reference"], "value": "usd", "color_by": "kind", "zoom": True},
              "USD of the plan, bounds and baselines" + zoom_note),
    ]
    section.facts.update({"usd": round(total, 2),
                          "usd_by_tier": {str(k): round(float(v), 2) for k, v in tiers.items()},
                          "references": {r["reference"]: r["usd"] for r in refs.to_dict("records")}})
    return section

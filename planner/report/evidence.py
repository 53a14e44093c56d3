"""Report sections about service: SLO evidence from the simulator, the plan loop, and the policy comparison.

A class meets its SLO when its simulated p99 TTFT, TPOT and end-to-end latency are at or
below their targets, for each of them the class sets for the model (the simulator's
``slo_met`` when given, else this comparison); a metric without a target is shown but not
checked. The report shows each p99 as a ratio to its target, so 1.0 is the line, and marks
a class "marginal" when the point estimate meets the target but the upper end of its
confidence interval over replications does not: another month of the same traffic
could miss it. A confidence interval is read as a half-width (one number) or as
[low, high] (two numbers).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from planner.report.explain import and_list, lowest
from planner.report.inputs import SERIES_KEY, ReportInputs, label, money, number, pick, present, rounded
from planner.report.model import Chart, Section, Table
from planner.slo import SLO_METRICS, describe_metrics

_NUMBERS = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def metric_columns(metric: str) -> tuple[str, str, str]:
    """The report's (p99, confidence interval, target) columns of one SLO metric, e.g. ttft_p99_ms,
    ttft_p99_ci_ms, ttft_slo_ms."""
    return f"{metric}_p99_ms", f"{metric}_p99_ci_ms", f"{metric}_slo_ms"


WINDOWS_NOTE = ("window: the plan period a row was simulated in. Fleet peak is the period with the most demand "
                "over the whole fleet; pool peak and pool trough are the periods with the most and the least "
                "(above zero) demand routed to that row's (region, model) pool. A pool is simulated once per "
                "period, so one row may stand for several windows (fleet peak + pool peak).")
METRICS = tuple((metric, *metric_columns(metric)) for metric in SLO_METRICS)
SLO_EXTRA = (("utilisation", ("utilisation", "utilization", "rho")),
             ("rejections", ("rejections", "rejected", "rejection_rate")),
             ("prefix_hit_rate", ("prefix_hit_rate",)))


def ci_upper(point: float | None, ci: Any) -> float | None:
    """Upper end of a confidence interval given as a half-width or as [low, high] (list or text)."""
    if ci is None or (isinstance(ci, float) and np.isnan(ci)):
        return None
    if isinstance(ci, list | tuple | np.ndarray):
        values = [number(v) for v in ci]
    elif number(ci) is not None:
        return point + float(ci) if point is not None else None
    else:
        values = [number(v) for v in _NUMBERS.findall(str(ci))]
    known = [v for v in values if v is not None]
    return max(known) if len(known) >= 2 else None


def _ci_text(ci: Any) -> str | None:
    if ci is None or (isinstance(ci, float) and np.isnan(ci)):
        return None
    if isinstance(ci, list | tuple | np.ndarray):
        return "[" + ", ".join(f"{float(v):.1f}" for v in ci) + "]"
    return f"±{float(ci):.1f}" if number(ci) is not None else str(ci)


def slo_table(slo: pd.DataFrame) -> pd.DataFrame:
    """One row per simulated (region, model, class[, window, period]) with ratios to target, met and marginal flags."""
    key = [*SERIES_KEY, *(c for c in ("window", "period") if c in slo.columns)]
    rows = []
    for record in slo.to_dict("records"):
        row: dict[str, Any] = {k: str(record[k]) for k in key}
        ratios, meets, marginal = [], [], False
        for name, p99_col, ci_col, target_col in METRICS:
            p99, target = number(record.get(p99_col)), number(record.get(target_col))
            row[p99_col], row[ci_col], row[target_col] = p99, _ci_text(record.get(ci_col)), target
            ratio = None
            if p99 is not None and target:
                ratio = p99 / target
                ratios.append(ratio)
                meets.append(ratio <= 1.0)
                upper = ci_upper(p99, record.get(ci_col))
                marginal |= ratio <= 1.0 and upper is not None and upper > target
            row[f"{name}_p99_over_slo"] = ratio
        given = record.get("slo_met")
        met = bool(given) if given is not None and not (isinstance(given, float) and np.isnan(given)) else (
            all(meets) if meets else None)
        row["worst_p99_over_slo"] = max(ratios) if ratios else None
        row["slo_met"] = met
        row["marginal"] = bool(marginal and met)
        for name, synonyms in SLO_EXTRA:
            row[name] = number(pick(record, *synonyms))
        rows.append(row)
    frame = pd.DataFrame(rows)
    return rounded(frame.sort_values(key, kind="stable").reset_index(drop=True))


def checked_metrics(table: pd.DataFrame) -> tuple[tuple[str, ...], bool]:
    """The metrics some row has a target for, and whether some row leaves one of them unchecked."""
    has_target = {}
    for metric in SLO_METRICS:
        column = metric_columns(metric)[2]
        has_target[metric] = table[column].notna() if column in table.columns else pd.Series(False, index=table.index)
    checked = tuple(m for m in SLO_METRICS if has_target[m].any())
    return checked, any(not has_target[m].all() for m in checked)


def _ratio_caption(checked: tuple[str, ...], partial: bool) -> str:
    """What worst_p99_over_slo is, naming only the metrics some class sets."""
    if not checked:
        return "No row has an SLO target, so no p99 is checked; CI over replications."
    how = {1: ("p99 / target for", "at most 1 meets it"), 2: ("the larger of p99 / target for", "at most 1 meets both")}
    lead, meets = how.get(len(checked), ("the largest of p99 / target for", "at most 1 meets all"))
    note = " A – in a *_slo_ms column: the class sets no such SLO, and it is not checked." if partial else ""
    return f"worst_p99_over_slo = {lead} {describe_metrics(checked)} ({meets}); CI over replications.{note}"


def readable(value: Any) -> Any:
    """A loop-round value as a table cell: lists as "a; b", mappings as "key: value", empty ones as "none".

    Scalars pass through unchanged, so numbers stay numbers in the CSV.
    """
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_text(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))) or "none"
    if isinstance(value, list | tuple | np.ndarray):
        return "; ".join(_text(v) for v in value) or "none"
    return value


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_text(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, list | tuple | np.ndarray):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return "none" if value is None else str(value)


def no_traffic_text(forecast: pd.DataFrame | None) -> str:
    """The (model, class) pairs of the forecast with no demand over its horizon, once: they are neither calibrated,
    simulated nor counted in the SLO rows (:mod:`planner.workloads`); '' when every pair has traffic."""
    if not present(forecast, "model", "traffic_class", "mean"):
        return ""
    assert forecast is not None
    demand = pd.to_numeric(forecast["mean"], errors="coerce").fillna(0.0).groupby(
        [forecast["model"], forecast["traffic_class"]]).sum()
    models, classes = sorted(set(forecast["model"].astype(str))), sorted(set(forecast["traffic_class"].astype(str)))
    idle = [f"{m} / {k}" for m in models for k in classes if float(demand.get((m, k), 0.0)) <= 0]
    if not idle:
        return ""
    return (f"No traffic (not calibrated, simulated or counted above): {', '.join(idle)}.")


def slo_section(inputs: ReportInputs) -> Section:
    section = Section("slo", "SLO evidence per class")
    if not present(inputs.slo, *SERIES_KEY):
        section.no_data("no simulation results were given to this report run, so no class's SLO is confirmed; "
                        "run `planner plan`, which simulates the plan's peak windows.")
    else:
        table = slo_table(inputs.slo)
        keys = [c for c in (*SERIES_KEY, "window", "period") if c in table.columns]
        known = table[table["slo_met"].notna()]
        failing = [label(r, tuple(keys)) for r in known[~known["slo_met"].astype(bool)].to_dict("records")]
        marginal = [label(r, tuple(keys)) for r in table[table["marginal"]].to_dict("records")]
        checked, partial = checked_metrics(table)
        section.paragraphs.append(
            f"{int(known['slo_met'].astype(bool).sum())} of {len(table)} simulated (region, model, class"
            + (", window" if "window" in keys else "") + ") rows meet their p99 "
            + (describe_metrics(checked, before_noun=True) if checked else "latency") + " SLOs"
            + (f"; failing: {', '.join(failing)}" if failing else "") + ".")
        if len(known) < len(table):
            section.paragraphs.append(f"{len(table) - len(known)} rows have no SLO verdict: not reported.")
        if "window" in keys:
            section.paragraphs.append(WINDOWS_NOTE)
        if marginal:
            section.paragraphs.append("Marginal (met, but the confidence interval crosses the target): "
                                      + ", ".join(marginal) + ".")
        display = (*keys, *(c for m in SLO_METRICS for c in metric_columns(m)),
                   "worst_p99_over_slo", "slo_met", "marginal", "utilisation", "rejections", "prefix_hit_rate")
        section.tables.append(Table("slo_evidence", "Simulated p99 latency against SLO", table,
                                    _ratio_caption(checked, partial), display=display))
        section.charts.append(Chart("slo_evidence", "Worst p99 latency as a share of its SLO", "bars", "slo_evidence",
                                    {"label": keys, "value": "worst_p99_over_slo", "reference": 1.0,
                                     "color_by": "slo_met"}, "p99 / SLO per class; above 1.0 misses"))
        section.facts = {"rows": len(table), "met": int(known["slo_met"].astype(bool).sum()), "failing": failing,
                         "marginal": marginal, "verdict_missing": len(table) - len(known)}
    idle = no_traffic_text(inputs.forecast)
    if idle:
        section.paragraphs.append(idle)
        section.facts["no_traffic"] = idle
    if inputs.loop_rounds:
        rounds = pd.DataFrame([{k: readable(v) for k, v in r.items()} for r in inputs.loop_rounds])
        first = [c for c in ("round", "failed", "shortfall", "change", "cost_usd") if c in rounds.columns]
        rounds = rounded(rounds[first + sorted(c for c in rounds.columns if c not in first)])
        costs = [number(r.get("cost_usd")) for r in inputs.loop_rounds]
        text = f"The plan loop ran {len(rounds)} round(s)"
        if costs and costs[0] is not None and costs[-1] is not None:
            text += f"; cost went from {money(costs[0])} in the first to {money(costs[-1])} in the last"
        section.paragraphs.append(text + ".")
        section.tables.append(Table("plan_loop_rounds", "Plan loop: what failed and what changed, per round", rounds))
        section.facts["loop_rounds"] = len(rounds)
    else:
        section.paragraphs.append("Plan loop rounds: not reported.")
    return section


def _cheapest_text(table: pd.DataFrame, best: pd.Series, tied: list[str], in_use: str | None) -> str:
    """The cheapest policy, or every tied one; then fcfs and the policy in use against it, each once."""
    cost = f"{best['gpus']:g} GPUs, {money(float(best['usd']))}"
    if len(tied) > 1:
        every = " (every policy compared)" if len(tied) == len(table) else ""
        text = (f"Tie: {and_list(tied)} cost the same{every} and meet every SLO on the same forecast: {cost} each, "
                "so none is the cheapest.")
    else:
        text = f"Cheapest policy that meets every SLO on the same forecast: {best['policy']}, {cost}."
    for other in dict.fromkeys(p for p in ("fcfs", in_use) if p):  # the policy in use is often fcfs: say it once
        match = table[table["policy"] == other]
        if other in tied or match.empty:
            continue
        row = match.iloc[0]
        text += (f" Against {other}{' (the policy in use)' if other == in_use else ''}: "
                 f"{row['gpus'] - best['gpus']:+g} GPUs, {money(float(row['usd'] - best['usd']))} more "
                 f"({float(row['usd_vs_best_pct']):.1f} %).")
    if in_use and in_use in tied and len(tied) > 1:
        text += f" The policy in use, {in_use}, is one of the tied."
    return text


def policy_section(inputs: ReportInputs) -> Section:
    section = Section("policies", "Policy comparison")
    frame = inputs.policy_comparison
    if not present(frame, "policy", "usd"):
        return section.no_data("no policy comparison was given; `planner plan --compare-policies fcfs,cmu,wspt,"
                               "drr-wspt` measures the GPUs and USD each policy needs for the same SLOs.")
    table = frame.copy()
    table["policy"] = table["policy"].astype(str)
    for column in ("gpus", "usd"):
        table[column] = pd.to_numeric(table[column], errors="coerce").astype(float) if column in table else np.nan
    if "slo_met" not in table.columns:
        table["slo_met"] = None
    meeting = table[table["slo_met"].fillna(False).astype(bool)] if table["slo_met"].notna().any() else table
    reference = meeting if not meeting.empty else table
    best = reference.sort_values(["usd", "policy"], kind="stable").iloc[0]
    table["usd_vs_best_pct"] = 100.0 * (table["usd"] - best["usd"]) / best["usd"] if best["usd"] else np.nan
    extra = [c for c in ("binding", "capacity") if c in table.columns]
    table = rounded(table[["policy", "gpus", "usd", "slo_met", "usd_vs_best_pct", *extra]].sort_values(
        ["usd", "policy"], kind="stable").reset_index(drop=True))
    in_use = pick(inputs.plan_meta, "policy")
    tied = lowest(dict(zip(reference["policy"].astype(str), reference["usd"].astype(float), strict=True)))
    section.paragraphs.append(_cheapest_text(table, best, tied, str(in_use) if in_use else None))
    if len(table) > 1 and table["usd"].nunique() > 1 and "capacity" in table.columns:
        section.paragraphs.append(
            "Why the policies differ: the replicas, the requests and the steps are the same under every policy, so "
            "each replica's throughput ceiling is too. What a policy changes is the order in which waiting requests "
            "are admitted (KV cache, batch cap) and prefilled (the step's token budget): a priority order lets the "
            "class whose latency binds go ahead of long prompts, FIFO makes it wait behind them. So each policy "
            "reaches a different share of the ceiling before the binding SLO breaks (`capacity`: the best unit per "
            "model), and needs that many more or fewer replicas.")
    if len(table) > 1 and table["usd"].nunique() == 1:
        section.paragraphs.append("Every policy needs the same fleet: the scheduling order does not bind here. "
                                  + ("What limits capacity (the `binding` column) is then what to look at: a "
                                     "latency SLO that binds through batch size, before requests queue for "
                                     "admission, is the same under every queue order."
                                     if "binding" in table.columns else ""))
    if meeting.empty or not table["slo_met"].notna().any():
        section.paragraphs.append("Whether each policy met every SLO: not reported.")
    section.tables.append(Table("policy_comparison", "GPUs and USD each policy needs", table,
                                "usd_vs_best_pct = 100 (usd - cheapest) / cheapest."))
    section.charts.append(Chart("policy_comparison", "USD per policy for the same SLOs", "bars", "policy_comparison",
                                {"label": ["policy"], "value": "usd", "color_by": "slo_met", "annotate": "gpus"},
                                "USD per scheduling policy, annotated with GPUs"))
    section.facts = {"best_policy": best["policy"], "tied_policies": tied, "best_usd": round(float(best["usd"]), 2),
                     "policies": table["policy"].tolist()}
    return section

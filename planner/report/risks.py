"""The risks section: what could make this month's plan wrong, most severe first.

Rules (each a row: kind, severity, where, detail):

* quota: GPUs planned at peak / quota ≥ 0.80 is medium, ≥ 0.95 high (a launch or a
  forecast miss has no headroom to grow into).
* utilisation: a pool's load ρ as a fraction of its calibrated SLO capacity (the
  ``utilisation`` column; ``planner.report.assemble``) above 0.85 (the knee, where placement
  loads pools at the forecast quantile) is medium, ≥ 0.95 high. Queueing
  delay grows like ρ/(1 − ρ) (M/M/1: 5.7 service times at 0.85, 19 at 0.95), so a few
  per cent more demand than forecast moves p99 latency far more near the knee.
* slo: a class that misses its SLO is high; a marginal one (met, but its confidence
  interval crosses the target) is medium; no simulation at all is medium.
* forecast fallback: a series forecast by a seasonal naive (medium).
* forecast growth: a series whose forecast the growth limit capped, or whose quantile exceeds
  twice its history's peak within a raised limit (medium): the plan buys on demand the history
  never showed (``planner.forecast.growth``).
* data quality: findings of the forecast's data-quality pass (outages, missing hours,
  ...), one row per series (info).
* demand spike: a history hour far above its series' median (the data-quality pass's
  ``spike`` finding) is medium: the forecast learned from it, so the plan may be sized
  for a load test or a mis-scaled import rather than for traffic.
* infeasibility: a solver status other than optimal/feasible is high, except a search that
  ended on its node limit with a stated gap (medium); placements the problem builder
  excluded or infeasibilities it diagnosed are medium.
* reproducibility: a placement the wall-clock safety net cut short is high: the same
  inputs may give another plan, so this report may not reproduce.
* q99 under-coverage: a series whose actuals fell at or below its q99 forecast in fewer than
  ``Q99_COVERAGE_FLOOR`` (97 %) of its backtest hours is medium, under ``Q99_COVERAGE_HIGH``
  (90 %) high. A calibrated q99 covers 99 %; over the few hundred hours a backtest scores,
  sampling noise is about half a point, so two points under is a forecast that sizes the
  plan's peaks too low, not bad luck. Last month's forecast against actuals (the accuracy
  section's ``below_q99_pct``) is held to the same floor.
* naive-beating series: a series whose backtest MASE is above the better seasonal naive's
  (the forecaster loses to "same hour yesterday / last week") is medium.
* understated price: an offer the plan spends on whose catalog price is marked understated
  (the catalog's ``assumption`` column, e.g. an accelerator-only price without its host) is
  medium: the plan's cost and its choice of region or SKU lean on a price that is too low.
* stale history: the demand history ends more than ``STALE_HISTORY_DAYS`` (7) days before
  the first hour planned is high (``planner report`` stops there unless
  ``--allow-stale-history``); a day or more is medium. The forecast bridges the gap, and
  its error grows with every hour it has not seen.
* commitment evidence: what the history behind the plan's reserved commitments covers. A
  commitment is paid for its whole term (a year by default) and rests on the forecast, which
  rests on the history; with less history than ``EVIDENCE_WEEKS_PER_YEAR`` (8) weeks per year
  of term it is medium, otherwise info. It states the GPUs, the term's total and the days of
  history.
* pipeline: free-text risks passed in by the pipeline (medium).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner.placement.reserved import EVIDENCE_WEEKS_PER_YEAR, needed_history_hours
from planner.placement.window import iso_hour
from planner.report.evidence import slo_table
from planner.report.inputs import SERIES_KEY, ReportInputs, label, money, number, pick, present, utc
from planner.report.model import Section, Table
from planner.report.period import STALE_HISTORY_DAYS, history_gap_days

KNEE_UTILISATION = 0.85
HIGH_UTILISATION = 0.95
QUOTA_NEAR_SHARE = 0.80
QUOTA_HIGH_SHARE = 0.95
Q99_COVERAGE_FLOOR = 0.97
Q99_COVERAGE_HIGH = 0.90
SEVERITY_RANK = {"high": 0, "medium": 1, "info": 2}
GOOD_STATUSES = ("optimal", "feasible_within_gap", "feasible")


def _risk(kind: str, severity: str, where: str, detail: str) -> dict[str, str]:
    return {"kind": kind, "severity": severity, "where": where, "detail": detail}


def _quota_rows(meta: dict[str, Any]) -> list[dict[str, Any]] | None:
    usage = pick(meta, "quota_usage", "quotas")
    if usage is None:
        return None
    if isinstance(usage, pd.DataFrame):
        records: list[dict[str, Any]] = usage.to_dict("records")
        return records
    if isinstance(usage, dict):
        return [{"where": k, **(v if isinstance(v, dict) else {"used_gpus": v})} for k, v in sorted(usage.items())]
    return [u for u in usage if isinstance(u, dict)]


def quota_risks(meta: dict[str, Any]) -> tuple[list[dict[str, str]], bool]:
    rows = _quota_rows(meta)
    if rows is None:
        return [], False
    out = []
    for row in rows:
        used = number(pick(row, "used_gpus", "gpus_peak", "gpus", "used"))
        quota = number(pick(row, "quota_gpus", "quota", "limit"))
        if used is None or not quota:
            continue
        share = used / quota
        if share >= QUOTA_NEAR_SHARE:
            default = f"{pick(row, 'region', default='?')} {pick(row, 'sku', default='')}"
            where = str(pick(row, "where", default=default))
            out.append(_risk("quota", "high" if share >= QUOTA_HIGH_SHARE else "medium", where.strip(),
                             f"{used:g} of {quota:g} GPUs at peak ({100 * share:.0f} % of quota)"))
    return out, True


def infeasibility_risks(meta: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    status = pick(meta, "status")
    if status is not None and str(status) not in GOOD_STATUSES:
        gap = number(pick(meta, "gap", "mip_gap"))
        severity = "medium" if str(status) == "node_limit_with_incumbent" else "high"
        detail = f"solver status {status}" + (f", gap {100 * gap:.2f} %" if gap is not None else "")
        out.append(_risk("infeasibility", severity, "placement", detail))
    hits = pick(meta, "time_limit_hits", default=[]) or []
    if hits:
        out.append(_risk("reproducibility", "high", "placement",
                         f"the wall-clock safety net stopped {len(hits)} solver call(s) (e.g. {hits[0]}): the same "
                         "inputs may give another plan; rerun with a higher --time-limit or a lower --node-limit"))
    for name in ("infeasibilities", "diagnosis", "excluded"):
        items = pick(meta, name, default=[])
        for item in items if isinstance(items, list | tuple) else [items]:
            text = item if isinstance(item, str) else "; ".join(str(v) for v in (
                item.values() if isinstance(item, dict) else item))
            out.append(_risk("infeasibility", "medium", name, text))
    return out


def forecast_risks(meta: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for entry in pick(meta, "series", default=[]) or []:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("series") or label(entry, SERIES_KEY))
        if entry.get("fallback"):
            out.append(_risk("forecast fallback", "medium", name,
                             f"{entry.get('model_used', 'seasonal naive')}: {entry.get('fallback_reason') or ''}"
                             .rstrip(": ")))
        for finding in entry.get("forecast_findings") or []:
            multiple = number(finding.get("largest_multiple_of_peak"))
            reached = f"the model reached {multiple:.1f} x the history's peak; " if multiple is not None else ""
            out.append(_risk("forecast growth", "medium", name, f"{reached}{finding.get('action', '')}"))
        findings = entry.get("data_quality") or []
        for finding in findings:
            if finding.get("kind") == "spike":
                ranges = finding.get("ranges") or []
                first = f", first at {ranges[0][0]}" if ranges and ranges[0] else ""
                peak, median = number(finding.get("max_value")), number(finding.get("median"))
                size = f" up to {peak:g} (median {median:g})" if peak is not None and median is not None else ""
                out.append(_risk("demand spike", "medium", name,
                                 f"{finding.get('hours')} h of history{size}{first}: kept as demand, check the source"))
        if findings:
            parts = []
            for finding in findings:
                hours = finding.get("hours")
                parts.append(f"{finding.get('kind')}" + (f" ({hours} h)" if hours is not None else "")
                             + (f": {finding['action']}" if finding.get("action") else ""))
            out.append(_risk("data quality", "info", name, "; ".join(parts)))
    return out


def backtest_risks(meta: dict[str, Any]) -> list[dict[str, str]]:
    """q99 under-coverage and series that lose to the seasonal naive, from each series' backtest block."""
    out = []
    for entry in pick(meta, "series", default=[]) or []:
        block = entry.get("backtest") if isinstance(entry, dict) else None
        if not isinstance(block, dict) or not isinstance(block.get("model"), dict):
            continue
        name = str(entry.get("series") or label(entry, SERIES_KEY))
        model = block["model"]
        below = number(pick(pick(model, "below", default={}), "q99"))
        if below is not None and below < Q99_COVERAGE_FLOOR:
            out.append(_risk("q99 under-coverage", "high" if below < Q99_COVERAGE_HIGH else "medium", name,
                             f"actuals at or below the q99 forecast in {100 * below:.1f} % of "
                             f"{model.get('hours_scored', '?')} backtest hours (99 % if calibrated): peaks sized "
                             "from q99 may be too small"))
        naive = {n: number(pick(block.get(n), "mase")) for n in ("naive24", "naive168")}
        known = {n: v for n, v in naive.items() if v is not None}
        mase = number(model.get("mase"))
        if mase is not None and known:
            best = min(known, key=lambda n: (known[n], n))
            if mase > known[best]:
                out.append(_risk("naive-beating series", "medium", name,
                                 f"the forecast loses to the seasonal naive in backtest: MASE {mase:.3f} against "
                                 f"{known[best]:.3f} for {best}"))
    return out


def accuracy_risks(accuracy: Section | None) -> list[dict[str, str]]:
    """q99 under-coverage of last month's forecast against the demand that happened (the accuracy section's table)."""
    if accuracy is None or not any(t.name == "forecast_accuracy" for t in accuracy.tables):
        return []
    table = accuracy.table("forecast_accuracy").frame
    if not present(table, *SERIES_KEY, "below_q99_pct"):
        return []
    out = []
    for row in table.to_dict("records"):
        below = number(row.get("below_q99_pct"))
        if below is not None and below < 100 * Q99_COVERAGE_FLOOR:
            out.append(_risk("q99 under-coverage", "high" if below < 100 * Q99_COVERAGE_HIGH else "medium",
                             "/".join(str(row[c]) for c in SERIES_KEY),
                             f"last month, actuals at or below the q99 forecast in {below:.1f} % of "
                             f"{row.get('hours_compared', '?')} hours (99 % if calibrated)"))
    return out


def price_risks(prices: pd.DataFrame | None) -> list[dict[str, str]]:
    """Offers the plan spends on whose catalog price is marked understated (one row per offer)."""
    if not present(prices, "region", "sku", "tier", "assumption", "usd"):
        return []
    out = []
    for row in prices.sort_values(["region", "sku", "tier"], kind="stable").itertuples(index=False):
        if "understated" not in str(row.assumption).lower():
            continue
        out.append(_risk("understated price", "medium", f"{row.region} {row.sku} {row.tier}",
                         f"the plan spends ${float(row.usd):,.0f} at a catalog price marked understated: "
                         f"{row.assumption}"))
    return out


def slo_risks(inputs: ReportInputs) -> list[dict[str, str]]:
    if not present(inputs.slo, *SERIES_KEY):
        return [_risk("slo", "medium", "all classes", "no simulation evidence: the SLOs are not verified")] if (
            present(inputs.plan, "gpus")) else []
    table = slo_table(inputs.slo)
    keys = tuple(c for c in (*SERIES_KEY, "window") if c in table.columns)
    out = []
    for row in table.to_dict("records"):
        where = label(row, keys)
        worst = number(row.get("worst_p99_over_slo"))
        if row.get("slo_met") is False or row.get("slo_met") == 0:
            out.append(_risk("slo", "high", where, "misses its SLO" + (f": p99 at {worst:.2f} x target"
                                                                        if worst is not None else "")))
        elif row.get("marginal"):
            out.append(_risk("slo", "medium", where, "met, but the confidence interval crosses the target"))
        rho = number(row.get("utilisation"))
        if rho is not None and rho > KNEE_UTILISATION + 1e-3:  # a plan loads pools up to the knee by design
            out.append(_risk("utilisation", "high" if rho >= HIGH_UTILISATION else "medium", where,
                             f"utilisation {rho:.2f}, at or past the knee {KNEE_UTILISATION}"))
    return out


def history_risks(inputs: ReportInputs) -> list[dict[str, str]]:
    """Stale history: days from the end of the history to the first hour planned (see the module docstring)."""
    if inputs.period is None or not present(inputs.history, "ts"):
        return []
    last = utc(inputs.history["ts"]).max().floor("h")
    gap = history_gap_days(last, inputs.period)
    if gap < 1:
        return []
    severity = "high" if gap > STALE_HISTORY_DAYS else "medium"
    return [_risk("stale history", severity, "demand history",
                  f"the history is {gap:.1f} days stale: its last hour is {iso_hour(last)} and the plan starts "
                  f"{iso_hour(inputs.period.start)}; the forecast bridges those {gap:.1f} days without any observed "
                  "demand")]


def commitment_risks(inputs: ReportInputs) -> list[dict[str, str]]:
    """What the history behind the reserved commitments covers (see the module docstring)."""
    reserved = (inputs.plan_meta.get("reserved") if isinstance(inputs.plan_meta, dict) else None) or {}
    made = reserved.get("commitments") or []
    if not made or not present(inputs.history, "ts"):
        return []
    stamps = utc(inputs.history["ts"])
    first, last = stamps.min().floor("h"), stamps.max().floor("h")
    days = ((last - first) / pd.Timedelta(hours=1) + 1) / 24.0
    term_days = float(made[0]["term_hours"]) / 24.0
    needed_days = needed_history_hours(float(made[0]["term_hours"])) / 24.0
    short = days < needed_days
    detail = (f"{reserved.get('commitments_gpus')} GPUs committed for {term_days:,.0f} days "
              f"({money(number(reserved.get('commitments_total_usd')))} over the term) on {days:,.1f} days of history "
              f"({iso_hour(first)} to {iso_hour(last)})")
    detail += (f": under the {needed_days:,.0f} days ({EVIDENCE_WEEKS_PER_YEAR} weeks per year of term) a commitment "
               "needs; the history cannot show whether this demand lasts the term" if short else "")
    evidence = reserved.get("evidence") or {}
    if evidence.get("limited"):
        detail += ("; so reserved replicas cover at most each model's steady load in the history (its hourly "
                   "rate's 5th percentile), and --commit-on-short-history lifts that limit")
    elif evidence.get("allowed_by_option"):
        detail += "; --commit-on-short-history allowed reserving beyond the history's steady load"
    return [_risk("commitment evidence", "medium" if short else "info", "reserved capacity", detail)]


def collect_risks(inputs: ReportInputs, accuracy: Section | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Every risk as a sorted table, plus notes on what could not be checked (``accuracy``: that section, if built)."""
    notes = []
    quota, quota_known = quota_risks(inputs.plan_meta)
    if not present(inputs.plan, "gpus"):
        notes.append("No plan was given: quota, solver-status and infeasibility checks did not run.")
    elif not quota_known:
        notes.append("Quota usage: not reported by the placement step, so quota headroom is not checked.")
    if not present(inputs.slo, *SERIES_KEY):
        notes.append("No simulation results were given: SLO and utilisation checks did not run.")
    if not pick(inputs.forecast_meta, "series"):
        notes.append("No forecast metadata was given: fallback and data-quality checks did not run.")
    rows = [*quota, *slo_risks(inputs), *forecast_risks(inputs.forecast_meta), *backtest_risks(inputs.forecast_meta),
            *accuracy_risks(accuracy), *price_risks(inputs.plan_prices), *infeasibility_risks(inputs.plan_meta),
            *history_risks(inputs), *commitment_risks(inputs),
            *(_risk("pipeline", "medium", "", str(text)) for text in inputs.risks_extra)]
    frame = pd.DataFrame(rows, columns=["kind", "severity", "where", "detail"])
    frame = frame.assign(rank=frame["severity"].map(SEVERITY_RANK)).sort_values(
        ["rank", "kind", "where", "detail"], kind="stable").drop(columns="rank").reset_index(drop=True)
    return frame, notes


def risks_section(inputs: ReportInputs, accuracy: Section | None = None) -> Section:
    section = Section("risks", "Risks")
    table, notes = collect_risks(inputs, accuracy)
    counts = table["severity"].value_counts().to_dict()
    if table.empty:
        section.paragraphs.append("No risk found by the checks that could run (below).")
    else:
        section.paragraphs.append(", ".join(f"{counts.get(s, 0)} {s}" for s in SEVERITY_RANK) + ".")
    section.paragraphs += notes
    changed = pick(inputs.forecast_meta, "findings", default=[]) or []
    if changed:
        section.paragraphs.append("What the forecast did to the data: " + " ".join(f"{line}." for line in changed))
    shown = table[(table["severity"] != "info") | (table["kind"] != "data quality")]
    section.bullets = [f"[{r.severity}] {r.kind}: {r.where + ': ' if r.where else ''}{r.detail}"
                       for r in shown.itertuples(index=False)]
    info = int(((table["severity"] == "info") & (table["kind"] == "data quality")).sum())
    if info:
        section.bullets.append(f"[info] {info} series with data-quality findings (table below).")
    section.paragraphs.append(f"Checks: quota at or above {100 * QUOTA_NEAR_SHARE:.0f} % of its limit, utilisation "
                              f"above the knee {KNEE_UTILISATION}, SLO misses and marginal passes, forecast "
                              "fallbacks, data-quality findings, q99 coverage under "
                              f"{100 * Q99_COVERAGE_FLOOR:.0f} % (in backtest and last month), forecasts that lose "
                              "to the seasonal naive in backtest, catalog prices marked understated that the plan "
                              "spends on, solver status and infeasibilities, how stale the history is against "
                              "the first hour planned, and what the history behind reserved commitments covers.")
    section.tables.append(Table("risks", "Risks, most severe first", table))
    section.facts = {"high": int(counts.get("high", 0)), "medium": int(counts.get("medium", 0)),
                     "info": int(counts.get("info", 0))}
    return section

"""From one pipeline run and the run history to the report's inputs.

The report builder (``build``) is pure and reads plain frames and dicts
(``ReportInputs``); this module fills them from what ``planner plan`` computed this
month and what the run history kept from last month. Only the mapping lives here:
column renames between the simulator's per-class table and the report's SLO table,
the plan JSON's bounds flattened to ``name -> USD``, and the quota usage per (region,
SKU) of the plan's busiest period.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner.catalog import Catalog
from planner.loop.compare import comparison_table
from planner.loop.pipeline import PipelineResult
from planner.placement.capacity import at_smallest_pool, pool_gain_at, pool_gains
from planner.placement.check import quota_limit_gpus
from planner.report.economics import deployment_table, prefix_figures, served_cost_per_m_tokens
from planner.report.evidence import metric_columns
from planner.report.inputs import ReportInputs
from planner.report.regions import idle_regions, region_facts
from planner.scenario import Scenario
from planner.slo import SLO_METRICS, p99_column, target_column

WALL_CLOCK_KEYS = frozenset({"solve_time_s", "seconds"})
"""Timings vary between runs of the same inputs; the report leaves them out so that it is reproducible
(they stay in plan.json and in the run history)."""

SLO_COLUMNS = {
    **{simulated: reported for m in SLO_METRICS for simulated, reported in zip(
        (p99_column(m), f"{p99_column(m)}_ci95", target_column(m)), metric_columns(m), strict=True)},
    "rejected_fraction": "rejections",
}
"""The simulator's per-class columns and the report's names for them (every SLO metric, then rejections)."""


def capacity_utilisation(per_class: pd.DataFrame, plan: pd.DataFrame, capacity: pd.DataFrame) -> pd.Series:
    """Each row's pool load as a fraction of what its replicas carry within the SLOs.

    A continuously batching replica is busy whenever one request is in flight, so its
    busy fraction says nothing about headroom; the calibrated capacity does. For a pool
    with n_u replicas of each deployment u = (SKU, TP) in the window's period, and class rates λ_k::

        ρ = Σ_k λ_k / Σ_u n_u · cap(u, m, k)

    (the Mélange load of the pool). ρ = 1 is the load at which the calibrated p99s sit
    exactly at their SLOs; the plan aims at ``utilisation_cap`` at the forecast quantile. A table
    calibrated at several pool sizes charges n_u replicas n_u · g_u(n_u) · cap(u, m, k), as placement does.
    """
    gains = pool_gains(capacity)
    caps = {(str(m), str(s), int(g), str(k)): float(v) for m, s, g, k, v in capacity[at_smallest_pool(capacity)][
        ["model", "sku", "tp_degree", "traffic_class", "max_rps_per_replica"]].itertuples(index=False)}
    replicas = plan.groupby([plan["period"].astype(str), "region", "model", "sku", "tp_degree"])["replicas"].sum()
    pools: dict[tuple[str, str, str], list[tuple[str, int, int]]] = {}
    for (period, region, model, sku, tp), n in replicas.items():
        pools.setdefault((str(period), str(region), str(model)), []).append((str(sku), int(tp), int(n)))
    load: dict[tuple[str, str, str], float] = {}
    for row in per_class.itertuples(index=False):
        key = (str(row.period), str(row.region), str(row.model))
        pooled = sum(n * pool_gain_at(gains.get((key[2], sku, tp), ()), n)
                     * caps.get((key[2], sku, tp, str(row.traffic_class)), 0.0) for sku, tp, n in pools.get(key, []))
        rate = float(row.offered_rps)
        load[key] = load.get(key, 0.0) + (rate / pooled if pooled > 0 else (float("inf") if rate > 0 else 0.0))
    return pd.Series([load[(str(r.period), str(r.region), str(r.model))] for r in per_class.itertuples(index=False)],
                     index=per_class.index, dtype=float)


def slo_evidence(per_class: pd.DataFrame, plan: pd.DataFrame, capacity: pd.DataFrame) -> pd.DataFrame:
    """The simulator's per-class rows (with ``window``) in the report's SLO columns."""
    if per_class is None or per_class.empty:
        return pd.DataFrame()
    keep = ["region", "model", "traffic_class", *(c for c in ("window", "period") if c in per_class.columns),
            *[c for c in SLO_COLUMNS if c in per_class.columns], "replicas", "offered_rps", "slo_met"]
    frame = per_class[[c for c in keep if c in per_class.columns]].rename(columns=SLO_COLUMNS)
    if {"period", "offered_rps"} <= set(per_class.columns):
        frame["utilisation"] = capacity_utilisation(per_class, plan, capacity).round(4)
    return frame


def _usd(value: Any) -> float | None:
    if isinstance(value, dict):
        value = value.get("usd")
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def quota_usage(plan: pd.DataFrame, scenario: Scenario, catalog: Catalog) -> list[dict[str, Any]]:
    """Peak GPUs per (serving region, SKU) over the plan's periods, against the quota."""
    if plan.empty:
        return []
    per_period = plan.groupby(["period", "region", "sku"], sort=True)["gpus"].sum().reset_index()
    peak = per_period.groupby(["region", "sku"], sort=True)["gpus"].max()
    return [{"region": region, "sku": sku, "used_gpus": int(gpus),
             "quota_gpus": quota_limit_gpus(scenario, catalog, str(region), str(sku))}
            for (region, sku), gpus in peak.items()]


def plan_meta_for_report(result: PipelineResult, scenario: Scenario, catalog: Catalog) -> dict[str, Any]:
    """The plan JSON's figures, with bounds and baselines as ``name -> USD`` and the quota usage."""
    meta = {k: v for k, v in result.loop.placement.meta.items() if k not in WALL_CLOCK_KEYS}
    bounds = {name: _usd(value) for name, value in (meta.get("lower_bounds") or {}).items()}
    statuses = {name: value for name, value in (meta.get("lower_bounds_status") or {}).items()}
    statuses.update({name: value for name, value in (meta.get("lower_bounds") or {}).items()
                     if isinstance(value, dict) and "status" in value})
    baselines = {}
    for name, value in (meta.get("baselines") or {}).items():
        if name.endswith("_pct"):  # a saving in per cent, not a plan's cost
            continue
        usd = _usd(value)
        if usd is not None:
            label = f"{name} ({value['sku']})" if isinstance(value, dict) and value.get("sku") else name
            baselines[label] = usd
            if isinstance(value, dict) and "status" in value:
                statuses[label] = value
    meta.update({
        "lower_bounds": {k: v for k, v in bounds.items() if v is not None},
        "baselines": baselines,
        "reference_status": {name: {k: v for k, v in value.items() if k in ("status", "gap")}
                             for name, value in statuses.items() if isinstance(value, dict)},
        "objective_usd": (meta.get("cost_usd") or {}).get("total"),
        "policy": result.loop.policy,
        "horizon_hours": scenario.horizon_hours if result.window is None else result.window.hours,
        "quota_usage": quota_usage(result.loop.placement.plan, scenario, catalog),
    })
    return meta


def pipeline_risks(result: PipelineResult) -> list[str]:
    """Risks only the pipeline knows of: unmet SLOs, calibration failures, policies that miss their SLOs.

    (Stale history is a rule of the risks section itself: it needs only the history and the period.)
    """
    risks = [f"SLO still missed after {len(result.loop.rounds)} round(s): {m.describe()}" for m in result.loop.misses]
    calibration = result.loop.calibration
    for failure in getattr(calibration, "failures", []) or []:
        risks.append(f"{failure['model']} on {failure.get('tp_degree', '?')} x {failure['sku']} cannot meet the SLOs "
                     "at any load, so it is not used: "
                     f"{failure['reason']}")
    for outcome in result.comparison or []:
        if not outcome.result.converged:
            risks.append(f"policy {outcome.policy} does not meet every SLO within {len(outcome.result.rounds)} "
                         f"round(s); its cost is a lower estimate")
    return risks


def _economics(result: PipelineResult) -> tuple[pd.DataFrame, dict[str, float], dict[str, float]]:
    """The deployments table and the served cost per million output tokens, and per million prompt and output
    tokens (:mod:`planner.report.economics`)."""
    placement = result.loop.placement
    hours = dict(zip(placement.periods["period"].astype(str), placement.periods["hours"], strict=True)) \
        if len(placement.periods) else {}
    units = (getattr(result.loop.calibration, "meta", None) or {}).get("units", [])
    table = deployment_table(placement.plan, hours, placement.meta.get("deployments", []), units)
    cached = prefix_figures(result.loop.slo, result.loop.simulation_meta)
    table = table.drop(columns=list(cached.columns[1:])).merge(cached, on="model", how="left")[table.columns]
    window = result.window
    span = (str(window.start) if window else None, str(window.end) if window else None)
    served = served_cost_per_m_tokens(placement.plan, result.forecast.forecast, result.history, *span)
    served_all = served_cost_per_m_tokens(placement.plan, result.forecast.forecast, result.history, *span, prompt=True)
    return table, served, served_all


def plan_prices(plan: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """Per (region, sku, tier) the plan spends on: the plan's USD there, the catalog price and its assumption note."""
    columns = ["region", "sku", "tier", "usd", "usd_per_gpu_hour", "assumption"]
    if plan.empty:
        return pd.DataFrame(columns=columns)
    spent = plan.groupby(["region", "sku", "tier"], sort=True, as_index=False)["usd"].sum()
    offers = catalog.offers.drop(columns="region").rename(columns={"region_key": "region"})  # cloud:region keys
    offers = offers[["region", "sku", "tier", "usd_per_gpu_hour", "assumption"]].drop_duplicates(
        ["region", "sku", "tier"])
    merged = spent.merge(offers, on=["region", "sku", "tier"], how="left")
    merged["assumption"] = merged["assumption"].fillna("").astype(str)
    return merged[columns]


def _tightest_ttft_class(scenario: Scenario) -> str | None:
    """The class with the tightest TTFT SLO (None when no class sets one)."""
    timed = [c for c in scenario.classes if c.ttft_p99_ms is not None]
    return min(timed, key=lambda c: (c.ttft_p99_ms, c.name)).name if timed else None


def report_inputs(month: str, as_of: str, scenario: Scenario, result: PipelineResult, catalog: Catalog, *,
                  previous_plan: pd.DataFrame | None, previous_forecast: pd.DataFrame | None,
                  what_if: list[str] | None = None, alternatives: pd.DataFrame | None = None) -> ReportInputs:
    """Everything the report shows for ``month``, from this run and last month's plan and forecast
    (None when the run history kept none); ``what_if``: the run's changes to its inputs, as given."""
    deployments, served, served_all = _economics(result)
    return ReportInputs(
        month=month, as_of=as_of, scenario_name=scenario.name, what_if=list(what_if or []),
        alternatives=alternatives, tightest_class=_tightest_ttft_class(scenario),
        forecast=result.forecast.forecast, forecast_meta=result.forecast.metadata,
        history=result.history, plan=result.loop.placement.plan,
        plan_meta=plan_meta_for_report(result, scenario, catalog),
        previous_plan=previous_plan,
        previous_forecast=previous_forecast,
        slo=slo_evidence(result.loop.slo, result.loop.placement.plan, result.loop.capacity),
        loop_rounds=[{k: v for k, v in r.items() if k not in WALL_CLOCK_KEYS} for r in result.loop.rounds],
        policy_comparison=comparison_table(result.comparison) if result.comparison else None,
        risks_extra=pipeline_risks(result),
        period=result.window,
        deployments=deployments,
        served_usd_per_m_output_tokens=served,
        served_usd_per_m_tokens=served_all,
        plan_prices=plan_prices(result.loop.placement.plan, catalog),
        idle_regions=idle_regions(region_facts(scenario, catalog, result.loop.placement.plan,
                                               sorted(result.forecast.forecast["region"].astype(str).unique()))),
    )

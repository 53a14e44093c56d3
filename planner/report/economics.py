r"""What a plan's deployments cost per token: at calibrated capacity, and on the demand actually served.

**At capacity.** A deployment u = (model, SKU, TP) calibrated at λ*_u requests per second per
replica (the mix of classes the calibration ran, shares p_k, mean output O_k tokens) produces

    tokens_u = λ*_u · Σ_k p_k O_k / TP            output tokens per second per GPU

and, at the plan's average price P_u per GPU-hour for it (over regions and tiers, weighted by
GPU-hours), costs

    c_u = P_u · 10⁶ / (3600 · tokens_u)          USD per million output tokens.

That is the floor the deployment reaches when every replica runs at its SLO-bound rate.

**Served.** The plan's cost for a model over its hours, divided by the output tokens the
forecast says that model serves in those hours (requests per hour per series times the
history's mean output tokens per request of the series' class), is what each million
output tokens actually costs, with the headroom for the forecast quantile, the utilisation
cap, redundancy and the troughs paid for. The same cost over prompt and output tokens together
is the figure to hold against an API's blended price: charging every GPU-hour to output tokens
alone also charges them the prefill of prompts several times longer than the answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from planner.contracts import DEPLOYMENT_KEY, ENGINE_SETTING_COLUMNS

DEPLOYMENT_COLUMNS = (
    *DEPLOYMENT_KEY, *ENGINE_SETTING_COLUMNS, "replicas_peak", "gpus_peak", "usd",
    "usd_per_gpu_hour", "rps_per_gpu", "output_tokens_per_s_per_gpu", "usd_per_m_output_tokens_at_capacity",
    "prefix_hit_rate", "prefill_tokens_saved_per_s", "launch",
)


def prefix_figures(slo: pd.DataFrame | None, simulation_meta: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per model, what the prefix cache served in the loop's simulated windows: ``prefix_hit_rate`` (the share of
    prompt tokens served from cache, each class's rate weighted by its arrivals) and ``prefill_tokens_saved_per_s``
    (cached prompt tokens per second of measured time, summed over the model's pools, averaged over windows)."""
    columns = ["model", "prefix_hit_rate", "prefill_tokens_saved_per_s"]
    needed = {"model", "period", "arrived", "prefix_hit_rate", "prefill_tokens_saved"}
    if slo is None or slo.empty or not needed <= set(slo.columns) or not simulation_meta:
        return pd.DataFrame(columns=columns)
    seconds = float(simulation_meta[0].get("duration_s", 0.0)) - float(simulation_meta[0].get("warmup_s", 0.0))
    rows = slo.dropna(subset=["prefix_hit_rate"])
    out = []
    for model, group in rows.groupby("model", sort=True):
        weight = group["arrived"].astype(float)
        rate = float((group["prefix_hit_rate"] * weight).sum() / weight.sum()) if weight.sum() > 0 else np.nan
        saved = group.groupby("period")["prefill_tokens_saved"].sum()
        out.append({"model": model, "prefix_hit_rate": rate,
                    "prefill_tokens_saved_per_s": float(saved.mean()) / seconds if seconds > 0 else np.nan})
    return pd.DataFrame(out, columns=columns)


def _mix_output_tokens(unit: Mapping[str, Any]) -> float:
    """Σ_k p_k O_k: mean output tokens per request of the mix a unit was calibrated on."""
    classes = unit.get("classes") or {}
    return float(sum(c.get("share", 0.0) * c.get("output_mean_tokens", 0.0) for c in classes.values()))


def deployment_table(plan: pd.DataFrame, hours: Mapping[str, float], deployments: Sequence[Mapping[str, Any]],
                     units: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (model, SKU, TP) the plan runs: settings, size, price, calibrated throughput and cost per token.

    ``hours``: hours of each plan period; ``deployments``: the plan JSON's list (settings and launch
    command); ``units``: the calibration's per-unit records (its JSON ``meta.units``), empty when the
    capacities were not calibrated (then the throughput columns are empty).
    """
    if plan is None or plan.empty:
        return pd.DataFrame(columns=list(DEPLOYMENT_COLUMNS))
    frame = plan.assign(gpu_hours=plan["gpus"] * plan["period"].astype(str).map(hours).fillna(1.0))
    per_period = frame.groupby([*DEPLOYMENT_KEY, "period"])[["replicas", "gpus"]].sum()
    peak = per_period.groupby(level=list(range(len(DEPLOYMENT_KEY)))).max()
    cost = frame.groupby(list(DEPLOYMENT_KEY))[["usd", "gpu_hours"]].sum()
    table = peak.rename(columns={"replicas": "replicas_peak", "gpus": "gpus_peak"}).join(cost).reset_index()
    table["usd_per_gpu_hour"] = table["usd"] / table["gpu_hours"]
    launch = pd.DataFrame(list(deployments)) if deployments else pd.DataFrame(columns=[*DEPLOYMENT_KEY, "engine"])
    table = table.merge(launch, on=list(DEPLOYMENT_KEY), how="left")
    calibrated = {(str(u["model"]), str(u["sku"]), int(u["tp_degree"])): u
                  for u in units if u.get("status") != "infeasible"}
    rps, tokens = [], []
    for row in table.itertuples(index=False):
        unit = calibrated.get((str(row.model), str(row.sku), int(row.tp_degree)))
        rate = float(unit["mix_rps_per_replica"]) / int(row.tp_degree) if unit else np.nan
        rps.append(rate)
        tokens.append(rate * _mix_output_tokens(unit) if unit else np.nan)
    table["rps_per_gpu"] = rps
    table["output_tokens_per_s_per_gpu"] = tokens
    with np.errstate(divide="ignore", invalid="ignore"):
        table["usd_per_m_output_tokens_at_capacity"] = table["usd_per_gpu_hour"] * 1e6 / (
            3600.0 * table["output_tokens_per_s_per_gpu"])
    for column in DEPLOYMENT_COLUMNS:
        if column not in table.columns:
            table[column] = np.nan
    table = table.loc[:, list(DEPLOYMENT_COLUMNS)]
    return table.sort_values(list(DEPLOYMENT_KEY), kind="stable").reset_index(drop=True)


def tokens_per_request(history: pd.DataFrame | None, *, prompt: bool = False) -> dict[tuple[str, str], float]:
    """(model, class) -> mean output tokens per request over the history (with ``prompt``: prompt + output)."""
    columns = ["output_tokens_sum", *(["prompt_tokens_sum"] if prompt else [])]
    if history is None or history.empty or not set(columns) <= set(history.columns):
        return {}
    sums = history.groupby(["model", "traffic_class"])[[*columns, "requests"]].sum()
    sums = sums[sums["requests"] > 0]
    tokens = sums[columns].sum(axis=1)
    return {(str(m), str(k)): float(tokens[(m, k)] / row.requests) for (m, k), row in sums.iterrows()}


def served_cost_per_m_tokens(plan: pd.DataFrame, forecast: pd.DataFrame | None, history: pd.DataFrame | None,
                             first_ts: str | None, end_ts: str | None, *, prompt: bool = False) -> dict[str, float]:
    """model -> plan USD per million output tokens (with ``prompt``: prompt and output tokens) the forecast serves in
    [first_ts, end_ts) (module docstring)."""
    per_request = tokens_per_request(history, prompt=prompt)
    if forecast is None or forecast.empty or not per_request or plan is None or plan.empty:
        return {}
    rows = forecast
    if first_ts and end_ts:
        stamps = pd.to_datetime(rows["ts"], utc=True)
        rows = rows[(stamps >= pd.Timestamp(first_ts)) & (stamps < pd.Timestamp(end_ts))]
    tokens = rows.assign(tokens=[m * per_request.get((str(model), str(k)), np.nan) for m, model, k in
                                 zip(rows["mean"], rows["model"], rows["traffic_class"], strict=True)])
    by_model = tokens.groupby("model")["tokens"].sum(min_count=1)
    usd = plan.groupby("model")["usd"].sum()
    return {str(m): float(usd[m] * 1e6 / by_model[m]) for m in usd.index
            if m in by_model.index and np.isfinite(by_model[m]) and by_model[m] > 0}

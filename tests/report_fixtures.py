"""Small synthetic report inputs: every section has something to show, and one of each risk.

Two origins x one model x two classes, 21 days of hourly history before the as-of
time, last month's forecast over the last 7 observed days and 7 more, a 48-hour
forecast, a two-period plan and last month's plan, SLO rows with one miss, one
marginal pass and one class past the utilisation knee, two loop rounds and four
policies. Deterministic: one seeded Generator, values rounded.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.report.inputs import ReportInputs

AS_OF = "2026-11-01T00:00:00Z"
SERIES = [("eu-west", "llama-3.1-8b", "batch", 40.0), ("eu-west", "llama-3.1-8b", "interactive", 120.0),
          ("us-east", "llama-3.1-8b", "batch", 60.0), ("us-east", "llama-3.1-8b", "interactive", 200.0)]


def _shape(ts: pd.DatetimeIndex, base: float) -> np.ndarray:
    hour = ts.hour.to_numpy()
    return base * (1.0 + 0.5 * np.sin(2 * np.pi * (hour - 8) / 24.0))


def _iso(ts: pd.DatetimeIndex) -> list[str]:
    return list(ts.strftime("%Y-%m-%dT%H:%M:%SZ"))


def small_history(rng: np.random.Generator) -> pd.DataFrame:
    ts = pd.date_range(end=pd.Timestamp(AS_OF) - pd.Timedelta(hours=1), periods=21 * 24, freq="h")
    parts = []
    for region, model, cls, base in SERIES:
        requests = rng.poisson(_shape(ts, base))
        parts.append(pd.DataFrame({"ts": _iso(ts), "region": region, "model": model, "traffic_class": cls,
                                   "requests": requests, "prompt_tokens_sum": requests * 900,
                                   "output_tokens_sum": requests * 200}))
    return pd.concat(parts, ignore_index=True)


def _forecast(ts: pd.DatetimeIndex, scale: float, fallback_series: str | None = None) -> pd.DataFrame:
    parts = []
    for region, model, cls, base in SERIES:
        mean = np.round(_shape(ts, base) * scale, 3)
        used = "seasonal_naive(168)" if cls == fallback_series else "fourier(d=3,w=20)+trend+arima(2,0,1) log1p"
        parts.append(pd.DataFrame({"region": region, "model": model, "traffic_class": cls, "ts": _iso(ts),
                                   "mean": mean, "q50": np.round(mean * 0.98, 3), "q90": np.round(mean * 1.15, 3),
                                   "q95": np.round(mean * 1.2, 3), "q99": np.round(mean * 1.35, 3),
                                   "model_used": used}))
    return pd.concat(parts, ignore_index=True)


def _plan(rows: list[tuple[str, str, str, str, int, int, float]]) -> pd.DataFrame:
    records = []
    for period in (0, 1):
        for region, sku, model, tier, replicas, gpus_per_replica, price in rows:
            extra = 1 if (period == 1 and tier == "on_demand") else 0
            n = replicas + extra
            records.append({"period": period, "region": region, "sku": sku, "model": model, "tier": tier,
                            "replicas": n, "gpus": n * gpus_per_replica,
                            "usd": round(n * gpus_per_replica * price * 24, 2),
                            "hours": 24.0})
    return pd.DataFrame(records)


def small_inputs(seed: int = 7) -> ReportInputs:
    rng = np.random.default_rng(seed)
    history = small_history(rng)
    forecast = _forecast(pd.date_range(AS_OF, periods=48, freq="h"), 1.05, fallback_series="batch")
    forecast.loc[~((forecast["region"] == "eu-west") & (forecast["traffic_class"] == "batch")), "model_used"] = \
        "fourier(d=3,w=20)+trend+arima(2,0,1) log1p"
    previous = _forecast(pd.date_range(pd.Timestamp(AS_OF) - pd.Timedelta(days=7), periods=14 * 24, freq="h"), 0.93)
    forecast_meta = {
        "parameters": {"measure": "requests", "horizon_hours": 48},
        "backtest_overall": {"model": {"mase": 0.78, "coverage90": 0.908}, "mase_ratio_vs_best_naive": 0.742},
        "series": [
            {"series": "eu-west/llama-3.1-8b/batch", "region": "eu-west", "model": "llama-3.1-8b",
             "traffic_class": "batch", "model_used": "seasonal_naive(168)", "fallback": True,
             "fallback_reason": "history too short: 300 observed hours < 336", "data_quality": []},
            {"series": "eu-west/llama-3.1-8b/interactive", "region": "eu-west", "model": "llama-3.1-8b",
             "traffic_class": "interactive", "fallback": False, "fallback_reason": None,
             "data_quality": [{"kind": "outage", "series": "eu-west/llama-3.1-8b/interactive", "hours": 3,
                               "action": "masked, not learned"}]},
        ],
    }
    plan = _plan([("aws:us-east-1", "H100", "llama-3.1-8b", "reserved", 4, 1, 2.1),
                  ("aws:us-east-1", "H100", "llama-3.1-8b", "on_demand", 1, 1, 3.9),
                  ("gcp:europe-west4", "H100", "llama-3.1-8b", "reserved", 3, 1, 2.3),
                  ("gcp:europe-west4", "L4", "llama-3.1-8b", "spot", 2, 1, 0.35)])
    previous_plan = _plan([("aws:us-east-1", "H100", "llama-3.1-8b", "reserved", 3, 1, 2.1),
                           ("aws:us-east-1", "A100-80GB", "llama-3.1-8b", "on_demand", 2, 1, 3.2),
                           ("gcp:europe-west4", "H100", "llama-3.1-8b", "reserved", 3, 1, 2.3)])
    total = float(plan["usd"].sum())
    plan_meta = {"backend": "highs", "status": "optimal", "objective": total, "bound": total, "gap": 0.0,
                 "solve_time_s": 0.12, "policy": "drr-wspt", "horizon_hours": 48,
                 "lower_bounds": {"lp_relaxation_usd": round(total * 0.96, 2), "elastic_usd": round(total * 0.88, 2)},
                 "baselines": {"best_single_sku_usd": round(total * 1.17, 2),
                               "all_on_demand_usd": round(total * 1.6, 2)},
                 "quota_usage": [{"region": "aws:us-east-1", "sku": "H100", "used_gpus": 6, "quota_gpus": 6},
                                 {"region": "gcp:europe-west4", "sku": "H100", "used_gpus": 3, "quota_gpus": 16}],
                 "excluded": ["gcp:europe-west4 L4 llama-3.1-70b: quota of 0 L4 GPUs"]}
    slo = pd.DataFrame([
        {"region": "aws:us-east-1", "model": "llama-3.1-8b", "traffic_class": "interactive", "ttft_p99_ms": 410.0,
         "ttft_p99_ci_ms": 25.0, "ttft_slo_ms": 500.0, "e2e_p99_ms": 7800.0, "e2e_slo_ms": 10000.0, "slo_met": True,
         "utilisation": 0.71, "rejections": 0},
        {"region": "aws:us-east-1", "model": "llama-3.1-8b", "traffic_class": "batch", "ttft_p99_ms": 2900.0,
         "ttft_p99_ci_ms": 180.0, "ttft_slo_ms": 3000.0, "e2e_p99_ms": 41000.0, "e2e_slo_ms": 60000.0,
         "slo_met": True, "utilisation": 0.88, "rejections": 0},
        {"region": "gcp:europe-west4", "model": "llama-3.1-8b", "traffic_class": "interactive", "ttft_p99_ms": 560.0,
         "ttft_p99_ci_ms": [530.0, 590.0], "ttft_slo_ms": 500.0, "e2e_p99_ms": 9100.0, "e2e_slo_ms": 10000.0,
         "slo_met": False, "utilisation": 0.79, "rejections": 12},
        {"region": "gcp:europe-west4", "model": "llama-3.1-8b", "traffic_class": "batch", "ttft_p99_ms": 1200.0,
         "ttft_p99_ci_ms": 90.0, "ttft_slo_ms": 3000.0, "e2e_p99_ms": 30000.0, "e2e_slo_ms": 60000.0,
         "slo_met": True, "utilisation": 0.64, "rejections": 0},
    ])
    loop_rounds = [
        {"round": 1, "failed": ["gcp:europe-west4/llama-3.1-8b/interactive"], "shortfall": {"ttft_p99_ms": 140.0},
         "change": "derated H100 capacity for interactive by 22 %", "cost_usd": round(total * 0.93, 2)},
        {"round": 2, "failed": ["gcp:europe-west4/llama-3.1-8b/interactive"], "shortfall": {"ttft_p99_ms": 60.0},
         "change": "derated H100 capacity for interactive by 11 %", "cost_usd": total},
    ]
    policies = pd.DataFrame({"policy": ["fcfs", "cmu", "wspt", "drr-wspt"], "gpus": [13.0, 11.0, 10.0, 10.0],
                             "usd": [round(total * 1.3, 2), round(total * 1.1, 2), round(total * 1.02, 2), total],
                             "slo_met": [True, True, False, True]})
    return ReportInputs(month="2026-11", as_of=AS_OF, scenario_name="demo", forecast=forecast,
                        forecast_meta=forecast_meta, history=history, plan=plan, plan_meta=plan_meta,
                        previous_plan=previous_plan, previous_forecast=previous, slo=slo, loop_rounds=loop_rounds,
                        policy_comparison=policies, alternatives=_alternatives(total), tightest_class="interactive",
                        risks_extra=["catalog prices are the 2025 snapshot; check current on-demand prices"])


def _alternatives(total: float) -> pd.DataFrame:
    """The neighbouring tier choices of the small plan, as :func:`planner.loop.alternatives.what_would_change`
    returns them: one cheaper, one dearer, one infeasible."""
    return pd.DataFrame([
        {"choice": "with spot", "set": """--set 'capacity.tiers=["reserved", "on_demand", "spot"]'""",
         "feasible": True, "usd": round(total * 0.93, 2), "usd_vs_plan": round(total * -0.07, 2),
         "usd_vs_plan_pct": -7.0, "note": "placement only: not re-simulated"},
        {"choice": "without reserved", "set": """--set 'capacity.tiers=["on_demand"]'""", "feasible": True,
         "usd": round(total * 1.4, 2), "usd_vs_plan": round(total * 0.4, 2), "usd_vs_plan_pct": 40.0,
         "note": "placement only: not re-simulated"},
        {"choice": "without on_demand", "set": """--set 'capacity.tiers=["reserved"]'""", "feasible": False,
         "usd": None, "usd_vs_plan": None, "usd_vs_plan_pct": None,
         "note": "placement is infeasible (quota)"},
    ])


def empty_inputs() -> ReportInputs:
    """Only the header: every section must say 'No data yet' rather than fail."""
    return ReportInputs(month="2026-11", as_of=AS_OF, scenario_name="demo")

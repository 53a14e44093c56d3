"""Small placement instances built from plain values, shared by the placement tests.

Everything here is synthetic on purpose: prices, quotas and capacities are round numbers
so that a test can reason about the optimum by hand or by exhaustive search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planner.catalog import OFFER_COLUMNS, SKU_COLUMNS, Catalog
from planner.placement.capacity import validate_capacity
from planner.placement.instance import build_instance
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.profiles.step_model import StepModel
from planner.scenario import parse_scenario

START = pd.Timestamp("2026-11-02T00:00:00Z")  # a Monday


@dataclass
class Region:
    key: str
    zone: str
    rtt_ms: dict[str, float]  # origin -> RTT
    offers: dict[tuple[str, str], float]  # (sku, tier) -> USD per GPU-hour
    quota: int = 64
    scenario_quota: dict[str, int] = field(default_factory=dict)


def scenario_dict(regions: list[Region], origins: dict[str, tuple[str, list[str]]], models: dict[str, list[str]],
                  classes: dict[str, dict[str, Any]], *, capacity: dict[str, Any] | None = None,
                  horizon: str = "7d", tps: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """A scenario as a dict; ``tps`` narrows a model's tensor-parallel degrees (default: all)."""
    shares = 1.0 / len(classes)
    return {
        "name": "test",
        "horizon": horizon,
        "seeds": {"base": 1},
        "regions": {
            "serving": [{"key": r.key, "zone": r.zone, **({"quotas": r.scenario_quota} if r.scenario_quota else {})}
                        for r in regions],
            "origins": [{"name": name, "zone": zone, "residency": residency}
                        for name, (zone, residency) in origins.items()],
            "latency_ms": {o: {r.key: r.rtt_ms[o] for r in regions} for o in origins},
        },
        "models": [{"name": m, "skus": skus, **({"tp": list(tps[m])} if tps and m in tps else {})}
                   for m, skus in models.items()],
        "classes": [
            {"name": name, "weight": 1.0, "share": shares, "ttft_p99_ms": 1000.0, "e2e_p99_ms": 20000.0,
             "max_queue_wait_ms": 1500.0, "latency_budget_ms": 100.0, **spec}
            for name, spec in classes.items()
        ],
        "policy": {"name": "fcfs"},
        "capacity": capacity or {},
    }


def catalog(regions: list[Region]) -> Catalog:
    skus = sorted({sku for r in regions for sku, _ in r.offers})
    sku_rows = [{"sku": s, "vendor": "NVIDIA", "hbm_gb": 80.0, "hbm_bandwidth_gb_per_s": 3000.0, "bf16_tflops": 900.0,
                 "fp8_tflops": np.nan, "intranode_bandwidth_gb_per_s": 900.0, "tdp_w": 700.0, "max_gpus_per_node": 8,
                 "source": "test"} for s in skus]
    offers = []
    for r in regions:
        cloud, region = r.key.split(":")
        for (sku, tier), price in sorted(r.offers.items()):
            offers.append({"cloud": cloud, "region": region, "region_key": r.key, "geo": r.zone, "sku": sku,
                           "tier": tier, "usd_per_gpu_hour": price, "gpus_per_instance": 8, "instance_type": "test",
                           "quota_gpus": r.quota, "available": True, "assumption": "", "source": "test"})
    return Catalog(pd.DataFrame(sku_rows, columns=list(SKU_COLUMNS)), pd.DataFrame(offers, columns=list(OFFER_COLUMNS)))


NEUTRAL_STEP = StepModel.linear(15.0, 0.0004, 0.03)
"""A flat step model (15 ms + 0.0004 ms per KV token read + 0.03 ms per prefill token)."""


def profiles(rows: list[tuple[str, str, int]], engine: str = "vllm", *, max_num_seqs: int = 200,
             max_num_batched_tokens: int = 4096) -> pd.DataFrame:
    """(model, sku, GPUs per replica) rows with neutral step-time figures, under one engine."""
    return pd.DataFrame([{"model": m, "sku": s, "tp_degree": g, "engine": engine, "weights_gb": 16.0,
                          "kv_bytes_per_token": 131072, "kv_block_tokens": 16, "gpu_memory_utilization": 0.9,
                          "kv_capacity_tokens": 400000 * g, "max_num_seqs": max_num_seqs,
                          "max_num_batched_tokens": max_num_batched_tokens, "source": "roofline",
                          "source_detail": "test", "err_points": 0, "err_median_pct": np.nan,
                          "err_p95_pct": np.nan, "err_max_pct": np.nan, **NEUTRAL_STEP.to_row()}
                         for m, s, g in rows])


def capacity(rows: list[tuple[str, str, int, str, float]],
             pools: dict[tuple[str, str, int], list[tuple[int, float]]] | None = None) -> pd.DataFrame:
    """(model, sku, tp_degree, class, max req/s per replica) rows, validated; with ``pools``, each listed
    deployment also at the given (pool size, gain): its rows times the gain at that size."""
    columns = ["model", "sku", "tp_degree", "traffic_class", "max_rps_per_replica"]
    frame = pd.DataFrame(rows, columns=columns)
    if not pools:
        return validate_capacity(frame)
    larger = [(m, s, g, k, rate * gain, size) for m, s, g, k, rate in rows
              for size, gain in pools.get((m, s, g), [])]
    frame = pd.concat([frame.assign(pool_replicas=1), pd.DataFrame(larger, columns=[*columns, "pool_replicas"])],
                      ignore_index=True)
    return validate_capacity(frame)


def horizon_of(series: dict[tuple[str, str, str], list[float]]) -> str:
    """The scenario horizon a forecast of ``series`` covers hour by hour: its longest series."""
    return f"{max(len(values) for values in series.values())}h"


def forecast(series: dict[tuple[str, str, str], list[float]], column: str = "q95") -> pd.DataFrame:
    """Requests per *second* per hour in, forecast rows (requests per hour) out."""
    rows = []
    for (origin, model, klass), values in series.items():
        for h, rps in enumerate(values):
            ts = (START + pd.Timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ")
            per_hour = rps * 3600.0
            rows.append({"region": origin, "model": model, "traffic_class": klass, "ts": ts, "mean": per_hour,
                         "q50": per_hour, "q90": per_hour, "q95": per_hour, "q99": per_hour, "model_used": "test"})
    return pd.DataFrame(rows)


@dataclass
class Case:
    """Everything ``place_plan`` takes, for one synthetic problem."""

    scenario: Any
    forecast: pd.DataFrame
    catalog: Catalog
    profiles: pd.DataFrame
    capacity: pd.DataFrame

    def instance(self, periods: str = "hourly"):
        demand = demand_from_forecast(self.forecast, self.scenario, self.scenario.capacity.forecast_quantile,
                                      parse_periods(periods))
        return build_instance(self.scenario, demand, self.catalog, self.profiles, self.capacity), demand


def two_region_case(demand: dict[tuple[str, str, str], list[float]] | None = None, *,
                    capacity_rules: dict[str, Any] | None = None, quota: int = 64,
                    residency: list[str] | None = None, h100_tp2: tuple[float, float] | None = None) -> Case:
    """us-east users, a near US region (aws:us-east-1) and a far EU one (gcp:europe-west4).

    Two SKUs: 'L4' (1 GPU per replica, 1 req/s interactive, 2 req/s batch) and 'H100'
    (1 GPU, 4 req/s interactive, 8 req/s batch); batch may use spot and cross the ocean.
    Rates are after the utilisation cap of 0.5. ``h100_tp2`` adds replicas of two H100s
    with these (interactive, batch) table rates (before the cap).
    """
    regions = [
        Region("aws:us-east-1", "us", {"us-east": 10.0},
               {("L4", "reserved"): 0.5, ("L4", "on_demand"): 1.0, ("L4", "spot"): 0.3,
                ("H100", "reserved"): 2.5, ("H100", "on_demand"): 4.0, ("H100", "spot"): 1.5}, quota=quota),
        Region("gcp:europe-west4", "eu", {"us-east": 90.0},
               {("L4", "reserved"): 0.4, ("L4", "on_demand"): 0.8, ("L4", "spot"): 0.2,
                ("H100", "reserved"): 2.0, ("H100", "on_demand"): 3.5, ("H100", "spot"): 1.0}, quota=quota),
    ]
    demand = demand or {("us-east", "llama-3.1-8b", "interactive"): [1.5, 3.0, 0.5],
                        ("us-east", "llama-3.1-8b", "batch"): [2.0, 0.0, 4.0]}
    scenario = parse_scenario(scenario_dict(
        regions,
        {"us-east": ("us", residency or ["us", "eu"])},
        {"llama-3.1-8b": ["L4", "H100"]},
        {"interactive": {"latency_budget_ms": 50.0}, "batch": {"latency_budget_ms": 200.0, "spot_tolerant": True}},
        capacity={"utilisation_cap": 0.5, "redundancy": 1, **(capacity_rules or {})},
        horizon=horizon_of(demand),
    ))
    caps = capacity([("llama-3.1-8b", "L4", 1, "interactive", 2.0), ("llama-3.1-8b", "L4", 1, "batch", 4.0),
                     ("llama-3.1-8b", "H100", 1, "interactive", 8.0), ("llama-3.1-8b", "H100", 1, "batch", 16.0)])
    units = [("llama-3.1-8b", "L4", 1), ("llama-3.1-8b", "H100", 1)]
    if h100_tp2 is not None:
        units.append(("llama-3.1-8b", "H100", 2))
        caps = capacity([*caps[["model", "sku", "tp_degree", "traffic_class", "max_rps_per_replica"]].itertuples(
            index=False, name=None), ("llama-3.1-8b", "H100", 2, "interactive", h100_tp2[0]),
            ("llama-3.1-8b", "H100", 2, "batch", h100_tp2[1])])
    return Case(scenario, forecast(demand), catalog(regions), profiles(units), caps)

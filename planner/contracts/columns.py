"""The columns and keys of every table the planner reads or writes, named once.

A *key* is the set of columns that identifies a row: no two rows of a valid file share
one. The order of a ``*_COLUMNS`` tuple is the order the planner writes the columns in.
The data dictionary (``docs/architecture.md``, ``data/README.md``) describes each field.
"""

from __future__ import annotations

from planner.contracts.names import SLO_METRIC_NAMES

# --------------------------------------------------------------------------- demand history
SERIES_KEY: tuple[str, ...] = ("region", "model", "traffic_class")
"""One demand series: user region (origin), model and traffic class."""
MEASURES: tuple[str, ...] = ("requests", "prompt_tokens_sum", "output_tokens_sum")
"""The per-hour sums a history carries and a forecast may be made of."""
HISTORY_KEY: tuple[str, ...] = ("ts", *SERIES_KEY)
HISTORY_COLUMNS: tuple[str, ...] = (
    *HISTORY_KEY, *MEASURES,
    "prompt_tokens_p50", "prompt_tokens_p99", "output_tokens_p50", "output_tokens_p99",
)
"""The ``.csv``/``.parquet`` history ``planner ingest`` writes and ``planner forecast`` reads."""
HISTOGRAM_KEY: tuple[str, ...] = ("model", "traffic_class", "measure", "bin_lo_tokens")
HISTOGRAM_COLUMNS: tuple[str, ...] = ("model", "traffic_class", "measure", "bin_lo_tokens", "bin_hi_tokens", "count")
"""The token-length histogram ``planner ingest`` writes beside the history."""

# --------------------------------------------------------------------------- forecast
FORECAST_KEY: tuple[str, ...] = (*SERIES_KEY, "ts")
"""One forecast row; its demand columns are ``mean`` and the quantile columns
(:func:`planner.contracts.quantile_column`)."""

# --------------------------------------------------------------------------- placement outputs
PLAN_KEY: tuple[str, ...] = ("period", "region", "sku", "tp_degree", "model", "tier")
PLAN_COLUMNS: tuple[str, ...] = (*PLAN_KEY, "replicas", "gpus", "usd")
"""The plan ``planner place`` writes: replicas bought per period, region, deployment and tier."""
FLOW_KEY: tuple[str, ...] = ("period", "origin", "region", "model", "traffic_class")
FLOW_COLUMNS: tuple[str, ...] = (*FLOW_KEY, "rps")
"""Routed demand: requests per second from each origin to each serving region."""
LOAD_KEY: tuple[str, ...] = ("period", "region", "sku", "tp_degree", "model", "pool", "traffic_class")
LOAD_COLUMNS: tuple[str, ...] = (*LOAD_KEY, "rps")
"""The requests per second each pool of replicas serves."""

# --------------------------------------------------------------------------- capacity table
DEPLOYMENT_KEY: tuple[str, ...] = ("model", "sku", "tp_degree")
CAPACITY_KEY: tuple[str, ...] = (*DEPLOYMENT_KEY, "traffic_class")
ENGINE_SETTING_COLUMNS: tuple[str, ...] = (
    "engine", "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold",
)
CAPACITY_COLUMNS: tuple[str, ...] = (*CAPACITY_KEY, "max_rps_per_replica", *ENGINE_SETTING_COLUMNS, "policy", "source")
"""The capacity table placement reads (``planner calibrate`` writes it with more columns)."""

# --------------------------------------------------------------------------- model profiles
PROFILE_KEY: tuple[str, ...] = (*DEPLOYMENT_KEY, "engine")
"""One measured or modelled profile: a deployment on one serving engine."""

# --------------------------------------------------------------------------- catalog
SKU_KEY: tuple[str, ...] = ("sku",)
SKU_COLUMNS: tuple[str, ...] = (
    "sku", "vendor", "hbm_gb", "hbm_bandwidth_gb_per_s", "bf16_tflops", "fp8_tflops",
    "intranode_bandwidth_gb_per_s", "tdp_w", "max_gpus_per_node", "source",
)
"""``catalog/skus.csv``: one row per GPU SKU."""
OFFER_KEY: tuple[str, ...] = ("region_key", "sku", "tier")
OFFER_COLUMNS: tuple[str, ...] = (
    "cloud", "region", "region_key", "geo", "sku", "tier", "usd_per_gpu_hour", "gpus_per_instance",
    "instance_type", "quota_gpus", "available", "assumption", "source",
)
"""``catalog/offers.csv``: one priced offer per (region_key, sku, tier)."""
OFFER_TABLE_COLUMNS: tuple[str, ...] = ("region_key", "sku", "tier", "usd_per_gpu_hour", "quota_gpus", "assumption")
"""What ``planner catalog`` shows of an offer."""


# --------------------------------------------------------------------------- simulation summary
def p99_column(metric: str) -> str:
    """The simulator's p99 over all arrivals, rejections at +inf: ``slo_ttft_p99_ms``."""
    return f"slo_{metric}_p99_ms"


def target_column(metric: str) -> str:
    """The simulator's copy of the SLO it checked (empty when not set): ``slo_ttft_target_ms``."""
    return f"slo_{metric}_target_ms"


def met_column(metric: str) -> str:
    return f"slo_{metric}_met"


def verdict_column(metric: str) -> str:
    return f"slo_{metric}_verdict"


SUMMARY_KEY: tuple[str, ...] = SERIES_KEY
"""One simulated pool of demand: region (serving key), model and traffic class."""
SUMMARY_COLUMNS: tuple[str, ...] = (
    *SUMMARY_KEY, "replicas", "offered_rps",
    *(column(m) for m in SLO_METRIC_NAMES for column in (p99_column, target_column, verdict_column)),
    "rejected_fraction", "slo_met",
)
"""The per-class summary ``planner simulate`` writes."""

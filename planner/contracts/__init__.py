"""Names shared by the files planner reads and writes, defined once.

* :mod:`~planner.contracts.names`: tiers, residency zones, clouds and SLO metrics (enums);
* :mod:`~planner.contracts.columns`: the columns and keys of every table;
* :mod:`~planner.contracts.quantiles`: forecast quantile column names;
* :mod:`~planner.contracts.durations`: the one duration parser;
* :mod:`~planner.contracts.schemas`: one schema per file format, reporting every problem at once.
"""

from __future__ import annotations

from planner.contracts.columns import (
    CAPACITY_COLUMNS,
    CAPACITY_KEY,
    DEPLOYMENT_KEY,
    ENGINE_SETTING_COLUMNS,
    FLOW_COLUMNS,
    FLOW_KEY,
    FORECAST_KEY,
    HISTOGRAM_COLUMNS,
    HISTOGRAM_KEY,
    HISTORY_COLUMNS,
    HISTORY_KEY,
    LOAD_COLUMNS,
    LOAD_KEY,
    MEASURES,
    OFFER_COLUMNS,
    OFFER_KEY,
    OFFER_TABLE_COLUMNS,
    PLAN_COLUMNS,
    PLAN_KEY,
    PROFILE_KEY,
    SERIES_KEY,
    SKU_COLUMNS,
    SKU_KEY,
    SUMMARY_COLUMNS,
    SUMMARY_KEY,
    met_column,
    p99_column,
    target_column,
    verdict_column,
)
from planner.contracts.durations import (
    HORIZON_OPTION,
    SCENARIO_HORIZON,
    SIMULATED_WINDOW,
    DurationError,
    DurationSyntax,
    duration_hours,
    duration_seconds,
    parse_duration,
)
from planner.contracts.names import (
    CLOUD_NAMES,
    SLO_METRIC_NAMES,
    TIER_NAMES,
    ZONE_NAMES,
    Cloud,
    SloMetric,
    Tier,
    Zone,
    region_key,
)
from planner.contracts.quantiles import (
    DEFAULT_MAX_GROWTH,
    FORECAST_QUANTILES,
    quantile_column,
    quantile_columns,
    quantile_level,
)

__all__ = [
    "CAPACITY_COLUMNS", "CAPACITY_KEY", "CLOUD_NAMES", "DEPLOYMENT_KEY", "ENGINE_SETTING_COLUMNS",
    "DEFAULT_MAX_GROWTH", "FLOW_COLUMNS", "FLOW_KEY", "FORECAST_KEY", "FORECAST_QUANTILES", "HISTOGRAM_COLUMNS",
    "HISTOGRAM_KEY",
    "HISTORY_COLUMNS", "HISTORY_KEY", "HORIZON_OPTION", "LOAD_COLUMNS", "LOAD_KEY", "MEASURES", "OFFER_COLUMNS",
    "OFFER_KEY", "OFFER_TABLE_COLUMNS", "PLAN_COLUMNS", "PLAN_KEY", "PROFILE_KEY", "SCENARIO_HORIZON",
    "SERIES_KEY", "SIMULATED_WINDOW", "SKU_COLUMNS", "SKU_KEY", "SLO_METRIC_NAMES", "SUMMARY_COLUMNS",
    "SUMMARY_KEY", "TIER_NAMES", "ZONE_NAMES", "Cloud", "DurationError", "DurationSyntax", "SloMetric", "Tier",
    "Zone", "duration_hours", "duration_seconds", "met_column", "p99_column", "parse_duration",
    "quantile_column", "quantile_columns", "quantile_level", "region_key", "target_column", "verdict_column",
]

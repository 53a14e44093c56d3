"""What the monthly report is built from: plain DataFrames and dicts, filled by the pipeline.

Every field may be empty (None, an empty frame, an empty dict); the builder then
writes an honest "No data yet: ..." paragraph for the section that needed it.
Metadata dicts are read with tolerant look-ups (:func:`pick`): each figure is looked
up under its name and a few synonyms, and is shown as "not reported" when absent.
The exact keys and columns read are listed in ``data/README.d/report.md``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import numpy as np
import pandas as pd

from planner.contracts import SERIES_KEY as SERIES_KEY
from planner.errors import InputError
from planner.placement.window import PlanningWindow
from planner.report.period import check_month

ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")
NOT_REPORTED = "not reported"
PLAN_KEY = ("region", "sku", "tp_degree", "tier", "model")


@dataclass
class ReportInputs:
    """Everything one monthly report shows. Frames follow the contracts in architecture.md.

    ``forecast``: region, model, traffic_class, ts, mean, q50, q90, q95, q99, model_used.
    ``forecast_meta``: the forecast metadata JSON (``series[i].fallback``, ``.data_quality``,
    ``.backtest``; ``parameters.measure``). ``history``: the demand history (ts, region,
    model, traffic_class, requests, ...). ``plan``: period, region, sku, tp_degree, model,
    tier, replicas, gpus, usd (optionally hours and the engine settings). ``plan_meta``: solver figures, lower bounds,
    baselines, quota usage. ``previous_plan`` / ``previous_forecast``: last month's, from
    the run history. ``slo``: one row per (region, model, traffic_class[, window]) from the
    simulator. ``loop_rounds``: the plan loop's rounds. ``policy_comparison``: policy,
    gpus, usd, slo_met. ``risks_extra``: free-text risks from the pipeline. ``period``: the
    hours the plan covers (the whole month for ``planner report``); None when not known.
    ``deployments``: per (model, sku, tp_degree) the plan runs, its engine settings, launch command,
    calibrated throughput per GPU and cost per million output tokens at capacity
    (:mod:`planner.report.economics`); ``served_usd_per_m_output_tokens``: per model, the plan's
    cost per million output tokens of forecast demand; ``served_usd_per_m_tokens``: the same per
    million prompt and output tokens. ``plan_prices``: per (region, sku, tier) the plan spends on, its
    catalog price, the catalog's ``assumption`` note and the plan's ``usd`` there. ``idle_regions``: per
    serving region with no capacity in the plan, why (``reason``: price, quota or latency; ``detail``).
    ``what_if``: the run's ``--set`` and ``--demand-scale`` changes, as given. ``alternatives``: the plan's
    cost under each neighbouring tier choice (:mod:`planner.loop.alternatives`); ``tightest_class``: the class
    with the tightest TTFT SLO, for the sweep command the report suggests.
    """

    month: str
    as_of: str
    scenario_name: str
    forecast: pd.DataFrame | None = None
    forecast_meta: dict[str, Any] = field(default_factory=dict)
    history: pd.DataFrame | None = None
    plan: pd.DataFrame | None = None
    plan_meta: dict[str, Any] = field(default_factory=dict)
    previous_plan: pd.DataFrame | None = None
    previous_forecast: pd.DataFrame | None = None
    slo: pd.DataFrame | None = None
    loop_rounds: list[dict[str, Any]] = field(default_factory=list)
    policy_comparison: pd.DataFrame | None = None
    risks_extra: list[str] = field(default_factory=list)
    period: PlanningWindow | None = None
    deployments: pd.DataFrame | None = None
    served_usd_per_m_output_tokens: dict[str, float] = field(default_factory=dict)
    served_usd_per_m_tokens: dict[str, float] = field(default_factory=dict)
    plan_prices: pd.DataFrame | None = None
    idle_regions: pd.DataFrame | None = None
    what_if: list[str] = field(default_factory=list)
    alternatives: pd.DataFrame | None = None
    tightest_class: str | None = None


def check_header(inputs: ReportInputs) -> pd.Timestamp:
    """Validate month and as_of; return as_of as a UTC timestamp."""
    check_month(inputs.month)
    try:
        if not ISO_DATE.match(str(inputs.as_of)):  # pandas would also take "now", which is not reproducible
            raise ValueError(inputs.as_of)
        as_of = pd.Timestamp(str(inputs.as_of))
    except ValueError:
        raise InputError(f"as-of {inputs.as_of!r} is not an ISO-8601 date-time", where="--as-of",
                         fix="pass e.g. --as-of 2026-11-01T00:00:00Z") from None
    return as_of.tz_localize("UTC") if as_of.tzinfo is None else as_of.tz_convert("UTC")


def present(frame: pd.DataFrame | None, *columns: str) -> TypeGuard[pd.DataFrame]:
    """True when ``frame`` has rows and every named column (and so is not None)."""
    return frame is not None and not frame.empty and all(c in frame.columns for c in columns)


def pick(mapping: Any, *names: str, default: Any = None) -> Any:
    """The first of ``names`` present (and not None) in ``mapping``; ``default`` otherwise."""
    if not isinstance(mapping, dict):
        return default
    for name in names:
        value = mapping.get(name)
        if value is not None:
            return value
    return default


def number(value: Any) -> float | None:
    """A finite float, or None (for None, NaN, inf, text that is not a number)."""
    if isinstance(value, bool):
        return float(value)
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def utc(values: pd.Series) -> pd.Series:
    """Timestamps (ISO strings or datetimes, naive meaning UTC) as tz-aware UTC datetimes."""
    if pd.api.types.is_datetime64_any_dtype(values):
        return values.dt.tz_localize("UTC") if values.dt.tz is None else values.dt.tz_convert("UTC")
    return pd.to_datetime(values.astype(str), utc=True, format="ISO8601")


def iso(stamp: pd.Timestamp) -> str:
    text: str = stamp.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    return text


def rounded(frame: pd.DataFrame, digits: dict[str, int] | None = None, default: int = 3) -> pd.DataFrame:
    """Round float columns by unit suffix (``_usd`` 2, ``_pct`` 1, ``_ms`` 1, else ``default``): stable outputs."""
    out = frame.copy()
    for column in out.columns:
        if not pd.api.types.is_float_dtype(out[column]):
            continue
        places = (digits or {}).get(column)
        if places is None:
            places = 2 if column.endswith("_usd") else 1 if column.endswith(("_pct", "_ms")) else default
        out[column] = np.round(out[column].astype(float), places) + 0.0
    return out


def money(value: float | None) -> str:
    if value is None:
        return NOT_REPORTED
    return f"${value:,.0f}" if abs(value) >= 100 else f"${value:,.2f}"


def signed_money(value: float) -> str:
    return ("-" if value < 0 else "+") + money(abs(value))


def pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return NOT_REPORTED
    return f"{value:+.1f} %" if signed else f"{value:.1f} %"


def label(row: Any, columns: tuple[str, ...]) -> str:
    """``a / b / c`` from the named fields of a row (dict or namedtuple)."""
    get = row.get if isinstance(row, dict) else lambda c: getattr(row, c)
    return " / ".join(str(get(c)) for c in columns)

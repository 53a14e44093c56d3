"""The outcome of ``planner simulate``: per-class table, metadata and SLO summary (written by the shell).

``per_class`` has one row per (region, model, traffic_class) with counts, latency
quantiles and their 95 % half-widths (``*_ci95``), utilisation, rejections, preemptions,
goodput, cost and the SLO verdicts (columns: ``data/README.md``, simulation section).
``meta`` is JSON-able and holds everything needed to reproduce the run. Nothing in
either depends on the wall clock, so the same inputs give byte-identical files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planner.contracts import SUMMARY_COLUMNS
from planner.slo import SLO_METRICS, met_column, p99_column, target_column, verdict_column


def jsonable(value: Any) -> Any:
    """Plain Python values; NaN and ±inf become null (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        x = float(value)
        return x if math.isfinite(x) else None
    return value


@dataclass(frozen=True, eq=False)
class SimulationResult:
    per_class: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def all_met(self) -> bool:
        """Whether every class with traffic meets every p99 SLO it sets (point estimate)."""
        return bool(self.per_class["slo_met"].all()) if len(self.per_class) else True

    def misses(self) -> list[dict[str, Any]]:
        """Every missed (region, model, traffic_class, metric), in table order, with what was measured.

        ``metric`` is ``ttft_p99``, ``tpot_p99`` or ``e2e_p99``; ``measured`` reads e.g.
        ``"2,412 ms > 800 ms"``, or names the rejections or missing replicas that made the p99
        infinite. A metric the class does not set is never missed.
        """
        out = []
        for row in self.per_class.to_dict("records") if len(self.per_class) else []:
            if bool(row.get("slo_met", True)):
                continue
            for metric in SLO_METRICS:  # slo_met is every set metric met, so at least one of them is missed
                if bool(row.get(met_column(metric), True)):
                    continue
                p99, target = row.get(p99_column(metric)), row.get(target_column(metric))
                verdict = row.get(verdict_column(metric))
                if verdict == "no_replicas":
                    measured = "demand but no replicas"
                elif p99 is None or math.isnan(float(p99)):
                    measured = f"no p99 measured, target {float(target):,.0f} ms"
                elif math.isinf(float(p99)):
                    measured = f"over 1 % of requests rejected, target {float(target):,.0f} ms"
                else:
                    measured = f"{float(p99):,.0f} ms > {float(target):,.0f} ms"
                out.append({"region": row["region"], "model": row["model"], "traffic_class": row["traffic_class"],
                            "metric": f"{metric}_p99", "measured": measured})
        return out

    def summary_rows(self) -> list[dict[str, Any]]:
        """One row per (region, model, class): the SLO met/missed table."""
        cols = [c for c in SUMMARY_COLUMNS if c in self.per_class.columns]
        return [jsonable(row) for row in self.per_class[cols].to_dict("records")]

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = jsonable({"meta": self.meta, "all_met": self.all_met,
                                             "summary": self.summary_rows(),
                                             "per_class": self.per_class.to_dict("records")})
        return document

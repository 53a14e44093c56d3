"""What a forecast did to the data, in a line or two a user reads on the terminal.

The data-quality pass and the forecast record every change they made per series (the
metadata's ``data_quality`` and ``forecast_findings``, and each series' fallback). Most runs
change a few numbers, and a user who never opens the metadata should still know which:
hours masked as outages or partial collection (the model never learned them as demand),
missing hours filled, series that fell back to a seasonal naive, and forecast values capped
at the growth limit. This module folds those per-series records into at most two lines, the
data's and the forecast's, naming up to ``NAMED_SERIES`` series each. Findings that change no
number stay in the metadata and the report (a series that ends early), except hours kept as
demand that look wrong: a spike far above its series' usual level, or partly collected hours
kept with ``--partial-hours keep``; a plan sized for a load test, a mis-scaled import or a
collection gap is worth a line before anything is bought on it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from planner.forecast.growth import WARN_MULTIPLE

NAMED_SERIES = 3

DATA_KINDS = {
    "outage": "outage hours masked",
    "partial_hour": "partly collected hours masked",
    "partial_hour_kept": "partly collected hours kept as demand (--partial-hours keep)",
    "missing_hours": "missing hours filled",
    "irregular_frequency": "series resampled to hours",
    "leading_zeros_trimmed": "leading zero hours trimmed",
    "spike": "spike hours kept as demand (check the source)",
}
"""Data-quality findings that change what the model learns, and how the terminal names them."""


def _named(series: dict[str, float]) -> str:
    """``a (17), b (3), ...`` for the series with the largest figures first."""
    ordered = sorted(series.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{name} ({value:g})" for name, value in ordered[:NAMED_SERIES])
    return shown + (f" and {len(ordered) - NAMED_SERIES} more" if len(ordered) > NAMED_SERIES else "")


def data_line(series_meta: list[dict[str, Any]]) -> str | None:
    """Hours masked, filled or trimmed per kind, with the series most affected; None when nothing changed."""
    by_kind: dict[str, dict[str, float]] = defaultdict(dict)
    for entry in series_meta:
        for finding in entry.get("data_quality") or []:
            kind = finding.get("kind")
            if kind == "partial_hour" and finding.get("partial_hours") == "keep":
                kind = "partial_hour_kept"
            if kind in DATA_KINDS:
                by_kind[kind][str(entry["series"])] = float(finding.get("hours") or finding.get("rows") or 0)
    if not by_kind:
        return None
    parts = []
    for kind, label in DATA_KINDS.items():
        if kind in by_kind:
            total = sum(by_kind[kind].values())
            label = label.replace("hours", "hour", 1) if total == 1 else label
            parts.append(f"{total:g} {label} in {len(by_kind[kind])} series: {_named(by_kind[kind])}")
    return "data: " + "; ".join(parts)


def forecast_line(series_meta: list[dict[str, Any]]) -> str | None:
    """Series that fell back, quantiles capped or above twice the peak; None when none."""
    fallbacks = [str(entry["series"]) for entry in series_meta if entry.get("fallback")]
    capped: dict[str, float] = {}
    above: dict[str, float] = {}
    limit = None
    for entry in series_meta:
        for finding in entry.get("forecast_findings") or []:
            target = capped if finding["kind"] == "quantile_capped" else above
            target[str(entry["series"])] = round(float(finding["largest_multiple_of_peak"]), 1)
            limit = finding["max_growth"]
    parts = []
    if fallbacks:
        shown = ", ".join(fallbacks[:NAMED_SERIES]) + (" ..." if len(fallbacks) > NAMED_SERIES else "")
        parts.append(f"{len(fallbacks)} series fell back to a seasonal naive ({shown})")
    if capped:
        parts.append(f"{len(capped)} series capped at {limit:g} x their history's peak, where the model reached "
                     f"(multiple of peak) {_named(capped)}; --max-growth changes the limit")
    if above:
        parts.append(f"{len(above)} series forecast above {WARN_MULTIPLE:g} x their history's peak (multiple of peak) "
                     f"{_named(above)}, within --max-growth {limit:g}")
    return "forecast: " + "; ".join(parts) if parts else None


def summary_lines(series_meta: list[dict[str, Any]]) -> list[str]:
    """The terminal's lines (see the module docstring), also kept in the metadata and the report."""
    return [line for line in (data_line(series_meta), forecast_line(series_meta)) if line]

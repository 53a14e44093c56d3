"""One PNG per series: the recent history, the forecast mean, and the quantile bands.

What a reader should see at a glance: does the forecast continue the daily and
weekly shape of the last weeks, how wide is the provisioning margin (the bands
between q50 and the top quantile), which hours were outages or missing (shaded
red; they were not learned as demand), and whether a fallback was used (in the
title, never hidden).

Uses matplotlib's object API with the Agg canvas (no pyplot, no global backend
switch, no display needed). The shell writes the PNGs, all or none
(:func:`planner.workflows.files.write_plots`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from planner.forecast.run import ForecastResult

HISTORY_TAIL_HOURS = 21 * 24
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def plot_filename(region: str, model: str, traffic_class: str) -> str:
    return "__".join(_SAFE.sub("_", part) for part in (region, model, traffic_class)) + ".png"


def _series_history(history: pd.DataFrame, key: tuple[str, str, str], measure: str) -> pd.Series:
    mask = ((history["region"].astype(str) == key[0]) & (history["model"].astype(str) == key[1])
            & (history["traffic_class"].astype(str) == key[2]))
    part = history.loc[mask, ["ts", measure]]
    ts = pd.to_datetime(part["ts"].astype(str), utc=True, format="ISO8601")
    return pd.Series(pd.to_numeric(part[measure], errors="coerce").to_numpy(), index=ts).sort_index()


def _draw(fig: Figure, hist: pd.Series, fc: pd.DataFrame, qcols: list[str], meta: dict[str, Any],
          measure: str) -> None:
    ax = fig.add_subplot(1, 1, 1)
    fts = pd.to_datetime(fc["ts"], utc=True)
    start = fts.iloc[0] - pd.Timedelta(hours=HISTORY_TAIL_HOURS)
    tail = hist[hist.index >= start]
    ax.plot(tail.index, tail.to_numpy(), color="0.25", lw=0.8, label="history")
    for finding in meta.get("data_quality", []):
        if finding.get("kind") not in ("outage", "missing_hours"):
            continue
        for first, last in finding.get("ranges", []):
            a, b = pd.Timestamp(first), pd.Timestamp(last) + pd.Timedelta(hours=1)
            if b >= start:
                ax.axvspan(max(a, start), b, color="tab:red", alpha=0.15, lw=0)
    alphas = np.linspace(0.45, 0.15, max(len(qcols) - 1, 1))
    for i, (lo, hi) in enumerate(zip(qcols[:-1], qcols[1:], strict=True)):
        ax.fill_between(fts, fc[lo], fc[hi], color="tab:blue", alpha=float(alphas[i]), lw=0, label=f"{lo}-{hi}")
    if "q50" in qcols:
        ax.plot(fts, fc["q50"], color="tab:blue", lw=0.6, ls="--", label="q50")
    ax.plot(fts, fc["mean"], color="tab:blue", lw=1.2, label="forecast mean")
    ax.axvline(fts.iloc[0], color="0.5", lw=0.8, ls=":")
    title = f"{meta['series']}: {meta['model_used']}"
    if meta.get("fallback"):
        title += f"\nFALLBACK: {meta['fallback_reason']}"
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(f"{measure} per hour")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=7, ncol=3)
    fig.autofmt_xdate()


def series_figures(history: pd.DataFrame, result: ForecastResult) -> list[tuple[str, Figure]]:
    """One (file name, Figure) per forecast series, in series order; the shell saves them as PNGs."""
    measure = result.metadata["parameters"]["measure"]
    qcols = result.metadata["parameters"]["quantile_columns"]
    by_series = {(m["region"], m["model"], m["traffic_class"]): m for m in result.metadata["series"]}
    figures = []
    for group_key, fc in result.forecast.groupby(["region", "model", "traffic_class"], sort=True):
        region, model, traffic_class = (str(k) for k in group_key)
        key = (region, model, traffic_class)
        fig = Figure(figsize=(11, 4.2), dpi=100)
        FigureCanvasAgg(fig)
        _draw(fig, _series_history(history, key, measure), fc, qcols, by_series[key], measure)
        figures.append((plot_filename(*key), fig))
    return figures

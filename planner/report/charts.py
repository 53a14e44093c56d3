"""Draw the report's charts as PNG bytes, byte-identical for the same table.

Each chart kind is a function (figure, table, options) in ``CHART_KINDS``; a chart
draws only the columns of its table, which is also written as CSV. Determinism:
matplotlib's object API on the Agg canvas (no pyplot, no global state), a fixed
style set in an ``rc_context`` (DejaVu Sans, which ships with matplotlib; fixed size
and dpi; ``svg.hashsalt`` fixed), and PNG metadata stripped (no Software entry), so
the bytes depend only on the table and the matplotlib/FreeType versions.

Horizontal bars, because labels such as ``us-east / llama-3.1-8b / interactive`` are long.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.rcsetup import cycler
from matplotlib.ticker import FuncFormatter

from planner.report.model import Chart

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

DPI = 100
WIDTH_IN = 10.0
STYLE: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans", "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
    "legend.fontsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8, "svg.hashsalt": "planner-report",
    "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": DPI, "savefig.dpi": DPI,
    "path.simplify": True, "axes.prop_cycle": cycler(color=[
        "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]),
}
MET, MISSED, NEUTRAL = "#2ca02c", "#d62728", "#4c72b0"
TIER_COLORS = {"reserved": "#1f4e79", "on_demand": "#ff7f0e", "spot": "#2ca02c"}
_thousands = FuncFormatter(lambda v, _pos: f"{v:,.0f}" if abs(v) >= 10 else f"{v:.2g}")


ZOOM_SPREAD = 0.25
"""A chart with ``zoom`` set zooms its value axis when (max - min) / max of the bars is below this."""
ZOOM_NOTE = "axis does not start at zero"


def zoomed_range(values: Any) -> tuple[float, float] | None:
    """The value axis for bars of near-equal positive values, or None when the axis should start at zero.

    Bars starting at zero make a 1.8 % difference invisible; the zoomed axis spans the values
    with a margin of half their spread (at least 0.5 % of the largest) on each side.
    """
    array = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if array.size < 2 or array.min() <= 0:
        return None
    low, high = float(array.min()), float(array.max())
    if (high - low) / high >= ZOOM_SPREAD:
        return None
    pad = max(0.5 * (high - low), 0.005 * high)
    return max(0.0, low - pad), high + pad


def _labels(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    return [" / ".join(str(v) for v in row) for row in frame[columns].itertuples(index=False)]


def _colors(frame: pd.DataFrame, column: str | None) -> tuple[list[str], dict[str, str]]:
    """Bar colours: green/red for a met flag, a palette for categories, one colour otherwise."""
    if not column or column not in frame.columns:
        return [NEUTRAL] * len(frame), {}
    values = frame[column]
    if column.endswith("met"):
        mapping = {"met": MET, "missed": MISSED, "not reported": "#999999"}
        names = ["not reported" if pd.isna(v) else "met" if bool(v) else "missed" for v in values]
        return [mapping[n] for n in names], {n: mapping[n] for n in dict.fromkeys(names)}
    palette = list(STYLE["axes.prop_cycle"].by_key()["color"])
    categories = list(dict.fromkeys(str(v) for v in values))
    mapping = {c: palette[i % len(palette)] for i, c in enumerate(categories)}
    return [mapping[str(v)] for v in values], mapping


def _legend(fig: Figure, mapping: dict[str, str]) -> None:
    """A legend below the axes, where it can never cover a bar."""
    if len(mapping) > 1:
        fig.legend(handles=[Patch(color=c, label=n) for n, c in mapping.items()], loc="outside lower center",
                   ncol=len(mapping), frameon=False)


def draw_bars(fig: Figure, frame: pd.DataFrame, options: dict[str, Any]) -> None:
    labels = _labels(frame, list(options["label"]))
    values = pd.to_numeric(frame[options["value"]], errors="coerce").fillna(0.0).to_numpy(float)
    colors, mapping = _colors(frame, options.get("color_by"))
    reference = options.get("reference")
    if reference is not None and not options.get("color_by"):  # worse than the reference stands out
        colors = [MISSED if v > float(reference) else NEUTRAL for v in values]
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(labels))[::-1]
    ax.barh(y, values, color=colors, height=0.7)
    ax.set_yticks(y, labels)
    ax.set_xlabel(options["value"])
    zoom = zoomed_range(values) if options.get("zoom") else None
    if zoom is not None:
        ax.set_xlim(*zoom)
        ax.set_xlabel(f"{options['value']} ({ZOOM_NOTE})")
    ax.xaxis.set_major_formatter(_thousands)
    if reference is not None:
        ax.axvline(float(reference), color="0.2", lw=1, ls="--")
    annotate = options.get("annotate")
    if annotate and annotate in frame.columns:
        for yi, value, note in zip(y, values, frame[annotate], strict=True):
            ax.text(value, yi, f"  {float(note):,.4g} {annotate}" if pd.notna(note) else "", va="center", fontsize=8)
        ax.set_xlim(right=ax.get_xlim()[1] * 1.15)  # room for the notes
    ax.grid(axis="x", alpha=0.3)
    _legend(fig, mapping)


def draw_grouped_bars(fig: Figure, frame: pd.DataFrame, options: dict[str, Any]) -> None:
    labels = _labels(frame, list(options["label"]))
    series = list(options["values"])
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(labels))[::-1].astype(float)
    height = 0.8 / len(series)
    for i, column in enumerate(series):
        values = pd.to_numeric(frame[column], errors="coerce").fillna(0.0).to_numpy(float)
        ax.barh(y + (len(series) - 1 - 2 * i) * height / 2, values, height=height, label=column,
                color=NEUTRAL if i == 0 else "#aec7e8")
    ax.set_yticks(y, labels)
    ax.xaxis.set_major_formatter(_thousands)
    ax.grid(axis="x", alpha=0.3)
    if len(series) > 1:
        fig.legend(loc="outside lower center", ncol=len(series), frameon=False)


def draw_stacked_bars(fig: Figure, frame: pd.DataFrame, options: dict[str, Any]) -> None:
    label_cols, stack, value = list(options["label"]), options["stack"], options["value"]
    table = frame.assign(_label=_labels(frame, label_cols)).pivot_table(
        index="_label", columns=stack, values=value, aggfunc="sum", fill_value=0.0, sort=True)
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(table))[::-1]
    left = np.zeros(len(table))
    known = [t for t in TIER_COLORS if t in table.columns]  # tiers in a fixed order: reserved, on_demand, spot
    table = table[known + [c for c in table.columns if c not in TIER_COLORS]]
    palette = list(STYLE["axes.prop_cycle"].by_key()["color"])
    for i, column in enumerate(table.columns):
        values = table[column].to_numpy(float)
        ax.barh(y, values, left=left, label=str(column), height=0.7,
                color=TIER_COLORS.get(str(column), palette[i % len(palette)]))
        left += values
    ax.set_yticks(y, list(table.index))
    ax.set_xlabel(value)
    ax.xaxis.set_major_formatter(_thousands)
    ax.grid(axis="x", alpha=0.3)
    fig.legend(loc="outside lower center", ncol=len(table.columns), frameon=False)


def draw_forecast_bands(fig: Figure, frame: pd.DataFrame, options: dict[str, Any]) -> None:
    """One panel per (region, model): history (grey), forecast mean (blue) and nested quantile bands."""
    y_col, bands = options["y"], list(options.get("bands", []))
    panels = list(frame.groupby(["region", "model"], sort=True))
    ncols = 2 if len(panels) > 1 else 1
    nrows = math.ceil(len(panels) / ncols)
    alphas = np.linspace(0.45, 0.15, max(len(bands) - 1, 1))
    for index, ((region, model), part) in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, index + 1)
        ts = pd.to_datetime(part["ts"], utc=True).dt.tz_localize(None)
        hist, fc = part["source"] == "history", part["source"] == "forecast"
        ax.plot(ts[hist], part.loc[hist, y_col], color="0.35", lw=0.8, label="history")
        for i, (lo, hi) in enumerate(zip(bands[:-1], bands[1:], strict=True)):
            ax.fill_between(ts[fc], part.loc[fc, lo].astype(float), part.loc[fc, hi].astype(float),
                            color="#1f77b4", alpha=float(alphas[i]), lw=0, label=f"{lo}-{hi}")
        ax.plot(ts[fc], part.loc[fc, y_col], color="#1f77b4", lw=1.0, label="forecast mean")
        if fc.any():
            ax.axvline(ts[fc].iloc[0], color="0.5", lw=0.8, ls=":")
        # matplotlib.dates carries no annotations for these two constructors
        locator = AutoDateLocator(minticks=3, maxticks=7)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
        ax.yaxis.set_major_formatter(_thousands)
        ax.set_ylim(bottom=0)
        ax.set_title(f"{region} / {model}", loc="left")
        ax.grid(alpha=0.3)
        if index == 0:
            ax.legend(loc="upper left", ncol=3, frameon=False, fontsize=7)
    fig.supylabel(y_col.replace("_", " "))


CHART_KINDS: dict[str, Callable[[Figure, pd.DataFrame, dict[str, Any]], None]] = {
    "bars": draw_bars,
    "grouped_bars": draw_grouped_bars,
    "stacked_bars": draw_stacked_bars,
    "forecast_bands": draw_forecast_bands,
}


def _height_in(chart: Chart, frame: pd.DataFrame) -> float:
    if chart.kind == "forecast_bands":
        panels: int = frame.groupby(["region", "model"]).ngroups
        return 0.6 + 3.0 * math.ceil(panels / (2 if panels > 1 else 1))
    rows: int = len(frame) if chart.kind != "stacked_bars" else frame.groupby(list(chart.options["label"])).ngroups
    bars = rows * (len(chart.options.get("values", [1])) if chart.kind == "grouped_bars" else 1)
    return min(1.4 + 0.28 * bars, 14.0)


def render_chart(chart: Chart, frame: pd.DataFrame) -> bytes:
    """The chart as PNG bytes (deterministic; see the module docstring)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(WIDTH_IN, _height_in(chart, frame)), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        CHART_KINDS[chart.kind](fig, frame, chart.options)
        fig.suptitle(chart.title, x=0.01, ha="left", fontsize=11)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()

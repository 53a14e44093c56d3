"""The cost curve of a sweep (``sweep.png``): plan cost against the varied value, as PNG bytes.

Numeric values sit on a numeric axis in their own order; other values (SKU lists, tier
sets) are evenly spaced in the order given. A point whose SLOs still miss is drawn
hollow; an infeasible value has no cost and is marked on the axis with its reason. The
cost axis does not start at zero: a curve of near-equal costs would be flat otherwise,
and the caption says so. Determinism as in :mod:`planner.report.charts`.
"""

from __future__ import annotations

import io

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from planner.report.charts import DPI, MET, MISSED, STYLE, WIDTH_IN


def _positions(values: pd.Series) -> tuple[list[float], bool]:
    """x positions of the values: the numbers themselves when every value is one, else 0, 1, 2, ..."""
    numbers = pd.to_numeric(values, errors="coerce")
    if numbers.notna().all():
        return [float(v) for v in numbers], True
    return [float(i) for i in range(len(values))], False


def render_sweep_chart(table: pd.DataFrame, varied: str) -> bytes:
    """``sweep.csv``'s table as a cost curve (see the module docstring)."""
    x, numeric = _positions(table["value"].astype(str))
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(WIDTH_IN, 4.2), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        feasible = table["feasible"].astype(bool).tolist()
        met = (table["slo_status"] == "met").tolist()
        xs = [xi for xi, ok in zip(x, feasible, strict=True) if ok]
        costs = [float(c) for c, ok in zip(table["cost_usd"], feasible, strict=True) if ok]
        ax.plot(xs, costs, color=MET, linewidth=1.5, zorder=1)
        for xi, cost, ok, hit, gpus in zip(x, table["cost_usd"], feasible, met, table["gpus_peak"], strict=True):
            if not ok:
                continue
            ax.scatter([xi], [float(cost)], s=40, zorder=2, color=MET if hit else "white",
                       edgecolors=MET if hit else MISSED, linewidths=1.5)
            ax.annotate(f"${float(cost):,.0f}\n{int(gpus)} GPUs", (xi, float(cost)), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=8)
        for xi, ok, reason in zip(x, feasible, table["binding"].astype(str), strict=True):
            if not ok:
                ax.axvline(xi, color=MISSED, linestyle=":", linewidth=1)
                ax.annotate(f"infeasible\n{reason}", (xi, 0.02), xycoords=("data", "axes fraction"),
                            ha="center", fontsize=8, color=MISSED)
        if costs:
            low, high = min(costs), max(costs)
            pad = max(0.15 * (high - low), 0.02 * high, 1.0)
            ax.set_ylim(low - pad, high + 2 * pad)
        ax.set_xticks(x, table["value"].astype(str).tolist() if not numeric else [f"{v:g}" for v in x])
        ax.set_xlabel(varied)
        ax.set_ylabel("plan cost, USD (axis does not start at 0)")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _pos: f"${v:,.0f}"))
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        fig.suptitle(f"Plan cost by {varied} (hollow: an SLO still missed)", x=0.01, ha="left", fontsize=11)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()

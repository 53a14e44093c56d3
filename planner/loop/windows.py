"""Which plan periods the fast loop replays: the forecast peak and the weekly trough.

The peak is the period with the most routed demand: where a fleet sized at the
utilisation cap is most likely to miss its SLO. The trough is the period with the
least demand (above zero): there the plan runs its smallest fleet, mostly reserved
replicas, so a pool may shrink to its redundancy floor and meet the demand with one or
two replicas, where queueing has no pooling to lean on. The two are different windows
whenever the plan has more than one period; a one-period plan has only its peak.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from planner.sim.simulate import select_window
from planner.sim.windows import trough_period


@dataclass(frozen=True)
class Window:
    """One replayed window: its name (``peak`` or ``trough``), plan period and routed demand (req/s)."""

    name: str
    period: str
    demand: pd.DataFrame


def period_totals(plan: pd.DataFrame, flows: pd.DataFrame) -> pd.Series:
    """Total routed req/s per plan period, in the plan's period order (periods without flows: 0)."""
    labels = list(dict.fromkeys(plan["period"].astype(str)))
    totals = flows.assign(period=flows["period"].astype(str)).groupby("period", sort=False)["rps"].sum()
    return pd.Series([float(totals.get(label, 0.0)) for label in labels], index=labels, dtype=float)


def loop_windows(plan: pd.DataFrame, flows: pd.DataFrame) -> list[Window]:
    """The peak window and, when it is a different period, the trough window."""
    peak_period, peak_demand = select_window(plan, flows, "peak")
    windows = [Window("peak", peak_period, peak_demand)]
    quietest = trough_period(period_totals(plan, flows))  # first of equal minima: deterministic
    if quietest is not None and quietest != peak_period:
        only = flows[flows["period"].astype(str) == quietest]
        rows = plan[plan["period"].astype(str) == quietest]
        _, trough_demand = select_window(rows, only, "peak")
        windows.append(Window("trough", quietest, trough_demand))
    return windows

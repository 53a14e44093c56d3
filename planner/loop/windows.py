"""Which plan periods the fast loop replays, and which pools in each: every pool at its own peak and trough.

Three kinds of window:

* ``fleet peak``: the period with the most routed demand over the whole fleet, where a
  fleet sized at the utilisation cap is most likely to miss its SLO. Every pool of that
  period is replayed there.
* ``pool peak``: for each serving (region, model) pool, the period where its own routed
  demand is highest. Pools peak at different hours (users in other time zones, other
  models), so the fleet peak can find a pool at a fraction of its own busiest load.
* ``pool trough``: for each pool, the period where its routed demand is lowest above
  zero. There the plan runs the pool's smallest fleet, mostly reserved replicas, so it may
  shrink to its redundancy floor and meet the demand with one or two replicas, where
  queueing has no pooling to lean on.

Ties go to the earlier period in the plan's order. Each distinct period is simulated once,
with every pool that has a window there (a pool's results do not depend on which other
pools are simulated with it: each draws from its own seed), so a period that is one pool's
peak and another's trough is one simulation, and a pool whose own peak is the fleet peak is
replayed there once. Each pool of a window carries the names of every window it stands
for there, e.g. ``fleet peak + pool peak``. A pool without routed demand in any period has
no peak or trough of its own; it is replayed at the fleet peak only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from planner.sim.simulate import select_window
from planner.sim.windows import trough_period

FLEET_PEAK = "fleet peak"
POOL_PEAK = "pool peak"
POOL_TROUGH = "pool trough"

Pool = tuple[str, str]
"""A serving (region, model)."""


@dataclass(frozen=True)
class Window:
    """One replayed plan period: its routed demand (req/s) and, per pool replayed, the windows it stands for.

    ``fleet`` is true for the fleet peak, where every pool of the period is replayed (``pools``
    names only those with a window name, the rest are labelled ``fleet peak``).
    """

    period: str
    demand: pd.DataFrame
    pools: tuple[tuple[Pool, str], ...]
    fleet: bool = False

    @property
    def name(self) -> str:
        """The kinds of window this period stands for, e.g. ``fleet peak`` or ``pool peak + pool trough``."""
        kinds = {kind for _, label in self.pools for kind in label.split(" + ")}
        kinds |= {FLEET_PEAK} if self.fleet else set()
        return " + ".join(k for k in (FLEET_PEAK, POOL_PEAK, POOL_TROUGH) if k in kinds)

    def label(self, region: str, model: str) -> str:
        """The window name of one pool's rows in this period."""
        return dict(self.pools).get((region, model), FLEET_PEAK)

    def rows_of(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of a plan (or flows) this window replays: every pool for the fleet peak, else its pools."""
        if self.fleet:
            return frame
        keys = set(dict(self.pools))
        return frame[[(str(r), str(m)) in keys for r, m in zip(frame["region"], frame["model"], strict=True)]]

    def describe(self) -> str:
        """The period and, for a pool window, the pools it replays: for a round's record."""
        if self.fleet:
            return f"{self.name} {self.period}"
        return f"{self.name} {self.period}: " + ", ".join(f"{r} / {m}" for (r, m), _ in self.pools)


def period_totals(plan: pd.DataFrame, flows: pd.DataFrame) -> pd.Series:
    """Total routed req/s per plan period, in the plan's period order (periods without flows: 0)."""
    labels = list(dict.fromkeys(plan["period"].astype(str)))
    totals = flows.assign(period=flows["period"].astype(str)).groupby("period", sort=False)["rps"].sum()
    return pd.Series([float(totals.get(label, 0.0)) for label in labels], index=labels, dtype=float)


def pool_demand(plan: pd.DataFrame, flows: pd.DataFrame) -> pd.DataFrame:
    """Routed req/s per pool (rows, sorted) and plan period (columns, in the plan's order)."""
    labels = list(dict.fromkeys(plan["period"].astype(str)))
    frame = flows.assign(period=flows["period"].astype(str), region=flows["region"].astype(str),
                         model=flows["model"].astype(str))
    table = frame.pivot_table(index=["region", "model"], columns="period", values="rps", aggfunc="sum",
                              fill_value=0.0)
    return table.reindex(columns=labels, fill_value=0.0).astype(float).sort_index()


def pool_periods(plan: pd.DataFrame, flows: pd.DataFrame) -> dict[Pool, tuple[str, str]]:
    """(peak period, trough period) of every pool with routed demand; ties go to the earlier period."""
    out: dict[Pool, tuple[str, str]] = {}
    for (region, model), row in pool_demand(plan, flows).iterrows():
        trough = trough_period(row)  # the one trough rule (planner.sim.windows): least demand above zero
        if trough is None:
            continue
        out[(str(region), str(model))] = (str(row.idxmax()), trough)  # idxmax: first of equal values
    return out


def _pool_labels(periods: dict[Pool, tuple[str, str]]) -> dict[str, dict[Pool, str]]:
    """period -> pool -> the window names the pool has there."""
    out: dict[str, dict[Pool, list[str]]] = {}
    for pool, (peak, trough) in sorted(periods.items()):
        out.setdefault(peak, {}).setdefault(pool, []).append(POOL_PEAK)
        out.setdefault(trough, {}).setdefault(pool, []).append(POOL_TROUGH)
    return {period: {pool: " + ".join(dict.fromkeys(names)) for pool, names in pools.items()}
            for period, pools in out.items()}


def _pool_window(plan: pd.DataFrame, flows: pd.DataFrame, period: str, labels: dict[Pool, str]) -> Window:
    """The window of one period replaying only ``labels``' pools."""
    window = Window(period, pd.DataFrame(), tuple(sorted(labels.items())))
    rows, routed = window.rows_of(plan), window.rows_of(flows)
    _, demand = select_window(rows[rows["period"].astype(str) == period],
                              routed[routed["period"].astype(str) == period], "peak")
    return Window(period, demand, window.pools)


def loop_windows(plan: pd.DataFrame, flows: pd.DataFrame) -> list[Window]:
    """The fleet peak (every pool), then each other period holding some pool's own peak or trough, in period order."""
    fleet_period, fleet_demand = select_window(plan, flows, "peak")
    by_period = _pool_labels(pool_periods(plan, flows))
    at_fleet = {pool: f"{FLEET_PEAK} + {label}" for pool, label in by_period.get(fleet_period, {}).items()}
    windows = [Window(fleet_period, fleet_demand, tuple(sorted(at_fleet.items())), fleet=True)]
    for period in dict.fromkeys(plan["period"].astype(str)):
        if period != fleet_period and period in by_period:
            windows.append(_pool_window(plan, flows, period, by_period[period]))
    return windows

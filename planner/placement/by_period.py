"""A block with its core fixed, solved one period at a time.

The core of a block is its columns with no period index: the reserved replicas R and the
serving indicators y. With the core fixed, every remaining row of the placement MILP
(``problem.py``) and of the rounded capacity cuts (``strengthen.py``) is per period:
(demand), (route), (cap), (spotcap), (quota), (redundancy), (pool), (vub), (sustained)
and (mir) each touch one period's on-demand, spot, flow and load columns, and (cover)
touches y only. So the fixed-core MILP splits into one small MILP per period, and the
sum of their optima is its optimum. A node-limited branch and bound over the whole
fixed-core MILP branches across hundreds of independent periods and stops far from that
optimum on long horizons; the periods one by one reach it (each to ``PERIOD_GAP``) in a
few milliseconds apiece.

The switching rows (a switching cost) link each period to the one before, through the
on-demand replicas D and their switching columns w. They are set aside: the periods are
completed without them, each at its least rental, and then every unit's on-demand
replicas are raised where keeping them through a dip costs less than stopping and
starting them again (``switching.py``, exact for each unit given the others), and w is
set to the steps left. The plan is feasible (more replicas break no row within the
quota) but no longer the fixed core's optimum: the cut LP bound still measures it.

The budget row links every period and leaves nothing to split: :meth:`PeriodSplit.of`
then returns None and the caller solves the fixed-core MILP whole. Every period's search
is bounded by a node count, so the result is the same on any machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from planner.placement import highs_backend
from planner.placement.limits import SafetyNet
from planner.placement.milp import Block, Milp
from planner.placement.status import SolveOutcome, SolveStatus, classify
from planner.placement.switching import smooth_trajectory

PERIOD_GAP = 1e-4
"""Relative gap each period's MILP is searched to: the completion is optimal to this."""
PERIOD_NODES = 200
"""Nodes per period's MILP; the periods are small enough that this is seldom reached."""
PERIOD_OPTIONS: dict[str, float | int | str | bool] = {"mip_detect_symmetry": False, "mip_heuristic_effort": 0.0}
"""A period's MILP is tiny: HiGHS's symmetry detection and primal heuristics cost more than its search."""


def column_periods(milp: Milp) -> np.ndarray:
    """The period of every column (-1: a core column, with no period index)."""
    period = np.full(milp.n_cols, -1, dtype=np.int64)
    for block in milp.cols.values():
        if "t" in block.index:
            period[block.start:block.stop] = block.index["t"]
    return period


@dataclass(frozen=True)
class _Period:
    cols: np.ndarray
    rows: np.ndarray
    A: sp.csr_matrix


@dataclass(frozen=True)
class PeriodSplit:
    """The block's MILP cut into its core and one sub-MILP per period."""

    milp: Milp
    core: np.ndarray  # column indices of the core
    A: sp.csc_matrix
    core_rows: np.ndarray  # rows that touch core columns only
    periods: tuple[_Period, ...]
    switching: tuple[tuple[str, str], ...] = ()  # (on-demand block, its switching block), set aside

    @classmethod
    def of(cls, milp: Milp) -> PeriodSplit | None:
        """The split, or None when a row other than the switching rows links two periods (a budget row)."""
        period = column_periods(milp)
        core = np.flatnonzero(period < 0)
        switching = tuple((name[1:], name) for name in milp.cols if name.startswith("w"))
        linking_rows = np.zeros(milp.n_rows, dtype=bool)
        set_aside = np.zeros(milp.n_cols, dtype=bool)
        for _, w in switching:
            set_aside[milp.cols[w].start:milp.cols[w].stop] = True
        for name, block in milp.rows.items():
            if name.startswith("switch"):
                linking_rows[block.start:block.stop] = True
        A = milp.A.tocsr()
        A = sp.diags((~linking_rows).astype(float)) @ A  # the switching rows, emptied
        A.eliminate_zeros()
        free = A.copy()
        free.data = (period[free.indices] + 1).astype(float)  # 0 marks a core column
        free.eliminate_zeros()
        highest = np.asarray(free.max(axis=1).todense()).ravel()
        flipped = free.copy()
        flipped.data = (milp.instance.n_periods + 2) - flipped.data
        lowest = (milp.instance.n_periods + 2) - np.asarray(flipped.max(axis=1).todense()).ravel()
        touched = np.diff(free.indptr) > 0
        if (highest[touched] != lowest[touched]).any():
            return None
        csc = A.tocsc()
        pieces = []
        for t in range(milp.instance.n_periods):
            cols = np.flatnonzero((period == t) & ~set_aside)
            sub = csc[:, cols].tocsr()
            rows = np.flatnonzero(np.diff(sub.indptr) > 0)
            pieces.append(_Period(cols, rows, sub[rows]))
        return cls(milp, core, csc, np.flatnonzero(~touched & ~linking_rows), tuple(pieces), switching)

    def complete(self, core_values: np.ndarray, net: SafetyNet) -> SolveOutcome:
        """The best plan with the core fixed to ``core_values``: each period's MILP on its own.

        Infeasible when a row of the core alone or a period's MILP is; the objective is
        the core's cost plus the periods' optima.
        """
        milp = self.milp
        x = np.zeros(milp.n_cols)
        x[self.core] = core_values
        outcome = SolveOutcome(status=SolveStatus.INFEASIBLE, backend="highs", message="the core breaks a row")
        level = self.A @ x
        ok = (level[self.core_rows] >= milp.row_lo[self.core_rows] - 1e-6) & (
            level[self.core_rows] <= milp.row_hi[self.core_rows] + 1e-6)
        if not ok.all():
            return outcome
        total = float(milp.c @ x) + milp.offset
        for piece in self.periods:
            if not piece.cols.size:
                continue
            sub = replace(milp, c=milp.c[piece.cols], cost_usd=milp.cost_usd[piece.cols], A=piece.A,
                          row_lo=milp.row_lo[piece.rows] - level[piece.rows],
                          row_hi=milp.row_hi[piece.rows] - level[piece.rows], col_lo=milp.col_lo[piece.cols],
                          col_hi=milp.col_hi[piece.cols], integer=milp.integer[piece.cols], cols={}, rows={},
                          offset=0.0, _names={})
            found = _solve_period(sub, net)
            outcome.hit_time_limit |= found.hit_time_limit
            if found.x is None:
                outcome.message = "a period's MILP is infeasible with this core"
                return outcome
            x[piece.cols] = found.x
            total += found.objective
        x[milp.integer] = np.rint(x[milp.integer])
        if self.switching:
            self._keep_through_dips(x)
            total = float(milp.c @ x) + milp.offset
        outcome.x, outcome.objective, outcome.bound = x, total, -math.inf
        outcome.status = classify(total, -math.inf, 1.0, outcome.hit_time_limit)
        outcome.message = "completed period by period"
        return outcome

    def _keep_through_dips(self, x: np.ndarray) -> None:
        """Raise each unit's on-demand replicas where that costs less than switching; set w to the steps left.

        Units are taken in column order, each within the quota the others leave in every period.
        """
        milp = self.milp
        quota = milp.rows.get("quota")  # GPUs per (region, SKU, period); left out where it cannot bind
        rows = slice(quota.start, quota.stop) if quota is not None else slice(0, 0)
        A = self.A[rows]
        slack = milp.row_hi[rows] - A @ x
        for d_name, w_name in self.switching:
            D, w = milp.cols[d_name], milp.cols[w_name]
            units, periods = D.index["u"], D.index["t"]
            switch_cost = float(milp.c[w.start]) if w.size else 0.0
            for u in np.unique(units):
                cols = D.start + np.flatnonzero(units == u)
                cols = cols[np.argsort(periods[cols - D.start])]
                per_gpu = A[:, cols].tocsc()  # at most one quota row per column; none: no quota
                limited = np.diff(per_gpu.indptr) > 0
                row = np.zeros(cols.size, dtype=np.int64)
                gpus = np.ones(cols.size)
                row[limited] = per_gpu.indices[per_gpu.indptr[:-1][limited]]
                gpus[limited] = per_gpu.data[per_gpu.indptr[:-1][limited]]
                room = np.full(cols.size, np.inf)
                room[limited] = np.floor((slack[row[limited]] + 1e-6) / gpus[limited])
                lower = np.rint(x[cols]).astype(np.int64)
                # never above the unit's busiest period: more than that only costs
                upper = np.minimum(np.minimum(lower + room, milp.col_hi[cols]), lower.max()).astype(np.int64)
                kept = smooth_trajectory(milp.c[cols], lower, upper, switch_cost)
                np.subtract.at(slack, row[limited], ((kept - lower) * gpus)[limited])
                x[cols] = kept
            same, previous = switch_steps(D, w)
            x[w.start:w.stop] = np.abs(x[D.start + same] - x[D.start + previous])


def switch_steps(D: Block, w: Block) -> tuple[np.ndarray, np.ndarray]:
    """Offsets into D, for each switching column, of the on-demand column it follows and of
    the one in the period before (cyclically)."""
    T = int(D.index["t"].max()) + 1 if D.size else 0
    position = {(int(u), int(t)): i for i, (u, t) in enumerate(zip(D.index["u"], D.index["t"], strict=True))}
    pairs = [(position[u, t], position[u, (t - 1) % T])
             for u, t in zip(w.index["u"].tolist(), w.index["t"].tolist(), strict=True)]
    same, previous = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    return same, previous


def _solve_period(sub: Milp, net: SafetyNet) -> SolveOutcome:
    """One period's MILP: its LP when that is integral already, else the MILP."""
    what = "a period of a fixed-core plan"
    lp = net.watch(highs_backend.solve(sub.relaxed(), time_limit_s=net.left(), gap=PERIOD_GAP), what)
    if lp.x is None or lp.status == SolveStatus.INFEASIBLE:
        return lp
    if np.all(np.abs(lp.x[sub.integer] - np.rint(lp.x[sub.integer])) <= 1e-7):
        return lp
    return net.watch(highs_backend.solve(sub, time_limit_s=net.left(), gap=PERIOD_GAP, node_limit=PERIOD_NODES,
                                         options=PERIOD_OPTIONS), what)

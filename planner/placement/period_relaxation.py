r"""A block relaxed one period at a time: a lower bound and a plan in seconds, without its LP.

The core of a block is its columns with no period index (reserved replicas R, serving
indicators y; see ``by_period.py``). With the switching rows dropped (their columns w ≥ 0
cost ≥ 0, so dropping them relaxes), the block's MILP reads

    min  c_K x_K + Σ_t c_t x_t    s.t.  rows of the core alone,  and each period's rows in (x_K, x_t).

Give every period its own copy x_K^t of the core, charged the share h_t / H of the core's
cost (h_t the period's hours, H = Σ_t h_t):

    min  Σ_t [ (h_t / H) c_K x_K^t + c_t x_t ]    s.t.  the rows of the core alone and of period t, in (x_K^t, x_t).

Every plan of the block is a plan of this problem with the same cost (all copies equal,
Σ_t h_t / H = 1), so the optimum of its LP relaxation is a lower bound on the block, and
it splits into one small LP per period. The block's LP has T times one period's columns
and takes minutes on the largest blocks; the periods one by one take a few seconds in
all. The bound is weaker than the block's LP where the reserved replicas a peak needs
must be paid through the quiet periods too (here every period reserves its own).

The copies also say what a plan's core could be: serve every region that some period
serves (y = 1 where any copy has y > 0), and reserve, on each unit, a high quantile of
what the periods reserve. A few such cores are completed period by period
(``by_period.py``), their steady on-demand replicas bought reserved (``steady.py``), and
the cheapest is kept. It is the plan of a block whose LP the safety net
stopped: worse than the warm start's, but a plan, with a proven bound beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from planner.placement import highs_backend
from planner.placement.by_period import PeriodSplit
from planner.placement.limits import SafetyNet
from planner.placement.milp import Milp
from planner.placement.status import SolveOutcome, SolveStatus
from planner.placement.steady import reserve_steady_replicas

RESERVED_LEVELS = (0.5, 0.7, 0.8, 0.9)
"""Quantiles, over the periods, of each unit's reserved replicas that guided cores keep. On the
large global blocks the cheapest plans came from 0.75 to 0.95 (decision 0030)."""


@dataclass(frozen=True)
class PeriodRelaxation:
    """The relaxation's value (a lower bound on the block; -inf when a period's LP did not
    finish) and every period's copy of the core, one row per period."""

    bound: float
    cores: np.ndarray


def relax_by_period(split: PeriodSplit, net: SafetyNet) -> PeriodRelaxation | None:
    """Solve each period's LP with its own copy of the core (module docstring).

    None when a period's LP is infeasible: then so is the block, whose plans are plans of it.
    """
    milp = split.milp
    hours = milp.instance.periods.hours
    share = hours / hours.sum()
    A = split.A.tocsr()
    core = split.core
    bound = milp.offset
    cores = np.zeros((len(split.periods), core.size))
    for t, piece in enumerate(split.periods):
        cols = np.concatenate([core, piece.cols])
        rows = np.union1d(piece.rows, split.core_rows)
        charged = np.ones(cols.size)
        charged[:core.size] = share[t]  # the period's copy of the core pays the period's share
        sub = replace(milp, c=milp.c[cols] * charged, cost_usd=milp.cost_usd[cols] * charged, A=A[rows][:, cols],
                      row_lo=milp.row_lo[rows], row_hi=milp.row_hi[rows], col_lo=milp.col_lo[cols],
                      col_hi=milp.col_hi[cols], integer=np.zeros(cols.size, dtype=bool), cols={}, rows={},
                      offset=0.0, _names={})
        lp = net.watch(highs_backend.solve(sub, time_limit_s=net.left(), gap=0.0), "a period of the period relaxation")
        if lp.status == SolveStatus.INFEASIBLE:
            return None
        if lp.x is None:
            return PeriodRelaxation(-math.inf, cores[:t])
        bound = bound + lp.objective if lp.status == SolveStatus.OPTIMAL else -math.inf
        cores[t] = lp.x[:core.size]
    return PeriodRelaxation(bound, cores)


def guided_cores(split: PeriodSplit, cores: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Cores from the periods' copies, each serving every region that some period serves.

    First the cores to compare: each unit reserving the ``RESERVED_LEVELS`` quantiles of what
    the periods reserve, rounded (the same core once). Then, in case none of them can be
    completed, the safer ones in order: the fewest any period reserves, and none at all.
    The copies spread their reserved replicas over a region's units differently from
    period to period, so the fewest is often none, and the peaks are left to on-demand
    replicas and their switching; a high quantile keeps what the periods need together,
    but may break a quiet period's sustained-commitment row.
    """
    milp = split.milp
    lo, hi = milp.col_lo[split.core], milp.col_hi[split.core]
    y, r = milp.cols.get("y"), milp.cols.get("R")
    serving = (split.core >= y.start) & (split.core < y.stop) if y is not None else np.zeros(split.core.size, bool)
    reserved = (split.core >= r.start) & (split.core < r.stop) if r is not None else np.zeros(split.core.size, bool)
    served = (cores[:, serving] > 1e-6).any(axis=0)

    def core(reserving: np.ndarray) -> np.ndarray:
        values = np.where(reserved, reserving, np.rint(cores.mean(axis=0)))
        values[serving] = served
        return np.clip(values, lo, hi)

    compared: dict[bytes, np.ndarray] = {}
    for level in RESERVED_LEVELS:
        values = core(np.rint(np.quantile(cores, level, axis=0)))
        compared.setdefault(values.tobytes(), values)
    return list(compared.values()), [core(np.floor(cores.min(axis=0) + 1e-6)), core(np.zeros(split.core.size))]


def plan_by_period(milp: Milp, net: SafetyNet) -> tuple[SolveOutcome | None, float]:
    """A plan of the block and a lower bound on it, from the period relaxation alone (module docstring).

    The cheapest plan of the compared guided cores, each completed period by period and its
    steady replicas bought reserved; if none completes, the first safer core that does.
    (None, -inf) where a row links the periods (a budget), (None, inf) where a period alone
    proves the block infeasible; no plan when no core completes.
    """
    split = PeriodSplit.of(milp)
    if split is None:
        return None, -math.inf
    relaxation = relax_by_period(split, net)
    if relaxation is None:
        return None, math.inf
    if len(relaxation.cores) < len(split.periods):  # a period's LP stopped even within the grace
        return None, -math.inf
    compared, safer = guided_cores(split, relaxation.cores)
    plans = [_finished(milp, split.complete(values, net)) for values in compared]
    best = min((p for p in plans if p is not None), key=lambda p: p.objective, default=None)
    for values in safer if best is None else []:
        best = _finished(milp, split.complete(values, net))
        if best is not None:
            break
    return best, relaxation.bound


def _finished(milp: Milp, found: SolveOutcome) -> SolveOutcome | None:
    """A completed core's plan with its steady replicas bought reserved; None if it did not complete."""
    if found.x is None:
        return None
    x = reserve_steady_replicas(milp, found.x)
    return replace(found, x=x, objective=float(milp.c @ x) + milp.offset, message="planned from the period relaxation")

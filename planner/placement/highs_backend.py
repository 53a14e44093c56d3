"""HiGHS through highspy, fed the problem's arrays directly (no modelling layer).

Passing the CSC arrays to ``Highs.passModel`` is much cheaper than building the same
model as modelling-layer objects, and this is the path the decomposition calls dozens of
times (figures: ``docs/decisions/0006-placement-backends.md``). A warm start is handed
over with ``setSolution``; HiGHS checks it and keeps it as the first incumbent when it is
feasible.

Determinism: HiGHS runs single-threaded in every process that places (its simplex is
serial anyway, and one thread rules out any order-of-completion effect in branch and
bound), and a MILP stops at its gap or its node limit (``mip_max_nodes``), both of
which HiGHS reaches after the same work on any machine. The time limit is only a
safety net: a call that hits it says so (``SolveOutcome.hit_time_limit``).

Silence: the first HiGHS object of a process prints a licence banner on the C-level
stdout when its callbacks are attached, which would corrupt ``--json`` output.
:class:`QuietHighs` turns console logging off before that, so the banner is consumed
without being printed and no later HiGHS object of the process (PuLP's included) prints it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import highspy
import numpy as np

from planner.placement.milp import Milp
from planner.placement.status import SolveOutcome, SolveStatus, classify

_THREADS = 1
DEADLINE_GRACE_S = 0.5
"""HiGHS checks its time limit only between some phases (cut rounds, sub-MIPs), so it can
overrun the limit by far; an interrupt callback stops it this long after the limit."""


def use_threads(count: int) -> None:
    """Fix HiGHS's thread count for this process; call before its first solve.

    HiGHS fixes the count when it first starts its scheduler, and a different value later
    in the same process makes ``run`` fail, so it is set once per process. The default is
    one thread (module docstring).
    """
    global _THREADS
    _THREADS = int(count)


class QuietHighs(highspy.Highs):
    """A ``highspy.Highs`` that never writes to the console, not even the licence banner."""

    def enableCallbacks(self) -> None:
        # highspy's constructor calls this; HiGHS prints its banner here unless console
        # logging is already off (output stays on, so the banner counts as written)
        self.setOptionValue("log_to_console", False)
        super().enableCallbacks()  # type: ignore[no-untyped-call]  # highspy leaves it unannotated


def new_highs() -> highspy.Highs:
    """A silent HiGHS instance on this process's thread count."""
    highs = QuietHighs()  # type: ignore[no-untyped-call]  # highspy's constructor is unannotated
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", _THREADS)
    return highs


def load(milp: Milp, highs: highspy.Highs, names: bool = False) -> None:
    """Pass the MILP's arrays to HiGHS (column-wise), with names when asked (for LP/MPS dumps)."""
    A = milp.A.tocsc()
    inf = highs.getInfinity()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = milp.n_cols, milp.n_rows
    lp.col_cost_ = milp.c
    lp.offset_ = milp.offset
    lp.col_lower_ = milp.col_lo
    lp.col_upper_ = np.where(np.isinf(milp.col_hi), inf, milp.col_hi)
    lp.row_lower_ = np.where(np.isinf(milp.row_lo), -inf, milp.row_lo)
    lp.row_upper_ = np.where(np.isinf(milp.row_hi), inf, milp.row_hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data
    if milp.integer.any():
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in milp.integer]
    if names:
        lp.col_names_ = milp.col_names()
        lp.row_names_ = milp.row_names()
    highs.passModel(lp)


def solve(
    milp: Milp,
    *,
    time_limit_s: float,
    gap: float,
    node_limit: int | None = None,
    start: np.ndarray | None = None,
    options: dict[str, float | int | str | bool] | None = None,
) -> SolveOutcome:
    """Solve the MILP (or LP, when nothing is integer) with HiGHS; never raises on solver trouble.

    A MILP stops at ``gap`` or after ``node_limit`` branch-and-bound nodes (None: no node
    limit); ``time_limit_s`` is the wall-clock safety net (module docstring).
    """
    began = time.perf_counter()
    highs = new_highs()
    load(milp, highs)
    highs.setOptionValue("time_limit", float(max(time_limit_s, 0.01)))
    highs.setOptionValue("mip_rel_gap", float(gap))
    highs.setOptionValue("mip_abs_gap", 1e-6)
    if node_limit is not None:
        highs.setOptionValue("mip_max_nodes", int(max(node_limit, 1)))
    for key, value in (options or {}).items():
        highs.setOptionValue(key, value)
    if start is not None and milp.integer.any():
        highs.setSolution(_solution(start))
    deadline = began + max(time_limit_s, 0.01) + DEADLINE_GRACE_S
    _enforce_deadline(highs, lambda: deadline)
    return _run(highs, milp, began, gap)


def _run(highs: highspy.Highs, milp: Milp, began: float, gap: float) -> SolveOutcome:
    """Run the loaded model and read its outcome (``began``: when building it started)."""
    built = time.perf_counter() - began
    run_status = highs.run()
    elapsed = time.perf_counter() - began
    model_status = highs.getModelStatus()
    info = highs.getInfo()
    text = highs.modelStatusToString(model_status)
    is_mip = bool(milp.integer.any())
    outcome = SolveOutcome(status=SolveStatus.ERROR, backend="highs", solve_time_s=elapsed - built,
                           build_time_s=built, message=text,
                           hit_time_limit=model_status in (highspy.HighsModelStatus.kTimeLimit,
                                                           highspy.HighsModelStatus.kInterrupt))
    if model_status == highspy.HighsModelStatus.kInfeasible:
        outcome.status = SolveStatus.INFEASIBLE
        return outcome
    has_point = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if run_status == highspy.HighsStatus.kError or not has_point:
        if model_status in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kInterrupt):
            outcome.message = "no feasible plan found within the time limit"
        return outcome
    outcome.x = np.asarray(highs.getSolution().col_value, dtype=float)
    outcome.objective = float(info.objective_function_value)
    if is_mip:
        outcome.bound = float(info.mip_dual_bound)
        outcome.details = {"nodes": int(info.mip_node_count), "status_text": text}
    else:
        outcome.bound = outcome.objective if model_status == highspy.HighsModelStatus.kOptimal else -math.inf
    outcome.status = classify(outcome.objective, outcome.bound, gap, outcome.hit_time_limit)
    return outcome


class LoadedLp:
    """An LP kept loaded in HiGHS, so that added rows and changed bounds re-solve from the last basis.

    After a row is added or a column fixed, dual simplex from the previous optimal basis
    needs a few pivots where a cold solve of a large block takes minutes. Each re-solve is
    exact (the LP's optimum), so only the time depends on what was solved before. The
    deadline callback is attached once; each solve moves it to its own time limit.
    """

    def __init__(self, milp: Milp) -> None:
        if milp.integer.any():
            raise ValueError("LoadedLp takes an LP: pass milp.relaxed()")
        self.milp = milp
        self.highs = new_highs()
        load(milp, self.highs)
        self._deadline = math.inf
        _enforce_deadline(self.highs, lambda: self._deadline)

    def add_rows(self, extended: Milp) -> None:
        """Add the rows ``extended`` has beyond the loaded LP's (same columns, rows appended)."""
        have = self.milp.n_rows
        if extended.n_cols != self.milp.n_cols or extended.n_rows < have:
            raise ValueError("the extended LP must keep the loaded LP's columns and rows, in order")
        if extended.n_rows == have:
            return
        extra = extended.A[have:].tocsr()
        inf = self.highs.getInfinity()
        self.highs.addRows(extra.shape[0], np.where(np.isinf(extended.row_lo[have:]), -inf, extended.row_lo[have:]),
                           np.where(np.isinf(extended.row_hi[have:]), inf, extended.row_hi[have:]), extra.nnz,
                           extra.indptr[:-1].astype(np.int32), extra.indices.astype(np.int32), extra.data)
        self.milp = extended

    def set_bounds(self, cols: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """Set the bounds of columns ``cols`` (indices into the LP's columns)."""
        index = np.asarray(cols, dtype=np.int32)
        self.highs.changeColsBounds(index.size, index, np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))

    def reduced_costs(self, cols: np.ndarray) -> np.ndarray:
        """The last solve's reduced costs of columns ``cols``: for a fixed column, a subgradient of
        the LP's value in its bound."""
        duals = np.asarray(self.highs.getSolution().col_dual, dtype=float)
        return np.asarray(duals[np.asarray(cols)], dtype=float)

    def solve(self, time_limit_s: float) -> SolveOutcome:
        """Solve from the last basis; ``time_limit_s`` is the wall-clock safety net."""
        began = time.perf_counter()
        # HiGHS measures time_limit on one clock for the object's whole life (its run time
        # over every solve so far), so this solve's limit starts where that clock stands
        self.highs.setOptionValue("time_limit", self.highs.getRunTime() + float(max(time_limit_s, 0.01)))
        self._deadline = began + max(time_limit_s, 0.01) + DEADLINE_GRACE_S
        return _run(self.highs, self.milp, began, gap=0.0)


def _enforce_deadline(highs: highspy.Highs, deadline: Callable[[], float]) -> None:
    """Interrupt HiGHS once the clock passes ``deadline()`` (read at each check, so it may move)."""
    def stop_if_late(event: highspy.HighsCallbackEvent) -> None:
        if time.perf_counter() > deadline():
            event.interrupt()

    highs.cbMipInterrupt += stop_if_late
    highs.cbSimplexInterrupt += stop_if_late


def _solution(x: np.ndarray) -> highspy.HighsSolution:
    solution = highspy.HighsSolution()
    solution.col_value = np.asarray(x, dtype=float)
    solution.value_valid = True
    return solution

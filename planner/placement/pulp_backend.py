"""PuLP backend: the same arrays as named PuLP variables and constraints, solved by CBC or HiGHS.

Every column and row gets the name ``problem.Milp`` builds from its indices
(``D_aws_us_east_1_H100_llama_3_1_8b_t12``, ``quota_gcp_us_central1_H100_t5``), so a PuLP
LP file reads as the formulation does. Building PuLP objects is slow next to handing the
arrays to HiGHS directly, which is why the default path does that; this backend is the
reference the others are checked against, and the CBC path.

CBC does not return its best bound through PuLP, only in its log. The log is gathered in
memory (a pipe drained by a thread, handed to PuLP through its ``get_pipe`` hook) and its
summary (``Objective value`` / ``Lower bound``, and ``Stopped on time`` when the
wall-clock safety net cut it) is read back; no file of ours is written or read. Both
solvers run on one thread with a node limit, so a search stops after the same work on
any machine.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
import warnings
from typing import Any

import numpy as np
import pulp

from planner.placement.milp import Milp
from planner.placement.status import SolveOutcome, SolveStatus, classify

_LOWER_BOUND = re.compile(r"^Lower bound:\s*([-+0-9.eE]+)", re.MULTILINE)
_OBJECTIVE = re.compile(r"^Objective value:\s*([-+0-9.eE]+)", re.MULTILINE)
_BEST_POSSIBLE = re.compile(r"best possible ([-+0-9.eE]+)")
_STOPPED_ON_TIME = re.compile(r"^Result - Stopped on time", re.MULTILINE)


def build(milp: Milp) -> tuple[pulp.LpProblem, list[pulp.LpVariable]]:
    """The MILP as a PuLP problem with index-built names."""
    problem = pulp.LpProblem("placement", pulp.LpMinimize)
    names = milp.col_names()
    variables = [
        problem.add_variable(
            names[j],
            lowBound=float(milp.col_lo[j]),
            upBound=None if math.isinf(milp.col_hi[j]) else float(milp.col_hi[j]),
            cat=pulp.LpInteger if milp.integer[j] else pulp.LpContinuous,
        )
        for j in range(milp.n_cols)
    ]
    nz = np.flatnonzero(milp.c)
    problem += pulp.LpAffineExpression([(variables[j], float(milp.c[j])) for j in nz]) + milp.offset
    A = milp.A.tocsr()
    row_names = milp.row_names()
    for i in range(milp.n_rows):
        start, stop = A.indptr[i], A.indptr[i + 1]
        expr = pulp.LpAffineExpression(
            [(variables[j], float(v)) for j, v in zip(A.indices[start:stop], A.data[start:stop], strict=True)]
        )
        lo, hi = milp.row_lo[i], milp.row_hi[i]
        if lo == hi:
            problem += pulp.LpConstraint(expr, pulp.LpConstraintEQ, row_names[i], float(lo))
            continue
        if math.isfinite(lo):
            problem += pulp.LpConstraint(expr, pulp.LpConstraintGE, row_names[i] + ("_lo" if math.isfinite(hi) else ""),
                                         float(lo))
        if math.isfinite(hi):
            problem += pulp.LpConstraint(expr, pulp.LpConstraintLE, row_names[i] + ("_hi" if math.isfinite(lo) else ""),
                                         float(hi))
    return problem, variables


class CapturedOutput:
    """The write end of a pipe for a child process's output; a thread gathers what comes out, in memory.

    The thread keeps the pipe drained while the child runs, so a long log never blocks it.
    """

    def __init__(self) -> None:
        read_end, self._write_end = os.pipe()
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._drain, args=(read_end,), daemon=True)
        self._reader.start()

    def fileno(self) -> int:
        return self._write_end

    def close(self) -> None:
        """Close this process's write end (the reader sees the end once the child's copy is closed too)."""
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1

    def text(self) -> str:
        """Everything written, once the writers are done."""
        self.close()
        self._reader.join()
        return b"".join(self._chunks).decode(errors="replace")

    def _drain(self, read_end: int) -> None:
        try:
            while chunk := os.read(read_end, 1 << 16):
                self._chunks.append(chunk)
        finally:
            os.close(read_end)


class _LoggedCbc(pulp.PULP_CBC_CMD):  # type: ignore[misc]  # pulp is untyped (Any) to mypy
    """PuLP's bundled CBC with its output sent to a :class:`CapturedOutput` (PuLP's ``get_pipe`` hook)."""

    def __init__(self, log: CapturedOutput, **options: Any) -> None:
        with warnings.catch_warnings():  # the CBC binary bundled with PuLP; COIN_CMD needs a separate CBC
            warnings.simplefilter("ignore", DeprecationWarning)
            super().__init__(msg=False, **options)
        self.log = log

    def get_pipe(self) -> CapturedOutput:
        return self.log


def solve_cbc(milp: Milp, *, time_limit_s: float, gap: float, node_limit: int | None = None,
              start: np.ndarray | None = None) -> SolveOutcome:
    """Solve with PuLP's bundled CBC, its bound and time-limit stop read from its log; never raises."""
    log = CapturedOutput()
    try:
        engine = _LoggedCbc(log, timeLimit=max(1, math.ceil(time_limit_s)), gapRel=gap, warmStart=start is not None,
                            threads=1, maxNodes=None if node_limit is None else int(max(node_limit, 1)))
        return _solve(milp, engine, "cbc", gap=gap, start=start, log=log)
    finally:
        log.close()


def solve_highs(milp: Milp, *, time_limit_s: float, gap: float, node_limit: int | None = None,
                start: np.ndarray | None = None) -> SolveOutcome:
    """Solve with HiGHS through PuLP (a cross-check of the direct path); never raises on solver trouble."""
    nodes = {} if node_limit is None else {"mip_max_nodes": int(max(node_limit, 1))}
    engine = pulp.HiGHS(msg=False, timeLimit=float(time_limit_s), gapRel=gap, threads=1, **nodes)
    return _solve(milp, engine, "highs", gap=gap, start=start, log=None)


def _solve(milp: Milp, engine: Any, solver: str, *, gap: float, start: np.ndarray | None,
           log: CapturedOutput | None) -> SolveOutcome:
    """Build the PuLP problem, solve it with ``engine`` (its limits already set) and read the outcome back."""
    began = time.perf_counter()
    problem, variables = build(milp)
    if start is not None:  # clipped to the bounds: a solver's start can sit a rounding error outside them
        for var, value in zip(variables, np.clip(start, milp.col_lo, milp.col_hi), strict=True):
            var.setInitialValue(float(round(value)) if var.cat == pulp.LpInteger else float(value))
    built = time.perf_counter() - began
    outcome = SolveOutcome(status=SolveStatus.ERROR, backend=f"pulp-{solver}", build_time_s=built)
    try:
        problem.solve(engine)
    except pulp.PulpSolverError as exc:
        outcome.message = str(exc)
        outcome.solve_time_s = time.perf_counter() - began - built
        return outcome
    log_text = log.text() if log is not None else ""
    outcome.solve_time_s = time.perf_counter() - began - built
    outcome.message = pulp.LpStatus.get(problem.status, str(problem.status))
    outcome.hit_time_limit = _hit_time_limit(solver, problem, log_text)
    if problem.sol_status == pulp.LpSolutionInfeasible or problem.status == pulp.LpStatusInfeasible:
        outcome.status = SolveStatus.INFEASIBLE
        return outcome
    if problem.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return outcome
    x = np.array([var.varValue if var.varValue is not None else 0.0 for var in variables], dtype=float)
    outcome.x = x
    outcome.objective = float(milp.c @ x + milp.offset)
    outcome.bound = _bound(solver, problem, log_text, outcome.objective, milp)
    outcome.status = classify(outcome.objective, outcome.bound, gap, outcome.hit_time_limit)
    return outcome


def _hit_time_limit(solver: str, problem: pulp.LpProblem, log_text: str) -> bool:
    """Whether the wall-clock safety net stopped the run (CBC's log summary, HiGHS's model status)."""
    if solver == "cbc":
        return _STOPPED_ON_TIME.search(log_text) is not None
    model = getattr(problem, "solverModel", None)
    if model is None:
        return False
    import highspy

    return model.getModelStatus() in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kInterrupt)


def _bound(solver: str, problem: pulp.LpProblem, log_text: str, objective: float, milp: Milp) -> float:
    """Best proven lower bound: from the CBC log summary, or HiGHS's MIP dual bound."""
    if not milp.integer.any() and problem.sol_status == pulp.LpSolutionOptimal:
        return objective
    if solver == "cbc":
        match = _LOWER_BOUND.search(log_text)
        if match is None:
            found = _BEST_POSSIBLE.findall(log_text)
            match_value = float(found[-1]) if found else None
        else:
            match_value = float(match.group(1))
        if match_value is not None:
            return min(match_value, objective)
        return objective if problem.sol_status == pulp.LpSolutionOptimal else -math.inf
    model = getattr(problem, "solverModel", None)
    if model is not None:
        try:
            return min(float(model.getInfo().mip_dual_bound), objective)
        except (AttributeError, RuntimeError):
            pass
    return objective if problem.sol_status == pulp.LpSolutionOptimal else -math.inf

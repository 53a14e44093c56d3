"""OR-Tools backend: the arrays loaded through ``model_builder`` and solved by SCIP.

SCIP, because CP-SAT takes integer variables only (the model has continuous flows) and
HiGHS through OR-Tools would duplicate the direct HiGHS path (figures:
``docs/decisions/0006-placement-backends.md``). ``fill_model_from_sparse_data`` takes
the CSR matrix as it is (no per-coefficient Python calls); names are set only when asked,
for LP/MPS dumps.
"""

from __future__ import annotations

import math
import time

import numpy as np
from ortools.linear_solver.python import model_builder as mb

from planner.placement.milp import Milp
from planner.placement.status import SolveOutcome, SolveStatus, classify

ENGINE = "scip"


def build(milp: Milp, names: bool = False) -> mb.Model:
    """The MILP's arrays in an OR-Tools model (infinite bounds as ±1e30), with names when asked."""
    model = mb.Model()  # type: ignore[no-untyped-call]  # OR-Tools leaves the constructor unannotated
    helper = model.helper
    big = 1e30
    col_lo = np.asarray(milp.col_lo, dtype=float)
    col_hi = np.where(np.isinf(milp.col_hi), big, milp.col_hi).astype(float)
    cost = np.asarray(milp.c, dtype=float)
    row_lo = np.where(np.isinf(milp.row_lo), -big, milp.row_lo).astype(float)
    row_hi = np.where(np.isinf(milp.row_hi), big, milp.row_hi).astype(float)
    # OR-Tools' stub puts float64 in ndarray's shape parameter, which no real array matches
    helper.fill_model_from_sparse_data(col_lo, col_hi, cost, row_lo, row_hi,  # type: ignore[arg-type]
                                       milp.A.tocsr().astype(float))
    for j in np.flatnonzero(milp.integer):
        helper.set_var_integrality(int(j), True)
    helper.set_objective_offset(float(milp.offset))
    if names:
        for col, name in enumerate(milp.col_names()):
            helper.set_var_name(col, name)
        for i, name in enumerate(milp.row_names()):
            helper.set_constraint_name(i, name)
    return model


def solve(
    milp: Milp,
    *,
    time_limit_s: float,
    gap: float,
    node_limit: int | None = None,
    start: np.ndarray | None = None,
) -> SolveOutcome:
    """Solve with SCIP through OR-Tools; never raises on solver trouble.

    SCIP runs on one thread and stops at ``gap`` or after ``node_limit`` nodes (None: no
    cap), which it reaches after the same work on any machine; ``time_limit_s`` is the
    wall-clock safety net (a run that ends within 2 % of it is taken to have hit it).
    """
    began = time.perf_counter()
    model = build(milp)
    if start is not None:
        for j in np.flatnonzero(milp.integer):
            model.helper.add_hint(int(j), float(round(start[j])))
    solver = mb.Solver(ENGINE)
    outcome = SolveOutcome(status=SolveStatus.ERROR, backend=f"ortools-{ENGINE}")
    if not solver.solver_is_supported():
        outcome.message = f"OR-Tools was built without {ENGINE}"
        return outcome
    limit_s = float(max(time_limit_s, 0.01))
    solver.set_time_limit_in_seconds(limit_s)
    nodes = "" if node_limit is None else f"limits/nodes = {int(max(node_limit, 1))}\n"
    solver.set_solver_specific_parameters(f"limits/gap = {gap:g}\nparallel/maxnthreads = 1\n{nodes}")
    solver.enable_output(False)
    built = time.perf_counter() - began
    status = solver.solve(model)
    outcome.build_time_s = built
    outcome.solve_time_s = time.perf_counter() - began - built
    outcome.message = str(status.name)
    outcome.hit_time_limit = outcome.solve_time_s >= 0.98 * limit_s
    if status == mb.SolveStatus.INFEASIBLE:
        outcome.status = SolveStatus.INFEASIBLE
        return outcome
    if status not in (mb.SolveStatus.OPTIMAL, mb.SolveStatus.FEASIBLE):
        return outcome
    values = solver.values(model.get_variables())
    outcome.x = np.asarray(values, dtype=float)
    outcome.objective = float(milp.c @ outcome.x + milp.offset)
    bound: float | None = solver.best_objective_bound
    if status == mb.SolveStatus.OPTIMAL and not milp.integer.any():
        bound = outcome.objective
    outcome.bound = float(bound) if bound is not None and math.isfinite(bound) else -math.inf
    outcome.bound = min(outcome.bound, outcome.objective)
    outcome.status = classify(outcome.objective, outcome.bound, gap, outcome.hit_time_limit)
    return outcome

"""The MILP backends behind one call: HiGHS direct, CBC or HiGHS through PuLP, SCIP through OR-Tools."""

from __future__ import annotations

import numpy as np

from planner.placement import highs_backend, ortools_backend, pulp_backend
from planner.placement.problem import Milp
from planner.placement.status import SolveOutcome, SolveStatus

BACKENDS = ("highs", "cbc", "ortools")
HIDDEN_BACKENDS = ("pulp-highs",)
"""Backends offered on the command line, and the PuLP-HiGHS path the tests use as a cross-check."""


def run_backend(backend: str, milp: Milp, *, time_limit_s: float, gap: float,
                start: np.ndarray | None = None) -> SolveOutcome:
    """Dispatch one MILP to a backend by name."""
    if backend == "highs":
        return highs_backend.solve(milp, time_limit_s=time_limit_s, gap=gap, start=start)
    if backend == "cbc":
        return pulp_backend.solve(milp, solver="cbc", time_limit_s=time_limit_s, gap=gap, start=start)
    if backend == "pulp-highs":
        return pulp_backend.solve(milp, solver="highs", time_limit_s=time_limit_s, gap=gap, start=start)
    if backend == "ortools":
        return ortools_backend.solve(milp, time_limit_s=time_limit_s, gap=gap, start=start)
    return SolveOutcome(status=SolveStatus.ERROR, backend=backend, message=f"unknown backend {backend!r}")

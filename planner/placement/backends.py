"""The MILP backends behind one call: HiGHS direct, CBC or HiGHS through PuLP, SCIP through OR-Tools."""

from __future__ import annotations

import numpy as np

from planner.placement import highs_backend, ortools_backend, pulp_backend
from planner.placement.problem import Milp
from planner.placement.status import SolveOutcome, SolveStatus

BACKENDS = ("highs", "cbc", "ortools")
HIDDEN_BACKENDS = ("pulp-highs",)
"""Backends offered on the command line, and the PuLP-HiGHS path the tests use as a cross-check."""


def run_backend(backend: str, milp: Milp, *, time_limit_s: float, gap: float, node_limit: int | None = None,
                start: np.ndarray | None = None) -> SolveOutcome:
    """Dispatch one MILP to a backend by name (``node_limit``: branch-and-bound nodes; the time is a safety net)."""
    limits = {"time_limit_s": time_limit_s, "gap": gap, "node_limit": node_limit, "start": start}
    if backend == "highs":
        return highs_backend.solve(milp, **limits)
    if backend == "cbc":
        return pulp_backend.solve(milp, solver="cbc", **limits)
    if backend == "pulp-highs":
        return pulp_backend.solve(milp, solver="highs", **limits)
    if backend == "ortools":
        return ortools_backend.solve(milp, **limits)
    return SolveOutcome(status=SolveStatus.ERROR, backend=backend, message=f"unknown backend {backend!r}")

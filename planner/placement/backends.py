"""The MILP backends behind one call, registered by name.

A backend is any function with the :class:`Backend` signature; the registries map the
``--solver`` names to them. Adding a backend takes its own module and one line in
``BACKENDS`` (offered on the command line) or ``HIDDEN_BACKENDS`` (for tests and
cross-checks). LPs always go to HiGHS directly (``highs_backend``), whatever the backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Protocol

import numpy as np

from planner.placement import highs_backend, ortools_backend, pulp_backend
from planner.placement.milp import Milp
from planner.placement.status import SolveOutcome, SolveStatus


class Backend(Protocol):
    """Solve one MILP; never raise on solver trouble (report it in the outcome's status and message).

    A MILP stops at ``gap`` or after ``node_limit`` branch-and-bound nodes (None: no node
    limit); ``time_limit_s`` is only the wall-clock safety net, and a call it stops sets
    ``hit_time_limit``. ``start`` is a warm start the backend may use when it is feasible.
    """

    def __call__(self, milp: Milp, *, time_limit_s: float, gap: float, node_limit: int | None = None,
                 start: np.ndarray | None = None) -> SolveOutcome: ...


BACKENDS: Final[Mapping[str, Backend]] = MappingProxyType({
    "highs": highs_backend.solve,
    "cbc": pulp_backend.solve_cbc,
    "ortools": ortools_backend.solve,
})
"""The backends offered on the command line, by ``--solver`` name."""

HIDDEN_BACKENDS: Final[Mapping[str, Backend]] = MappingProxyType({
    "pulp-highs": pulp_backend.solve_highs,
})
"""Backends the tests use as cross-checks, accepted but not offered."""


def run_backend(backend: str, milp: Milp, *, time_limit_s: float, gap: float, node_limit: int | None = None,
                start: np.ndarray | None = None) -> SolveOutcome:
    """Solve one MILP with the backend of that name (an unknown name is an ``error`` outcome)."""
    solve = BACKENDS.get(backend) or HIDDEN_BACKENDS.get(backend)
    if solve is None:
        return SolveOutcome(status=SolveStatus.ERROR, backend=backend, message=f"unknown backend {backend!r}")
    return solve(milp, time_limit_s=time_limit_s, gap=gap, node_limit=node_limit, start=start)

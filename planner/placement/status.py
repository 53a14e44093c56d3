"""Solver outcomes as values: a status, the solution, objective, bound, gap and time.

Every backend maps its own status codes onto :class:`SolveStatus`, so nothing
downstream ever ``assert``s on a solver string (an assert lets "Not Solved",
"Undefined" or "Unbounded" through as if they were answers). Only ``optimal`` and
``feasible_within_gap`` are plans to trust as solved. ``node_limit_with_incumbent`` is a
usable plan with a stated gap: the search stopped on its node limit, after the same work
on any machine, so the same inputs give the same plan. ``time_limit_with_incumbent`` is a
usable plan from a search that the wall-clock safety net cut short: it may differ between
runs, and the plan says so. ``infeasible`` leads to a diagnosis; ``error`` carries the
backend's message.

Gap convention (the same for every backend): gap = (objective − bound) / max(|objective|, 1e-9),
with ``bound`` the best proven lower bound on the objective.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np


class SolveStatus(str, Enum):  # noqa: UP042 - StrEnum would change how members print in messages
    OPTIMAL = "optimal"
    FEASIBLE_WITHIN_GAP = "feasible_within_gap"
    NODE_LIMIT_WITH_INCUMBENT = "node_limit_with_incumbent"
    TIME_LIMIT_WITH_INCUMBENT = "time_limit_with_incumbent"
    INFEASIBLE = "infeasible"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE_WITHIN_GAP, SolveStatus.NODE_LIMIT_WITH_INCUMBENT,
                        SolveStatus.TIME_LIMIT_WITH_INCUMBENT)


def relative_gap(objective: float, bound: float) -> float:
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return math.inf
    return max(0.0, (objective - bound) / max(abs(objective), 1e-9))


def classify(objective: float, bound: float, target_gap: float, hit_time_limit: bool = False) -> SolveStatus:
    """Status of a run that has an incumbent, by its proven gap.

    A run that stops above the target gap has always stopped on a limit: the node limit,
    or (``hit_time_limit``) the wall-clock safety net.
    """
    gap = relative_gap(objective, bound)
    if gap <= 1e-6:
        return SolveStatus.OPTIMAL
    if gap <= target_gap + 1e-9:
        return SolveStatus.FEASIBLE_WITHIN_GAP
    return SolveStatus.TIME_LIMIT_WITH_INCUMBENT if hit_time_limit else SolveStatus.NODE_LIMIT_WITH_INCUMBENT


@dataclass
class SolveOutcome:
    """What one backend run returned; ``x`` is None unless ``status.has_solution``."""

    status: SolveStatus
    backend: str
    x: np.ndarray | None = None
    objective: float = math.nan
    bound: float = -math.inf
    solve_time_s: float = 0.0
    build_time_s: float = 0.0
    message: str = ""
    details: dict[str, float | int | str] = field(default_factory=dict)
    hit_time_limit: bool = False
    """The wall-clock safety net stopped this run: its answer may depend on the machine's load."""

    @property
    def gap(self) -> float:
        return relative_gap(self.objective, self.bound)

"""The placement options, declared once: ``planner place``, ``plan`` and ``report`` share them and their defaults."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.placement.limits import DEFAULT_NODE_LIMIT, DEFAULT_TIME_LIMIT_S
from planner.placement.place import DEFAULT_GAP, DEFAULT_PERIODS, DEFAULT_SOLVER

PeriodsOption = Annotated[
    str, typer.Option(help="Planning periods: 'hourly', or 'how:N' for N-hour hour-of-week blocks.")
]
SolverOption = Annotated[str, typer.Option(help="Placement backend: highs, cbc or ortools.")]
NodeLimitOption = Annotated[
    int, typer.Option(help="Branch-and-bound nodes per MILP search. The search stops here or at --gap, after the "
                           "same work on any machine, so the same inputs give the same plan.")
]
TimeLimitOption = Annotated[
    float, typer.Option(help="Wall-clock safety net for each placement, seconds. If it stops a search, the plan "
                             "may differ between runs, and the output and run history say so.")
]
GapOption = Annotated[float, typer.Option(help="Relative optimality gap to stop at, e.g. 0.01.")]

PERIODS = DEFAULT_PERIODS
SOLVER = DEFAULT_SOLVER
NODE_LIMIT = DEFAULT_NODE_LIMIT
TIME_LIMIT_S = DEFAULT_TIME_LIMIT_S
GAP = DEFAULT_GAP

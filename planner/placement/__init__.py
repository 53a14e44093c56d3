"""Placement: how many replicas of which GPU SKU, where, on which purchase tier, at what cost.

``place_plan`` (``place.py``) is the entry point; the shell (``planner.workflows.place``)
reads its inputs and writes its tables. The integer program is written out in ``problem.py``; how it is solved
fast is explained in ``solve.py``; ``check.py`` re-scores any plan independently and
``diagnose.py`` explains infeasible inputs. Data dictionary: ``data/README.md``, section
"placement".
"""

from planner.placement.capacity import ANALYTIC_LABEL, analytic_capacity, validate_capacity
from planner.placement.check import CheckReport, check_plan
from planner.placement.periods import parse_periods
from planner.placement.place import DEFAULT_SOLVER, SOLVERS, place_plan
from planner.placement.result import PlacementResult
from planner.placement.status import SolveStatus

__all__ = [
    "ANALYTIC_LABEL",
    "DEFAULT_SOLVER",
    "SOLVERS",
    "CheckReport",
    "PlacementResult",
    "SolveStatus",
    "analytic_capacity",
    "check_plan",
    "parse_periods",
    "place_plan",
    "validate_capacity",
]

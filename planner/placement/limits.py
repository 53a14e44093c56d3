"""How much a placement search may do: deterministic work limits, and a wall-clock safety net.

The same inputs must give the same plan on any machine and under any load, so no choice
inside a solve depends on the clock:

* every MILP stops at its gap target or after ``node_limit`` branch-and-bound nodes;
* the warm start (``heuristics.py``) prices a bounded number of serving sets and reserved
  vectors and solves a bounded number of them as MILPs, each with a smaller node limit;
* the bounds and baselines (``bounds.py``) use fixed node limits of their own.

A node costs different time on different machines, but it is the same node everywhere:
HiGHS, CBC and SCIP run single-threaded and reach the same node after the same work.

``time_limit_s`` over a whole placement remains as a safety net against a pathological
instance (a root node that never ends). Every solver call gets what is left of it; a call
that the net stops is recorded in :attr:`SafetyNet.hits`, and the plan JSON, the terminal
and the run history then warn that this plan may not reproduce. HiGHS honours the net
only where it checks its interrupt callback, which its MILP root does not do between
every step, so a large block's branch and bound runs in a worker process that is
stopped when the net expires (``solve.py``); the block keeps its warm start. The calls
that make a block's first plan get ``PLAN_GRACE_S`` past the net, so that every block has
one (``heuristics.py``, ``period_relaxation.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from planner.placement.status import SolveOutcome

DEFAULT_NODE_LIMIT = 1000
"""Branch-and-bound nodes per MILP: what bounds a search that has not reached its gap target, and
so what makes a hard instance take minutes rather than hours."""
DEFAULT_TIME_LIMIT_S = 900.0
"""The safety net for one placement: well above what the node limits need on the bundled
scenarios, even on a loaded machine, so that it only ever stops a runaway."""
SHORTEST_CALL_S = 0.05
"""A call started after the net has expired still gets this long (and is recorded as a hit)."""
PLAN_GRACE_S = 60.0
"""How long past the net a block with no plan yet may take to make one (``SafetyNet.with_grace``):
its rounded or period-relaxation plan, a few small solves, seconds on the largest blocks."""


@dataclass
class SafetyNet:
    """The wall-clock safety net of one placement, and which solver calls it stopped.

    ``deadline`` is a ``time.monotonic()`` value, which is comparable between processes
    on one machine, so a worker process can carry a copy and return its hits.
    """

    deadline: float
    hits: list[str] = field(default_factory=list)

    @classmethod
    def starting_now(cls, seconds: float) -> SafetyNet:
        return cls(time.monotonic() + float(seconds))

    def left(self) -> float:
        """Seconds left for the next solver call (never less than ``SHORTEST_CALL_S``)."""
        return max(self.deadline - time.monotonic(), SHORTEST_CALL_S)

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def with_grace(self, seconds: float) -> SafetyNet:
        """This net, sharing its hits, moved to at least ``seconds`` from now: for the few small
        calls that make a plan where none is at hand yet, which the net should not stop."""
        return replace(self, deadline=max(self.deadline, time.monotonic() + float(seconds)))

    def watch(self, outcome: SolveOutcome, what: str) -> SolveOutcome:
        """Record ``what`` when the net stopped this call; return the outcome unchanged."""
        if outcome.hit_time_limit:
            self.hits.append(what)
        return outcome

    def skip(self, what: str) -> bool:
        """True (and recorded) when the net has expired, so optional work is skipped."""
        if self.expired:
            self.hits.append(f"{what} skipped")
            return True
        return False

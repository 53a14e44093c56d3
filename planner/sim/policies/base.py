"""What every scheduling policy declares, and the stable integer codes the compiled loops use.

A policy is data (:class:`PolicySpec`) plus one ``@njit`` key function in its own
module. Compiled event loops cannot call Python objects, so they receive the
policy's integer ``code`` and dispatch through :func:`planner.sim.policies.keys.priority_key`.
The codes are part of the contract between the queue-level and replica-level
engines: never renumber them.

Convention for every key: LARGER = SERVED FIRST. Ties are broken deterministically
by (key descending, arrival ascending, job id ascending).
"""

from __future__ import annotations

from dataclasses import dataclass

FCFS = 0
CMU = 1
WSPT = 2
SRPT = 3
PRIORITY_AGING = 4
DRR_FCFS = 5
DRR_WSPT = 6


@dataclass(frozen=True)
class PolicySpec:
    """A scheduling policy as the simulators see it.

    ``code`` selects the key function inside compiled loops; ``preemptive`` says the
    running job may be displaced by a higher key; ``drr`` says a Deficit Round Robin
    arbiter chooses the class first and ``inner`` names the within-class order.
    """

    name: str
    code: int
    preemptive: bool
    drr: bool
    inner: str | None
    summary: str

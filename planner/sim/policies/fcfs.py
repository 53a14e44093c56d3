"""First come, first served: serve the waiting job that arrived earliest.

Rule: key = −arrival (larger served first), so the oldest job wins.
Reference: Kleinrock, *Queueing Systems* vol. 1 (1975), ch. 5 (M/G/1 FCFS, the
Pollaczek–Khinchine mean wait E[W] = λE[S²]/(2(1−ρ))).

Dynamo's router uses the same rule with a per-class head start:
key = priority_jump − arrival_offset, i.e. a request of a class with
``priority_jump`` = j seconds is ordered as if it had arrived j seconds earlier.
That variant is :func:`dynamo_fcfs_key`, the within-class order of ``drr-fcfs``.
"""

from __future__ import annotations

from numba import njit

from planner.sim.policies.base import FCFS, PolicySpec

SPEC = PolicySpec(
    name="fcfs",
    code=FCFS,
    preemptive=False,
    drr=False,
    inner=None,
    summary="serve the earliest arrival (key -arrival)",
)


@njit(cache=True)
def fcfs_key(arrival: float) -> float:
    """Plain FCFS: the earliest arrival has the largest key."""
    return -arrival


@njit(cache=True)
def dynamo_fcfs_key(priority_jump: float, arrival_offset: float) -> float:
    """Dynamo's ``fcfs`` queue order: priority_jump − arrival_offset (seconds)."""
    return priority_jump - arrival_offset

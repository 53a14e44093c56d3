"""Shortest remaining processing time: always serve the job with the least work left.

Rule: key = −remaining; preemptive-resume at the queue level (an arrival with less
work than the running job's remainder displaces it; the displaced job keeps its
progress). At the replica level preemption is limited Trail-style: a request older
than a fraction c of its predicted size is no longer preempted (its KV cache is big).
Reference: L. Schrage, "A proof of the optimality of the shortest remaining
processing time discipline", Operations Research 16 (1968).
"""

from __future__ import annotations

from numba import njit

from planner.sim.policies.base import SRPT, PolicySpec

SPEC = PolicySpec(
    name="srpt",
    code=SRPT,
    preemptive=True,
    drr=False,
    inner=None,
    summary="preemptively serve the job with the least remaining work",
)


@njit(cache=True)
def srpt_key(remaining: float) -> float:
    """Least remaining work has the largest key."""
    return -remaining

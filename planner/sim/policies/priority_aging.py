"""Priority with aging: a static class priority plus credit that grows with waiting time.

Rule: key = priority_jump_k + aging_rate · (now − arrival_j); non-preemptive.
Aging bounds starvation: a job of priority gap Δ overtakes a newer high-priority job
after waiting Δ / aging_rate. Because every waiting job ages at the same rate the
order between two waiting jobs never changes while they wait, so the key can be
evaluated at any decision time. Reference: the practitioners' guide to admission
control (few tiers plus aging); classic aging in Silberschatz et al., *Operating
System Concepts*, ch. 5.
"""

from __future__ import annotations

from numba import njit

from planner.sim.policies.base import PRIORITY_AGING, PolicySpec

SPEC = PolicySpec(
    name="priority-aging",
    code=PRIORITY_AGING,
    preemptive=False,
    drr=False,
    inner=None,
    summary="serve the largest priority_jump + aging_rate x time waited",
)


@njit(cache=True)
def aging_key(priority_jump: float, aging_rate: float, now: float, arrival: float) -> float:
    """Static priority plus linear aging credit."""
    return priority_jump + aging_rate * (now - arrival)

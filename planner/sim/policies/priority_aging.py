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

from collections.abc import Mapping

from planner.sim.policies.base import EngineEncoding, KeyForm, Param, PolicySpec


def encode(values: Mapping[str, float]) -> EngineEncoding:
    return EngineEncoding(KeyForm(jump=1.0, waited=values["aging_rate"]))


SPEC = PolicySpec(
    name="priority-aging",
    summary="serve the largest priority_jump + aging_rate x time waited",
    encode=encode,
    fifo_within_class=True,  # one class shares its jump, and older jobs have aged more
    params=(Param("aging_rate", 0.1, "priority gained per second of queue wait"),),
)

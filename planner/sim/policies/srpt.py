"""Shortest remaining processing time: always serve the job with the least work left.

Rule: key = −remaining; preemptive-resume at the queue level (an arrival with less
work than the running job's remainder displaces it; the displaced job keeps its
progress). At the replica level preemption is limited Trail-style: a request older
than a fraction c of its predicted size is no longer preempted (its KV cache is big).
Reference: L. Schrage, "A proof of the optimality of the shortest remaining
processing time discipline", Operations Research 16 (1968).
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.sim.policies.base import EngineEncoding, KeyForm, Param, PolicySpec


def encode(values: Mapping[str, float]) -> EngineEncoding:
    return EngineEncoding(KeyForm(size=-1.0), preempt_until=values["trail_c"])


SPEC = PolicySpec(
    name="srpt",
    summary="preemptively serve the job with the least remaining work",
    encode=encode,
    fifo_within_class=False,
    preemptive=True,
    uses_remaining_size=True,
    params=(Param("trail_c", 0.5, "fraction of its predicted output after which a request is no longer preempted",
                  maximum=1.0),),
)

"""First come, first served: serve the waiting job that arrived earliest.

Rule: key = now − arrival (larger served first), so the job that waited longest wins.
Reference: Kleinrock, *Queueing Systems* vol. 1 (1975), ch. 5 (M/G/1 FCFS, the
Pollaczek–Khinchine mean wait E[W] = λE[S²]/(2(1−ρ))).

Dynamo's router uses the same rule with a per-class head start:
key = priority_jump − arrival_offset, i.e. a request of a class with
``priority_jump`` = j seconds is ordered as if it had arrived j seconds earlier.
That variant is the within-class order of ``drr-fcfs`` (:mod:`.drr_fcfs`).
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.sim.policies.base import EngineEncoding, KeyForm, PolicySpec


def encode(values: Mapping[str, float]) -> EngineEncoding:
    return EngineEncoding(KeyForm(waited=1.0))


SPEC = PolicySpec(
    name="fcfs",
    summary="serve the earliest arrival (key now - arrival)",
    encode=encode,
    fifo_within_class=True,
)

"""``drr-fcfs``: Deficit Round Robin over classes, Dynamo's FCFS order inside each class.

The class is chosen by the DRR arbiter (:mod:`.drr`); inside it the key is Dynamo's
``fcfs`` queue order, priority_jump − arrival_offset: a request of a class with
``priority_jump`` = j seconds is ordered as if it had arrived j seconds earlier.
Reference: NVIDIA Dynamo router docs, "Deficit Round Robin Queue Scheduling".
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.sim.policies.base import EngineEncoding, KeyForm, PolicySpec


def encode(values: Mapping[str, float]) -> EngineEncoding:
    return EngineEncoding(KeyForm(jump=1.0, waited=1.0))


SPEC = PolicySpec(
    name="drr-fcfs",
    summary="DRR over classes (quantum in uncached tokens), priority_jump - arrival inside",
    encode=encode,
    fifo_within_class=True,
    drr=True,
    inner="fcfs",
)

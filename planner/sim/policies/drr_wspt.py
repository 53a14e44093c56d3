"""``drr-wspt``: Deficit Round Robin over classes, Dynamo's WSPT order inside each class.

The class is chosen by the DRR arbiter (:mod:`.drr`); inside it the key is Dynamo's
``wspt`` queue order, which uses the uncached prompt length as the size:
(1 + priority_jump) / max(1, isl_tokens).
Reference: NVIDIA Dynamo router docs, "Deficit Round Robin Queue Scheduling".
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.sim.policies.base import EngineEncoding, KeyForm, PolicySpec


def encode(values: Mapping[str, float]) -> EngineEncoding:
    return EngineEncoding(KeyForm(jump=1.0, const=1.0, over_tokens=1.0, over_const=0.0, floor_at=1.0, floor_to=1.0))


SPEC = PolicySpec(
    name="drr-wspt",
    summary="DRR over classes (quantum in uncached tokens), (1 + priority_jump)/isl_tokens inside",
    encode=encode,
    fifo_within_class=False,
    drr=True,
    inner="wspt",
)

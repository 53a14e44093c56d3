"""Weighted shortest processing time (Smith's rule): serve the largest w_j / p̂_j.

Rule: key = w_j / p̂_j, where p̂_j is the true size p_j or a prediction of it
(the queue-level engine can draw p̂ = p·exp(N(0, σ²))). Non-preemptive.
Reference: W. E. Smith, "Various optimizers for single-stage production",
Naval Research Logistics Quarterly 3 (1956). Exactly optimal for 1‖Σ w_j C_j by
pairwise exchange: swapping a mis-ordered pair a, b changes cost by w_a p_b − w_b p_a.

Dynamo's ``wspt`` queue order uses the uncached prompt length as the size:
key = (1 + priority_jump) / isl_tokens; that is the within-class order of ``drr-wspt``
(:mod:`.drr_wspt`).
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.sim.policies.base import EngineEncoding, KeyForm, PolicySpec


def encode(values: Mapping[str, float]) -> EngineEncoding:
    # a non-positive size counts as the smallest positive float
    return EngineEncoding(KeyForm(weight=1.0, over_size=1.0, over_const=0.0, floor_at=0.0, floor_to=1e-300))


SPEC = PolicySpec(
    name="wspt",
    summary="serve the job with the largest weight / (predicted) size (Smith's rule)",
    encode=encode,
    fifo_within_class=False,
)

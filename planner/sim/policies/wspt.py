"""Weighted shortest processing time (Smith's rule): serve the largest w_j / p̂_j.

Rule: key = w_j / p̂_j, where p̂_j is the true size p_j or a prediction of it
(the queue-level engine can draw p̂ = p·exp(N(0, σ²))). Non-preemptive.
Reference: W. E. Smith, "Various optimizers for single-stage production",
Naval Research Logistics Quarterly 3 (1956). Exactly optimal for 1‖Σ w_j C_j by
pairwise exchange: swapping a mis-ordered pair a, b changes cost by w_a p_b − w_b p_a.

Dynamo's ``wspt`` queue order uses the uncached prompt length as the size:
key = (1 + priority_jump) / isl_tokens; that is :func:`dynamo_wspt_key`, the
within-class order of ``drr-wspt``.
"""

from __future__ import annotations

from numba import njit

from planner.sim.policies.base import WSPT, PolicySpec

SPEC = PolicySpec(
    name="wspt",
    code=WSPT,
    preemptive=False,
    drr=False,
    inner=None,
    summary="serve the job with the largest weight / (predicted) size (Smith's rule)",
)


@njit(cache=True)
def wspt_key(weight: float, predicted_size: float) -> float:
    """Smith's ratio w_j / p̂_j; a non-positive size is treated as the smallest positive float."""
    size = predicted_size if predicted_size > 0.0 else 1e-300
    return weight / size


@njit(cache=True)
def dynamo_wspt_key(priority_jump: float, isl_tokens: float) -> float:
    """Dynamo's ``wspt`` order: (1 + priority_jump) / max(1, isl_tokens)."""
    tokens = isl_tokens if isl_tokens > 1.0 else 1.0
    return (1.0 + priority_jump) / tokens

"""The c-mu rule: serve the non-empty class with the largest w_k·μ_k (non-preemptive).

Rule: key = w_k · μ_k, with μ_k = 1/E[S_k]; ties by arrival (FCFS within a class).
Reference: Cox & Smith, *Queues* (1961); the multiclass M/G/1 achievable region is a
polymatroid and this greedy index minimises Σ_k w_k E[L_k] over non-preemptive
work-conserving policies. At the replica level μ_k is the class's effective service
rate from the step-time model and KV occupancy (Li, Wang & Si 2026).
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.sim.policies.base import EngineEncoding, KeyForm, PolicySpec


def encode(values: Mapping[str, float]) -> EngineEncoding:
    return EngineEncoding(KeyForm(index=1.0))


SPEC = PolicySpec(
    name="cmu",
    summary="serve the class with the largest weight x service rate (w_k mu_k)",
    encode=encode,
    fifo_within_class=True,  # every job of a class carries its class's index
)

r"""A replica's steady throughput for one request shape, from its step model: the analytic ceiling.

A replica running continuous batching keeps B requests in flight, each with a prompt of P
tokens and an output of O tokens. Each request reserves its P + O tokens of KV at admission
and admission keeps reserved KV under ``kv_fraction`` of the cache, so

    B = min(max_num_seqs, ⌊kv_fraction · kv_capacity_tokens / (P + O)⌋)

Every step decodes one token for each request in flight; a request's prompt rides along in
chunks of at most c = max_num_batched_tokens − B tokens, each chunk adding its marginal
cost to the step it joins (the dense time it adds, D(B + c) − D(B), plus its prefill
attention; with a chunk cap, vLLM's ``--long-prefill-token-threshold``, chunks are at most that
long). Serving B requests end to end takes O decode steps plus B prompts' marginal cost:

    t_dec     = t_step(B decodes at mean context P + O/2, no prefill)
    m(P)      = Σ_chunks [D(B + c_i) − D(B)] + prefill attention of the P-token prompt
    X         = B / (O · t_dec + B · m(P))              requests per ms

This ignores queueing and latency SLOs (the simulation-based calibration accounts for
those); it is the ceiling the calibration searches under, the μ_k of the c-mu index, the
analytic capacity ``planner place`` uses without a calibrated table, and the yardstick that
prunes engine settings before any simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.profiles.step_model import StepModel, causal_pairs


@dataclass(frozen=True)
class Ceiling:
    """The analytic ceiling of one request shape on one replica."""

    rps: float
    batch: int
    decode_step_ms: float
    prefill_ms_per_request: float


NO_FIT = Ceiling(0.0, 0, math.nan, math.nan)


def concurrent_requests(kv_capacity_tokens: int, max_num_seqs: int, prompt: float, output: float,
                        kv_fraction: float) -> int:
    """B: requests in flight at once, by the batch cap and by the KV the admission reserves."""
    return min(int(max_num_seqs), math.floor(kv_fraction * kv_capacity_tokens / (prompt + output)))


def prefill_marginal_ms(step: StepModel, batch: int, prompt: float, token_budget: int, prefill_chunk_cap: int = 0
                        ) -> float:
    """m(P): what one prompt adds to the steps that carry it, in chunks of the budget left by B decodes
    (and of at most ``prefill_chunk_cap`` tokens, when set)."""
    chunk_cap = max(1, token_budget - batch)
    if prefill_chunk_cap > 0:
        chunk_cap = min(chunk_cap, prefill_chunk_cap)
    base = step.dense(batch)
    total, done = 0.0, 0.0
    while done < prompt:
        chunk = min(float(chunk_cap), prompt - done)
        total += step.dense(batch + chunk) - base
        total += step.prefill_attn_ms_fixed + step.prefill_attn_ms_per_token * chunk
        total += step.prefill_attn_ms_per_pair * causal_pairs(chunk, done)
        done += chunk
    return total


def ceiling(step: StepModel, *, kv_capacity_tokens: int, max_num_seqs: int, max_num_batched_tokens: int,
            prompt: float, output: float, kv_fraction: float, prefill_chunk_cap: int = 0) -> Ceiling:
    """The ceiling X of the module docstring; :data:`NO_FIT` when not one request fits in KV."""
    batch = concurrent_requests(kv_capacity_tokens, max_num_seqs, prompt, output, kv_fraction)
    if batch < 1 or output <= 0:
        return NO_FIT
    decode = step.uniform_step_ms(batch, prompt + output / 2.0, 0)
    prefill = prefill_marginal_ms(step, batch, prompt, max_num_batched_tokens, prefill_chunk_cap)
    return Ceiling(1000.0 * batch / (output * decode + batch * prefill), batch, decode, prefill)

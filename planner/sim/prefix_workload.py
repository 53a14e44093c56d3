"""Requests that carry their prompt's KV blocks, for the prefix cache (:mod:`planner.sim.replica.prefix`).

A request's blocks are content ids, one per ``block_tokens`` tokens from the start of its
prompt (:class:`~planner.sim.workload.RequestSample`): two requests whose lists begin with the
same ids share that prefix, and a block that appears in no other request gets a fresh id.
Only full blocks are listed. Three sources, each pure and seeded (numpy Generators):

* :func:`trace_sample` — a trace's own hash lists, replayed with its own arrival times
  (optionally time-scaled to a mean rate), e.g. Mooncake's conversation trace (JSONL with
  ``timestamp`` in ms, ``input_length``, ``output_length`` and ``hash_ids`` of 512-token
  blocks, chained so that an id names its whole prefix). A prompt lists its first
  ⌊input_length / 512⌋ ids: Mooncake's last id is a partial block's.
* :class:`SharedPrompt` — a declared system prompt of N tokens in K variants: each sampled
  request draws a variant uniformly, and its first min(⌊N/B⌋, ⌊prompt/B⌋) blocks are that
  variant's; the rest of its full blocks are its own. Lengths are unchanged: a measured
  prompt length already includes the system prompt. A :class:`~planner.sim.workload.PrefixLaw`,
  so ``PoolConfig.prefix`` applies it to every replication.

Multi-turn sessions are a class's declared reuse: :func:`planner.sim.class_reuse.session_sample`.

As a pool's request source (``PoolConfig.source``, drawn for each replication at the pool's
class rates, so a calibration's bisection replays them at each rate it tries): :class:`TraceReplay`.

:func:`ideal_cached_tokens` is the reuse a cache that forgets nothing would find: request j,
in arrival order, finds its longest leading run of blocks seen in any earlier request, at
most ⌊(prompt − 1)/B⌋ blocks (one token is always computed, as in vLLM).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.errors import InputError
from planner.sim.class_reuse import stream_blocks, with_system_prompt
from planner.sim.workload import ClassWorkload, RequestSample

MOONCAKE_BLOCK_TOKENS = 512
"""Mooncake's traces hash prompts in blocks of 512 tokens."""


def _predicted(output: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Noisy output-length predictions p̂ = p·exp(N(0, σ²)), as :func:`planner.sim.workload.sample_requests`."""
    return output * np.exp(sigma * rng.standard_normal(output.size))


def _csr(lists: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of a list of int arrays."""
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    values = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists]) if lists else np.zeros(0, np.int64)
    return ptr, values.astype(np.int64)


def trace_sample(timestamp_ms: np.ndarray, input_length: np.ndarray, output_length: np.ndarray,
                 hash_ids: Sequence[Sequence[int]], seed: np.random.SeedSequence, *, rate_rps: float | None = None,
                 block_tokens: int = MOONCAKE_BLOCK_TOKENS, prediction_sigma: float = 0.0,
                 route_draws: int = 2) -> RequestSample:
    """A trace replayed once, in its order, all requests of class 0; with ``rate_rps`` its times are
    scaled so the mean rate (n requests over the span plus one mean gap) is that rate."""
    t = (np.asarray(timestamp_ms, dtype=np.float64) - float(np.min(timestamp_ms))) / 1000.0
    order = np.argsort(t, kind="stable")
    n = t.size
    if rate_rps is not None:
        span = float(t.max()) * n / max(n - 1, 1)
        if not (rate_rps > 0 and span > 0):
            raise InputError(f"cannot scale a trace spanning {span:g} s to {rate_rps!r} req/s", where="trace",
                             fix="give a positive rate and a trace with distinct times")
        t = t * (n / span) / rate_rps
    prompt = np.asarray(input_length, dtype=np.int64)[order]
    output = np.maximum(np.asarray(output_length, dtype=np.int64)[order], 1)
    lists = [np.asarray(hash_ids[i], dtype=np.int64)[: int(prompt[k]) // block_tokens]
             for k, i in enumerate(order)]
    ptr, ids = _csr(lists)
    streams = seed.spawn(2)
    predicted = _predicted(output.astype(np.float64), prediction_sigma, np.random.default_rng(streams[0]))
    route_u = np.random.default_rng(streams[1]).random((n, max(route_draws, 1)))
    return RequestSample(t[order], np.zeros(n, dtype=np.int64), prompt, output, predicted, route_u,
                         block_ptr=ptr, block_ids=ids, block_tokens=int(block_tokens))


@dataclass(frozen=True)
class SharedPrompt:
    """A system prompt of ``system_tokens`` tokens in ``variants`` variants (module docstring)."""

    system_tokens: int
    variants: int = 1
    block_tokens: int = 16

    def attach(self, sample: RequestSample, seed: np.random.SeedSequence) -> RequestSample:
        """``sample`` with its blocks: a seeded variant per request, fresh ids past the system prompt (the
        block layout of a class's declared system prompt, :mod:`planner.sim.class_reuse`)."""
        if self.variants < 1 or self.block_tokens < 1 or self.system_tokens < 0:
            raise InputError(f"bad shared prompt {self!r}", where="prefix workload",
                             fix="give variants >= 1, block_tokens >= 1 and system_tokens >= 0")
        full = np.asarray(sample.prompt_tokens, dtype=np.int64) // self.block_tokens
        ptr, ids = stream_blocks(full, np.arange(sample.n))
        alone = np.full(sample.n, -1, dtype=np.int64)
        ids = with_system_prompt(ptr, ids, alone, self.system_tokens, self.variants, self.block_tokens,
                                 np.random.default_rng(seed))
        return replace(sample, block_ptr=ptr, block_ids=ids, block_tokens=self.block_tokens)


def ideal_cached_tokens(sample: RequestSample) -> np.ndarray:
    """Per request, the tokens a cache that forgets nothing would serve (module docstring)."""
    if not sample.has_prefix:
        return np.zeros(sample.n, dtype=np.int64)
    assert sample.block_ptr is not None and sample.block_ids is not None
    size = sample.block_tokens
    seen: set[int] = set()
    out = np.zeros(sample.n, dtype=np.int64)
    for j in range(sample.n):
        blocks = sample.block_ids[sample.block_ptr[j]:sample.block_ptr[j + 1]]
        limit = min(blocks.size, (int(sample.prompt_tokens[j]) - 1) // size)
        h = 0
        while h < limit and int(blocks[h]) in seen:
            h += 1
        out[j] = h * size
        seen.update(int(b) for b in blocks)
    return out


def _classes(rates_rps: np.ndarray, n: int, seed: np.random.SeedSequence) -> np.ndarray:
    """A class per request, drawn with probability λ_k / Σλ (one class: all 0)."""
    rates = np.asarray(rates_rps, dtype=np.float64)
    if rates.size <= 1:
        return np.zeros(n, dtype=np.int64)
    return np.random.default_rng(seed).choice(rates.size, size=n, p=rates / rates.sum()).astype(np.int64)


@dataclass(frozen=True, eq=False)
class TraceReplay:
    """A trace as a pool's request source (``PoolConfig.source``): replayed at the pool's total rate
    Σ λ_k, each request's class drawn with probability λ_k / Σλ; a trace shorter than the run is
    repeated end to end, each repetition with ids of its own (a repetition shares no block with the
    one before: reuse across the seam would be an artefact of the loop)."""

    timestamp_ms: np.ndarray
    input_length: np.ndarray
    output_length: np.ndarray
    hash_ids: tuple[tuple[int, ...], ...]
    block_tokens: int = MOONCAKE_BLOCK_TOKENS

    @classmethod
    def from_records(cls, timestamp_ms: Sequence[float], input_length: Sequence[int], output_length: Sequence[int],
                     hash_ids: Sequence[Sequence[int]], block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> TraceReplay:
        """From a trace's columns (e.g. the Mooncake JSONL's, as read by the caller)."""
        return cls(np.asarray(timestamp_ms, dtype=np.float64), np.asarray(input_length, dtype=np.int64),
                   np.asarray(output_length, dtype=np.int64), tuple(tuple(int(b) for b in h) for h in hash_ids),
                   int(block_tokens))

    def draw(self, rates_rps: np.ndarray, workloads: Sequence[ClassWorkload], duration_s: float,
             seed: np.random.SeedSequence, *, prediction_sigma: float = 0.0, route_draws: int = 2) -> RequestSample:
        """The requests arriving before ``duration_s`` (``workloads`` unused: the trace has its lengths)."""
        streams = seed.spawn(3)
        one = trace_sample(self.timestamp_ms, self.input_length, self.output_length, self.hash_ids, streams[0],
                           rate_rps=float(np.sum(rates_rps)), block_tokens=self.block_tokens,
                           prediction_sigma=prediction_sigma)
        assert one.block_ptr is not None and one.block_ids is not None
        span = float(one.arrival_s[-1]) * one.n / max(one.n - 1, 1)
        repeats = max(1, int(np.ceil(duration_s / span)))
        offset = int(one.block_ids.max(initial=-1)) + 1
        arrival = np.concatenate([one.arrival_s + k * span for k in range(repeats)])
        keep = int(np.searchsorted(arrival, duration_s, side="left"))
        ptr = np.zeros(keep + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.tile(np.diff(one.block_ptr), repeats)[:keep])
        ids = np.concatenate([one.block_ids + k * offset for k in range(repeats)])[:int(ptr[-1])]
        route_u = np.random.default_rng(streams[2]).random((keep, max(route_draws, 1)))
        return RequestSample(arrival[:keep], _classes(rates_rps, keep, streams[1]),
                             np.tile(one.prompt_tokens, repeats)[:keep], np.tile(one.output_tokens, repeats)[:keep],
                             np.tile(one.predicted_output_tokens, repeats)[:keep], route_u,
                             block_ptr=ptr, block_ids=ids, block_tokens=self.block_tokens)

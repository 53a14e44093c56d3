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
* :func:`session_sample` — multi-turn conversations: sessions start as a Poisson process,
  each with ``turns`` turns; turn t + 1 arrives an exponential think time (mean ``think_s``)
  after turn t *arrives* (the sample is drawn before the simulation, so turn t's end is not
  known: choose a think time longer than a turn's response time, or the next turn comes
  while the previous one still runs). Turn t + 1's prompt is turn t's prompt + its output +
  new user tokens, so a session is one token stream and each turn lists the stream's full
  blocks up to the end of its own output: turn t + 1 starts with every block of turn t.

As a pool's request source (``PoolConfig.source``, drawn for each replication at the pool's
class rates, so a calibration's bisection replays them at each rate it tries):
:class:`TraceReplay` and :class:`SessionTraffic`.

:func:`ideal_cached_tokens` is the reuse a cache that forgets nothing would find: request j,
in arrival order, finds its longest leading run of blocks seen in any earlier request, at
most ⌊(prompt − 1)/B⌋ blocks (one token is always computed, as in vLLM).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.errors import InputError
from planner.sim.workload import ClassWorkload, LengthLaw, RequestSample

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
        """``sample`` with its blocks: a seeded variant per request, fresh ids past the system prompt."""
        if self.variants < 1 or self.block_tokens < 1 or self.system_tokens < 0:
            raise InputError(f"bad shared prompt {self!r}", where="prefix workload",
                             fix="give variants >= 1, block_tokens >= 1 and system_tokens >= 0")
        per_variant = self.system_tokens // self.block_tokens
        variant = np.random.default_rng(seed).integers(0, self.variants, size=sample.n)
        full = np.asarray(sample.prompt_tokens, dtype=np.int64) // self.block_tokens
        shared = np.minimum(full, per_variant)
        ptr = np.zeros(sample.n + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(full)
        ids = np.empty(int(ptr[-1]), dtype=np.int64)
        fresh = self.variants * per_variant  # ids below are the variants' blocks
        for j in range(sample.n):
            a, s, f = int(ptr[j]), int(shared[j]), int(full[j])
            ids[a:a + s] = variant[j] * per_variant + np.arange(s)
            ids[a + s:a + f] = fresh + np.arange(f - s)
            fresh += f - s
        return replace(sample, block_ptr=ptr, block_ids=ids, block_tokens=self.block_tokens)


@dataclass(frozen=True)
class _Turns:
    """The turns of every session before they are sorted by arrival."""

    arrival: list[float]
    prompt: list[int]
    output: list[int]
    session: list[int]
    blocks: list[np.ndarray]


def _session_turns(starts: np.ndarray, turns: int, think_s: float, workload: ClassWorkload, user: LengthLaw,
                   block_tokens: int, max_prompt_tokens: int, rng: np.random.Generator) -> _Turns:
    """Each session's turns in order: one token stream, one id range of its own per session."""
    out = _Turns([], [], [], [], [])
    base = 0
    for s, start in enumerate(starts):
        first = int(workload.prompt.sample_from_uniform(rng.random(1))[0])
        outputs = workload.output.sample_from_uniform(rng.random(turns))
        users = user.sample_from_uniform(rng.random(turns))
        gaps = rng.exponential(think_s, size=turns)
        t, prompt = float(start), first
        for k in range(turns):
            if k > 0:
                t += float(gaps[k])
                prompt = prompt + int(outputs[k - 1]) + int(users[k])
            if prompt > max_prompt_tokens:
                break
            n_blocks = (prompt + int(outputs[k])) // block_tokens
            out.arrival.append(t)
            out.prompt.append(prompt)
            out.output.append(int(outputs[k]))
            out.session.append(s)
            out.blocks.append(base + np.arange(n_blocks, dtype=np.int64))
        base += (prompt + int(outputs[-1])) // block_tokens + 1
    return out


def session_sample(session_rate_rps: float, duration_s: float, workload: ClassWorkload,
                   seed: np.random.SeedSequence, *, turns: int = 4, think_s: float = 30.0,
                   user_tokens: LengthLaw | None = None, block_tokens: int = 16,
                   max_prompt_tokens: int = 130_048, prediction_sigma: float = 0.0,
                   route_draws: int = 2) -> RequestSample:
    """Multi-turn sessions (module docstring), class 0, turns arriving before ``duration_s``.

    The first turn's prompt and every output come from ``workload``'s laws; each later turn adds
    ``user_tokens`` (default: the prompt law) new tokens; a session stops before a prompt would
    exceed ``max_prompt_tokens``.
    """
    if turns < 1 or think_s < 0 or block_tokens < 1:
        raise InputError("a session needs turns >= 1, think_s >= 0 and block_tokens >= 1", where="sessions",
                         fix="e.g. turns = 4, think_s = 30")
    streams = seed.spawn(4)
    rng = np.random.default_rng(streams[0])
    n_sessions = rng.poisson(session_rate_rps * duration_s) if session_rate_rps > 0 else 0
    starts = np.sort(rng.uniform(0.0, duration_s, size=n_sessions))
    turn = _session_turns(starts, turns, think_s, workload, user_tokens or workload.prompt, block_tokens,
                          max_prompt_tokens, np.random.default_rng(streams[1]))
    arrival = np.asarray(turn.arrival, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    order = order[arrival[order] < duration_s]
    n = order.size
    output = np.asarray(turn.output, dtype=np.int64)[order]
    ptr, ids = _csr([turn.blocks[i] for i in order])
    predicted = _predicted(output.astype(np.float64), prediction_sigma, np.random.default_rng(streams[2]))
    route_u = np.random.default_rng(streams[3]).random((n, max(route_draws, 1)))
    return RequestSample(arrival[order], np.zeros(n, dtype=np.int64), np.asarray(turn.prompt, dtype=np.int64)[order],
                         output, predicted, route_u, block_ptr=ptr, block_ids=ids, block_tokens=int(block_tokens),
                         session=np.asarray(turn.session, dtype=np.int64)[order])


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


@dataclass(frozen=True)
class SessionTraffic:
    """Multi-turn sessions as a pool's request source (``PoolConfig.source``): class k's sessions start at
    λ_k / ``turns`` per second with its own length laws, so its requests arrive at about λ_k
    (:func:`session_sample`; session ids are distinct across classes)."""

    turns: int = 4
    think_s: float = 30.0
    block_tokens: int = 16

    def draw(self, rates_rps: np.ndarray, workloads: Sequence[ClassWorkload], duration_s: float,
             seed: np.random.SeedSequence, *, prediction_sigma: float = 0.0, route_draws: int = 2) -> RequestSample:
        parts = []
        for k, (rate, law, child) in enumerate(zip(rates_rps, workloads, seed.spawn(len(workloads)), strict=True)):
            part = session_sample(float(rate) / self.turns, duration_s, law, child, turns=self.turns,
                                  think_s=self.think_s, block_tokens=self.block_tokens,
                                  prediction_sigma=prediction_sigma, route_draws=route_draws)
            parts.append(replace(part, cls=np.full(part.n, k, dtype=np.int64)))
        return _merge(parts)


def _merge(parts: list[RequestSample]) -> RequestSample:
    """Samples with disjoint block ids and sessions (each part's shifted past the ones before), in arrival order."""
    id_base = session_base = 0
    sessions: list[np.ndarray] = []
    lists: list[np.ndarray] = []
    for part in parts:
        assert part.block_ptr is not None and part.block_ids is not None and part.session is not None
        lists.extend(part.block_ids[part.block_ptr[j]:part.block_ptr[j + 1]] + id_base for j in range(part.n))
        sessions.append(part.session + session_base)
        id_base += int(part.block_ids.max(initial=-1)) + 1
        session_base += int(part.session.max(initial=-1)) + 1
    arrival = np.concatenate([p.arrival_s for p in parts])
    order = np.argsort(arrival, kind="stable")
    ptr, flat = _csr([lists[i] for i in order])

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])[order]

    return RequestSample(arrival[order], cat("cls"), cat("prompt_tokens"), cat("output_tokens"),
                         cat("predicted_output_tokens"), cat("route_u"), block_ptr=ptr, block_ids=flat,
                         block_tokens=parts[0].block_tokens, session=np.concatenate(sessions)[order])

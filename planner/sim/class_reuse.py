"""A pool's requests with each class's declared prefix reuse: the prefix law the scenario's workloads give a pool.

Each class k of a pool may declare (:class:`ClassReuse`, from ``reuse = { ... }`` of the
scenario, :mod:`planner.workloads`):

* **multi-turn sessions** of T turns: the class's requests are replaced by conversations
  (:func:`session_sample`) starting as a Poisson process at
  λ_k / T sessions per second, so the class keeps about its rate λ_k of requests (fewer
  when a conversation outgrows the class's prompt cap and ends early); each turn's prompt is
  the previous turn's prompt and answer plus new user tokens, so it starts with every block
  of the last;
* **a shared system prompt** of N tokens in K variants: every request (every conversation,
  with sessions) draws a variant uniformly, and the first min(⌊N/B⌋, its blocks) of its
  blocks are that variant's.

A class that declares neither keeps its sampled requests with no block list (the cache
never serves or holds them), so the cache costs nothing where there is no reuse. Block ids
and session ids of different classes are disjoint. Requests are merged in arrival order,
ties by class index then by order within the class (a stable sort). The draws come from
the pool sample's ``prefix`` stream (one child per class), so the other classes' requests
are exactly those of :func:`planner.sim.workload.sample_requests`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.errors import InputError
from planner.sim.dense_ids import dense_ids
from planner.sim.workload import ClassWorkload, LengthLaw, RequestSample, poisson_arrivals

ENGINE_BLOCK_TOKENS = {"vllm": 16, "sglang": 16, "trtllm": 32}
"""KV block size in tokens per engine, the unit the prefix cache keeps: vLLM's default ``--block-size`` (16),
TensorRT-LLM's default ``tokens_per_block`` (32). SGLang's radix cache matches at token granularity (page size 1);
it is kept here in 16-token blocks, so a cached prefix is rounded down by at most 15 tokens."""


@dataclass(frozen=True)
class ClassReuse:
    """One class's declared reuse: ``system_tokens`` in ``variants`` (0: none), ``turns`` per session (0: none);
    a conversation ends before a prompt would pass ``max_prompt_tokens``."""

    max_prompt_tokens: int
    system_tokens: int = 0
    variants: int = 1
    turns: int = 0
    think_s: float = 30.0
    user_tokens: LengthLaw | None = None

    def describe(self) -> str:
        parts = []
        if self.system_tokens:
            parts.append(f"system prompt {self.system_tokens} tokens x {self.variants} variant(s)")
        if self.turns:
            parts.append(f"sessions of {self.turns} turns, think time {self.think_s:g} s")
        return "; ".join(parts) or "none"


@dataclass(frozen=True)
class _Part:
    """The requests of one class with their blocks in CSR form (``ptr``, ``ids``) and session ids (−1: none)."""

    sample: RequestSample
    ptr: np.ndarray
    ids: np.ndarray
    session: np.ndarray


@dataclass(frozen=True)
class PoolReuse:
    """The :class:`~planner.sim.workload.PrefixLaw` of a pool whose classes declare reuse (module docstring).

    ``classes[k]`` is class k's reuse (None: none), ``workloads[k]`` its length laws, ``rates_rps[k]`` its
    rate, ``max_prompt_tokens[k]`` the longest prompt it takes; ``block_tokens`` is the engine's block size.
    """

    classes: tuple[ClassReuse | None, ...]
    workloads: tuple[ClassWorkload, ...]
    rates_rps: tuple[float, ...]
    max_prompt_tokens: tuple[int, ...]
    duration_s: float
    block_tokens: int
    prediction_sigma: float = 0.0

    def attach(self, sample: RequestSample, seed: np.random.SeedSequence) -> RequestSample:
        children = seed.spawn(len(self.classes))
        parts = [self._part(sample, k, children[k]) for k in range(len(self.classes))]
        return _merged(parts, self.block_tokens)

    def _part(self, sample: RequestSample, k: int, seed: np.random.SeedSequence) -> _Part:
        reuse = self.classes[k]
        streams = seed.spawn(2)
        if reuse is not None and reuse.turns > 0:
            talk = session_sample(self.rates_rps[k], self.duration_s, self.workloads[k], reuse, self.block_tokens,
                                  streams[0], prediction_sigma=self.prediction_sigma,
                                  route_draws=sample.route_u.shape[1])
            assert talk.block_ptr is not None and talk.block_ids is not None and talk.session is not None
            own, ptr, ids, session = replace(talk, cls=np.full(talk.n, k, dtype=np.int64)), talk.block_ptr, \
                talk.block_ids, talk.session
        else:
            own = _subset(sample, np.flatnonzero(sample.cls == k))
            has = reuse is not None and reuse.system_tokens > 0
            sizes = own.prompt_tokens // self.block_tokens if has else np.zeros(own.n, dtype=np.int64)
            session = np.full(own.n, -1, dtype=np.int64)
            ptr, ids = stream_blocks(sizes, np.arange(own.n))  # each request its own stream: fresh ids
        if reuse is not None and reuse.system_tokens > 0:
            ids = with_system_prompt(ptr, ids, session, reuse.system_tokens, reuse.variants, self.block_tokens,
                                     np.random.default_rng(streams[1]))
        return _Part(own, ptr, ids, session)


def session_sample(rate_rps: float, duration_s: float, workload: ClassWorkload, reuse: ClassReuse,
                   block_tokens: int, seed: np.random.SeedSequence, *, prediction_sigma: float = 0.0,
                   route_draws: int = 2) -> RequestSample:
    """One class's conversations at about ``rate_rps`` requests per second, vectorised: class 0, in arrival order,
    each turn with its blocks and its session id.

    Sessions start as a Poisson process at λ / T on [0, D) (exponential gaps of one stream scaled by the rate,
    and every session's draws taken in session order, so a higher rate adds sessions and keeps the others:
    common random numbers for calibration's bisection); turn t + 1 arrives an exponential think time after
    turn t *arrives* (the sample is drawn before the simulation: a think time shorter than a turn's response
    time sends the next turn while the last still runs); P_1 ~ the prompt law, P_{t+1} = P_t + O_t + U_{t+1}
    (U: ``reuse.user_tokens``, else the prompt law); a session ends before a prompt would pass
    ``reuse.max_prompt_tokens``. A turn lists its session's full blocks up to the end of its own output, so
    turn t + 1 starts with every block of turn t. The system prompt, if any, is the caller's
    (:class:`PoolReuse` draws it per session).
    """
    turns = reuse.turns
    if turns < 1 or reuse.think_s < 0 or block_tokens < 1:
        raise InputError("a session needs turns >= 1, think_s >= 0 and block_tokens >= 1", where="sessions",
                         fix="e.g. turns = 4, think_s = 30")
    rng = [np.random.default_rng(s) for s in seed.spawn(6)]
    starts = poisson_arrivals(rate_rps / turns, duration_s, rng[0])
    n = starts.size
    first = workload.prompt.sample_from_uniform(rng[1].random(n))
    output = np.maximum(workload.output.sample_from_uniform(rng[2].random(n * turns)).reshape(n, turns), 1)
    user = (reuse.user_tokens or workload.prompt).sample_from_uniform(rng[3].random(n * turns)).reshape(n, turns)
    gaps = rng[4].exponential(reuse.think_s, size=(n, turns)) if reuse.think_s > 0 else np.zeros((n, turns))
    gaps[:, 0] = 0.0
    grow = np.concatenate([first[:, None], output[:, :-1] + user[:, 1:]], axis=1)
    prompt = np.cumsum(grow, axis=1)
    arrival = starts[:, None] + np.cumsum(gaps, axis=1)
    keep = (np.cumprod(prompt <= reuse.max_prompt_tokens, axis=1) > 0) & (arrival < duration_s)
    session = np.broadcast_to(np.arange(n)[:, None], (n, turns))[keep]
    arrival, prompt, output = arrival[keep], prompt[keep], output[keep]
    order = np.argsort(arrival, kind="stable")
    predicted = output * np.exp(prediction_sigma * rng[5].standard_normal(output.size))
    route_u = rng[5].random((order.size, max(route_draws, 1)))
    session = session[order].astype(np.int64)
    ptr, ids = stream_blocks(((prompt[order] + output[order]) // block_tokens).astype(np.int64), session)
    return RequestSample(arrival[order], np.zeros(order.size, dtype=np.int64), prompt[order].astype(np.int64),
                         output[order].astype(np.int64), predicted[order], route_u, ptr, ids, int(block_tokens),
                         session)


def stream_blocks(sizes: np.ndarray, stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR blocks: request j lists the first ``sizes[j]`` blocks of its stream (``stream[j]``); every stream has
    ids of its own, so requests of one stream share leading runs and no others do."""
    ptr = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    if not sizes.size:
        return ptr, np.zeros(0, dtype=np.int64)
    from planner.sim.replica.block_lists import stream_ids  # compiled: only a simulation pays numba's import

    n_streams, inverse = dense_ids(stream)
    longest = np.zeros(n_streams, dtype=np.int64)
    np.maximum.at(longest, inverse, sizes)
    base = np.concatenate([[0], np.cumsum(longest)[:-1]])
    return ptr, stream_ids(ptr, base[inverse])


def with_system_prompt(ptr: np.ndarray, ids: np.ndarray, session: np.ndarray, system_tokens: int, variants: int,
                       block_tokens: int, rng: np.random.Generator) -> np.ndarray:
    """The first ⌊N/B⌋ blocks of each request replaced by its variant's (one variant per session, −1: none); the
    variants' ids come first, the others shift past them."""
    per_variant = system_tokens // block_tokens
    units = np.where(session >= 0, session, -1 - np.arange(session.size))  # a session, or the request alone
    from planner.sim.replica.block_lists import shared_prefix_ids  # compiled: only a simulation pays numba's import

    n_units, inverse = dense_ids(units)
    variant = rng.integers(0, variants, size=n_units)[inverse]
    return shared_prefix_ids(np.asarray(ptr, dtype=np.int64), np.asarray(ids, dtype=np.int64),
                             variant.astype(np.int64), int(per_variant), int(variants))


def _subset(sample: RequestSample, idx: np.ndarray) -> RequestSample:
    return RequestSample(sample.arrival_s[idx], sample.cls[idx], sample.prompt_tokens[idx],
                         sample.output_tokens[idx], sample.predicted_output_tokens[idx], sample.route_u[idx])


def _merged(parts: list[_Part], block_tokens: int) -> RequestSample:
    """Every class's requests in one sample, arrival order (stable: class index, then order within the class);
    block ids and session ids offset so that different classes never share one."""
    from planner.sim.replica.block_lists import gathered  # compiled: only a simulation pays numba's import

    block_base, session_base = 0, 0
    ids, sessions = [], []
    for part in parts:
        ids.append(part.ids + block_base)
        block_base += 1 + int(part.ids.max(initial=-1))
        sessions.append(np.where(part.session >= 0, part.session + session_base, -1))
        session_base += 1 + int(part.session.max(initial=-1))
    sizes = np.concatenate([np.diff(p.ptr) for p in parts])
    starts = np.concatenate([p.ptr[:-1] + offset for p, offset in
                             zip(parts, np.cumsum([0] + [int(p.ptr[-1]) for p in parts[:-1]]), strict=True)])
    arrival = np.concatenate([p.sample.arrival_s for p in parts])
    order = np.argsort(arrival, kind="stable")
    flat = np.concatenate(ids).astype(np.int64) if ids else np.zeros(0, np.int64)
    ptr, merged = gathered(flat, starts[order].astype(np.int64), sizes[order].astype(np.int64))

    def stacked(name: str) -> np.ndarray:
        return np.concatenate([getattr(p.sample, name) for p in parts])[order]

    return RequestSample(arrival[order], stacked("cls"), stacked("prompt_tokens"), stacked("output_tokens"),
                         stacked("predicted_output_tokens"), stacked("route_u"), ptr, merged,
                         block_tokens, np.concatenate(sessions)[order])

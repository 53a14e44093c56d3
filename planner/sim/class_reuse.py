"""A pool's requests with each class's declared prefix reuse: the prefix law the scenario's workloads give a pool.

Each class k of a pool may declare (:class:`ClassReuse`, from ``reuse = { ... }`` of the
scenario, :mod:`planner.workloads`):

* **multi-turn sessions** of T turns: the class's requests are replaced by conversations
  (:func:`planner.sim.prefix_workload.session_sample`) starting as a Poisson process at
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

from dataclasses import dataclass

import numpy as np

from planner.sim.prefix_workload import session_sample
from planner.sim.workload import ClassWorkload, LengthLaw, RequestSample

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
    """The requests of one class, with their block lists (``lists[i]``) and session ids (−1: none)."""

    sample: RequestSample
    lists: list[np.ndarray]
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
        return _merged(parts, sample.route_u.shape[1], self.block_tokens)

    def _part(self, sample: RequestSample, k: int, seed: np.random.SeedSequence) -> _Part:
        reuse = self.classes[k]
        streams = seed.spawn(2)
        if reuse is not None and reuse.turns > 0:
            own = session_sample(self.rates_rps[k] / reuse.turns, self.duration_s, self.workloads[k], streams[0],
                                 turns=reuse.turns, think_s=reuse.think_s, user_tokens=reuse.user_tokens,
                                 block_tokens=self.block_tokens, max_prompt_tokens=self.max_prompt_tokens[k],
                                 prediction_sigma=self.prediction_sigma, route_draws=sample.route_u.shape[1])
            ptr, ids, session = own.block_ptr, own.block_ids, own.session
            assert ptr is not None and ids is not None and session is not None
            own = _with_class(own, k)
            lists = [ids[ptr[i]:ptr[i + 1]] for i in range(own.n)]
            session = np.asarray(session, dtype=np.int64)
        else:
            own = _subset(sample, np.flatnonzero(sample.cls == k))
            full = np.asarray(own.prompt_tokens, dtype=np.int64) // self.block_tokens
            has = reuse is not None and reuse.system_tokens > 0
            lists = [np.arange(int(f), dtype=np.int64) if has else np.zeros(0, np.int64) for f in full]
            lists = _fresh(lists)
            session = np.full(own.n, -1, dtype=np.int64)
        if reuse is not None and reuse.system_tokens > 0:
            lists = _with_system_prompt(lists, session, reuse, self.block_tokens, np.random.default_rng(streams[1]))
        return _Part(own, lists, session)


def _fresh(lists: list[np.ndarray]) -> list[np.ndarray]:
    """Each request's blocks renumbered to ids no other request has."""
    out, base = [], 0
    for blocks in lists:
        out.append(base + np.arange(blocks.size, dtype=np.int64))
        base += blocks.size
    return out


def _with_system_prompt(lists: list[np.ndarray], session: np.ndarray, reuse: ClassReuse, block_tokens: int,
                        rng: np.random.Generator) -> list[np.ndarray]:
    """The first ⌊N/B⌋ blocks of each request replaced by its variant's (one variant per session, if any)."""
    per_variant = reuse.system_tokens // block_tokens
    units = np.where(session >= 0, session, -1 - np.arange(session.size))  # a session, or the request alone
    keys, inverse = np.unique(units, return_inverse=True)
    variant = rng.integers(0, reuse.variants, size=keys.size)[inverse.ravel()]
    shift = reuse.variants * per_variant  # the variants' ids come first
    out = []
    for blocks, v in zip(lists, variant, strict=True):
        moved = blocks + shift
        m = min(per_variant, moved.size)
        moved[:m] = int(v) * per_variant + np.arange(m, dtype=np.int64)
        out.append(moved)
    return out


def _subset(sample: RequestSample, idx: np.ndarray) -> RequestSample:
    return RequestSample(sample.arrival_s[idx], sample.cls[idx], sample.prompt_tokens[idx],
                         sample.output_tokens[idx], sample.predicted_output_tokens[idx], sample.route_u[idx])


def _with_class(sample: RequestSample, k: int) -> RequestSample:
    return RequestSample(sample.arrival_s, np.full(sample.n, k, dtype=np.int64), sample.prompt_tokens,
                         sample.output_tokens, sample.predicted_output_tokens, sample.route_u,
                         sample.block_ptr, sample.block_ids, sample.block_tokens, sample.session)


def _merged(parts: list[_Part], route_draws: int, block_tokens: int) -> RequestSample:
    """Every class's requests in one sample, arrival order (stable: class index, then order within the class);
    block ids and session ids offset so that different classes never share one."""
    block_base, session_base = 0, 0
    lists: list[np.ndarray] = []
    sessions = []
    for part in parts:
        lists += [blocks + block_base for blocks in part.lists]
        block_base += 1 + max((int(b.max()) for b in part.lists if b.size), default=-1)
        sessions.append(np.where(part.session >= 0, part.session + session_base, -1))
        session_base += 1 + int(part.session.max(initial=-1))
    arrival = np.concatenate([p.sample.arrival_s for p in parts])
    order = np.argsort(arrival, kind="stable")

    def stacked(name: str) -> np.ndarray:
        return np.concatenate([getattr(p.sample, name) for p in parts])[order]

    route_u = np.concatenate([p.sample.route_u.reshape(-1, route_draws) for p in parts])[order]
    ordered = [lists[i] for i in order]
    ptr = np.zeros(len(ordered) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([b.size for b in ordered])
    ids = np.concatenate(ordered) if ordered else np.zeros(0, np.int64)
    return RequestSample(arrival[order], stacked("cls"), stacked("prompt_tokens"), stacked("output_tokens"),
                         stacked("predicted_output_tokens"), route_u, ptr, ids.astype(np.int64), block_tokens,
                         np.concatenate(sessions)[order])

"""A pool of replicas (one serving region and model) as Python values, and one replication of it.

:class:`PoolConfig` says everything one simulation needs: the replicas (possibly several
SKUs, each a sub-pool with its own profile), the traffic classes with their rates, length
laws and SLOs, the policy and admission control, the router, the per-step token budget
and the time window. :func:`run_replication` draws one sample of requests and runs the
compiled engine on it.

**c-mu's μ_k at the replica level.** Following the fluid model of Li, Wang & Si (2026),
μ_k is the rate at which one replica completes class-k requests when it runs only class k
at the largest batch its KV budget allows, with class means P_k (prompt) and O_k (output):
the analytic ceiling of :mod:`planner.profiles.throughput`. Each class-k request holds
P_k + O_k tokens of KV at its peak (the admission reservation), shares each of its O_k decode
steps with the others in flight and adds its prompt's marginal cost to the steps that carry
it. Compute, bandwidth and KV capacity all enter, as the theory asks; the index is
w_k · μ_k on each replica's own profile.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from planner.errors import InputError
from planner.profiles.step_model import StepModel
from planner.profiles.throughput import ceiling
from planner.sim.class_reuse import ClassReuse, PoolReuse
from planner.sim.dense_ids import dense_ids
from planner.sim.policies import PolicySpec
from planner.sim.replica.engine import run_pool
from planner.sim.replica.routing import POWER_OF_D, router_code
from planner.sim.replica.state import DEFAULT_OVERLAP_WEIGHT, PrefixInput, State, build_state, cache_layout
from planner.sim.workload import ClassWorkload, PrefixLaw, RequestSample, sample_requests
from planner.slo import ClassSlo

DEFAULT_BLOCK_TOKENS = 16
"""KV block size in tokens the classes' declared reuse is cut into: vLLM's default ``--block-size``."""
DEFAULT_TOKEN_BUDGET = 8192
"""Tokens per step (prefill chunk + decodes): vLLM's ``--max-num-batched-tokens`` default for
its API server on H100-class GPUs, and the production config in the practitioners' guide."""


@dataclass(frozen=True)
class ReplicaSpec:
    """One sub-pool: ``count`` identical replicas of one profile under one engine setting.

    ``max_batch`` is the engine's batch cap (vLLM ``--max-num-seqs``), ``token_budget`` its
    tokens per step (``--max-num-batched-tokens``) and ``prefill_chunk_cap`` the most prompt
    tokens one request prefills in a step (``--long-prefill-token-threshold``; 0: no cap).
    ``prefix_caching`` off is vLLM's ``--no-enable-prefix-caching`` on these replicas.
    """

    sku: str
    count: int
    step: StepModel
    kv_capacity_tokens: int
    max_batch: int
    token_budget: int = DEFAULT_TOKEN_BUDGET
    usd_per_replica_hour: float = 0.0
    tp: int = 1
    prefill_chunk_cap: int = 0
    prefix_caching: bool = True

    @classmethod
    def of(cls, profile: Any, count: int, *, max_batch: int | None = None, token_budget: int | None = None,
           prefill_chunk_cap: int = 0, usd_per_replica_hour: float = 0.0) -> ReplicaSpec:
        """From a profile row (``planner.profiles``), with its engine defaults unless a setting is given."""
        return cls(str(profile["sku"]), int(count), StepModel.from_row(profile), int(profile["kv_capacity_tokens"]),
                   int(profile["max_num_seqs"] if max_batch is None else max_batch),
                   int(profile["max_num_batched_tokens"] if token_budget is None else token_budget),
                   float(usd_per_replica_hour), int(profile["tp_degree"]), int(prefill_chunk_cap))


@dataclass(frozen=True)
class ClassSpec:
    """One traffic class of a pool; ``slo`` holds the p99 targets checked for it (the pool's model's)."""

    name: str
    rate_rps: float
    weight: float
    priority_jump: float
    drr_quantum_tokens: float
    max_queue_wait_ms: float
    slo: ClassSlo
    workload: ClassWorkload
    reuse: ClassReuse | None = None

    @classmethod
    def of(cls, klass: Any, slo: ClassSlo, rate_rps: float, workload: ClassWorkload,
           reuse: ClassReuse | None = None) -> ClassSpec:
        """A scenario traffic class (``planner.scenario.TrafficClass``) with the SLOs in effect for the pool's
        model (``Scenario.slo``), at ``rate_rps`` with its length laws and declared prefix reuse."""
        return cls(klass.name, float(rate_rps), float(klass.weight), float(klass.priority_jump),
                   float(klass.drr_quantum_tokens), float(klass.max_queue_wait_ms), slo, workload, reuse)


class SampleSource(Protocol):
    """Draws a replication's requests itself, at the pool's class rates (e.g.
    :class:`planner.sim.prefix_workload.TraceReplay`)."""

    def draw(self, rates_rps: np.ndarray, workloads: Sequence[ClassWorkload], duration_s: float,
             seed: np.random.SeedSequence, *, prediction_sigma: float = 0.0,
             route_draws: int = 2) -> RequestSample: ...


@dataclass(frozen=True)
class PoolConfig:
    """One pool to simulate. ``policy_params`` holds the policy's parameter values by name (the
    scenario's ``[policy.params]``, :func:`planner.sim.policies.policy_values`); the policy's own
    defaults stand for the ones missing.

    Prefix caching (:mod:`.prefix`) runs on every replica whose ``prefix_caching`` is on, when
    ``prefix_caching`` here is on (the default) and the requests carry their blocks: those of
    ``prefix`` (a :class:`~planner.sim.workload.PrefixLaw` that :func:`draw_sample` applies), or
    of a sample given to :func:`run_sample`, or of ``source``, which then draws every replication's
    requests in place of the arrival process and length laws. ``router_overlap_weight`` is the
    cache-aware router's w (:mod:`.routing`)."""

    replicas: tuple[ReplicaSpec, ...]
    classes: tuple[ClassSpec, ...]
    policy: PolicySpec
    duration_s: float
    warmup_s: float
    kv_fraction: float = 0.85
    output_quantile_reserve: float = 0.95
    policy_params: Mapping[str, float] = field(default_factory=dict)
    prediction_sigma: float = 0.0
    router: str = "jsq"
    router_d: int = 2
    arrival_kind: str = "poisson"
    arrival_cv: float = 1.0
    arrival_trace_s: tuple[float, ...] | None = None
    prefix_caching: bool = True
    router_overlap_weight: float = DEFAULT_OVERLAP_WEIGHT
    prefix: PrefixLaw | None = None
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    source: SampleSource | None = None

    @property
    def n_replicas(self) -> int:
        return sum(spec.count for spec in self.replicas)

    def expanded(self) -> list[ReplicaSpec]:
        """One entry per replica, sub-pools in the order given."""
        return [spec for spec in self.replicas for _ in range(spec.count)]

    def reserve_tokens(self) -> np.ndarray:
        """Per class: the output-length quantile reserved in KV at admission (at least 1)."""
        q = self.output_quantile_reserve
        return np.array([max(1, c.workload.output.quantile(q)) for c in self.classes], dtype=np.int64)


def effective_service_rate(spec: ReplicaSpec, prompt: float, output: float, kv_fraction: float) -> float:
    """μ_k in requests per second of one replica (module docstring); 0 if no request fits."""
    return ceiling(spec.step, kv_capacity_tokens=spec.kv_capacity_tokens, max_num_seqs=spec.max_batch,
                   max_num_batched_tokens=spec.token_budget, prompt=prompt, output=output,
                   kv_fraction=kv_fraction, prefill_chunk_cap=spec.prefill_chunk_cap).rps


def service_rates(config: PoolConfig) -> np.ndarray:
    """μ[r, k] for every replica and class."""
    means = [(c.workload.prompt.mean(), c.workload.output.mean()) for c in config.classes]
    return np.array([[effective_service_rate(spec, p, o, config.kv_fraction) for p, o in means]
                     for spec in config.expanded()], dtype=np.float64).reshape(config.n_replicas, len(means))


def check_config(config: PoolConfig) -> None:
    if config.n_replicas < 1:
        raise InputError("a pool needs at least one replica", where="plan", fix="give the pool replicas > 0")
    for spec in config.replicas:
        if spec.token_budget < spec.max_batch:
            raise InputError(
                f"token budget {spec.token_budget} is below the batch cap {spec.max_batch} of {spec.sku}",
                where="max_num_batched_tokens", fix=f"use a token budget of at least {spec.max_batch}")
    if not config.duration_s > config.warmup_s >= 0:
        raise InputError(f"warm-up {config.warmup_s:g} s must be shorter than the duration {config.duration_s:g} s",
                         where="duration", fix="lengthen the run or shorten the warm-up")


def engine_state(config: PoolConfig, sample: RequestSample) -> tuple[State, np.ndarray, np.ndarray]:
    """The engine's arrays for one sample (shared with the pure-Python reference in the tests)."""
    check_config(config)
    reps = config.expanded()
    kv_limit = [min(s.kv_capacity_tokens, math.floor(config.kv_fraction * s.kv_capacity_tokens)) for s in reps]
    policy = config.policy
    encoding = policy.encoding(config.policy_params)
    policy_i = np.array([int(policy.drr), int(policy.preemptive), int(policy.uses_remaining_size),
                         router_code(config.router), max(1, config.router_d)], dtype=np.int64)
    policy_f = np.array([0.0, encoding.preempt_until, config.warmup_s, config.duration_s])
    class_f = np.array([[c.weight, c.priority_jump, c.drr_quantum_tokens, c.max_queue_wait_ms / 1000.0]
                        for c in config.classes], dtype=np.float64)
    return build_state(
        arrival=sample.arrival_s, cls=sample.cls, prompt=sample.prompt_tokens, output=sample.output_tokens,
        predicted=sample.predicted_output_tokens, route_u=sample.route_u,
        replica_steps=np.array([s.step.packed() for s in reps]),
        replica_ints=np.array([[s.kv_capacity_tokens, lim, s.max_batch, s.token_budget, s.prefill_chunk_cap]
                               for s, lim in zip(reps, kv_limit, strict=True)], dtype=np.int64),
        mu=service_rates(config), class_f=class_f, reserve=config.reserve_tokens(),
        policy_i=policy_i, policy_f=policy_f, policy_key=encoding.key.packed(),
        prefix=prefix_input(config, sample, reps),
    )


MAX_CACHE_SLOTS = 250_000_000
"""Replicas × prefix-cache slots, in either layout of :func:`.state.cache_layout` (16 bytes each: 4 GB)."""


def _dense_sessions(sample: RequestSample) -> tuple[np.ndarray, int]:
    """Session indices 0..S−1 (−1: none) and S."""
    session = np.full(sample.n, -1, dtype=np.int64)
    if sample.session is None:
        return session, 0
    raw = np.asarray(sample.session, dtype=np.int64)
    has = raw >= 0
    n_sessions, dense = dense_ids(raw[has])
    session[has] = dense
    return session, n_sessions


def prefix_input(config: PoolConfig, sample: RequestSample, reps: list[ReplicaSpec]) -> PrefixInput | None:
    """The sample's blocks and sessions as dense indices (:mod:`planner.sim.dense_ids`), so the engine indexes
    arrays, not dicts; None without prefix data."""
    if not sample.has_prefix and sample.session is None:
        return None
    ptr, dense, n_blocks = np.zeros(sample.n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
    tokens = np.zeros(len(reps), dtype=np.int64)
    if sample.has_prefix:
        assert sample.block_ptr is not None and sample.block_ids is not None
        n_blocks, dense = dense_ids(sample.block_ids)
        ptr = np.asarray(sample.block_ptr, dtype=np.int64)
        on = [config.prefix_caching and s.prefix_caching for s in reps]
        tokens = np.array([sample.block_tokens if o else 0 for o in on], dtype=np.int64)
    slots, _ = cache_layout(n_blocks, np.array([s.kv_capacity_tokens for s in reps], dtype=np.int64), tokens)
    if slots * len(reps) > MAX_CACHE_SLOTS:
        raise InputError(f"{len(reps)} replicas of {slots:,} prefix-cache slots each: too large a prefix cache",
                         where="prefix data", fix="use larger blocks or fewer replicas")
    session, n_sessions = _dense_sessions(sample)
    return PrefixInput(ptr, dense, n_blocks, tokens, session, n_sessions,
                       float(config.router_overlap_weight))


def class_prefix(config: PoolConfig) -> PrefixLaw | None:
    """The pool's prefix law: ``config.prefix``, else the classes' declared reuse (:mod:`planner.sim.class_reuse`)
    in the engine's block size, else None (no prefix data: the engine runs exactly as without a cache)."""
    if config.prefix is not None or not any(c.reuse is not None for c in config.classes):
        return config.prefix
    return PoolReuse(tuple(c.reuse for c in config.classes), tuple(c.workload for c in config.classes),
                     tuple(c.rate_rps for c in config.classes),
                     tuple(c.reuse.max_prompt_tokens if c.reuse is not None else 0 for c in config.classes),
                     config.duration_s, config.block_tokens, config.prediction_sigma)


def draw_sample(config: PoolConfig, seed: np.random.SeedSequence) -> RequestSample:
    d = config.router_d if router_code(config.router) == POWER_OF_D else 1
    if config.source is not None:
        return config.source.draw(np.array([c.rate_rps for c in config.classes]),
                                  [c.workload for c in config.classes], config.duration_s, seed,
                                  prediction_sigma=config.prediction_sigma,
                                  route_draws=max(1, min(d, config.n_replicas)))
    return sample_requests(
        np.array([c.rate_rps for c in config.classes]), [c.workload for c in config.classes], config.duration_s,
        seed, arrival_kind=config.arrival_kind, cv=config.arrival_cv,
        trace_s=np.asarray(config.arrival_trace_s) if config.arrival_trace_s is not None else None,
        prediction_sigma=config.prediction_sigma, route_draws=max(1, min(d, config.n_replicas)),
        prefix=class_prefix(config),
    )


@dataclass(frozen=True)
class Replication:
    """The engine's final state for one sample; :mod:`.metrics` reads it."""

    config: PoolConfig
    sample: RequestSample
    state: State
    wall_s: float


def run_sample(config: PoolConfig, sample: RequestSample) -> Replication:
    """Run the compiled engine on ``sample``; ``wall_s`` is for benchmarks, never written out."""
    state, hkey, hid = engine_state(config, sample)
    start = time.perf_counter()
    run_pool(state, hkey, hid)
    return Replication(config, sample, state, time.perf_counter() - start)


def run_replication(config: PoolConfig, seed: np.random.SeedSequence) -> Replication:
    """Draw one sample from ``seed`` and run it."""
    return run_sample(config, draw_sample(config, seed))

"""Every random draw of a queue run, made up front from one seed.

One ``SeedSequence(seed)`` is spawned into a fixed set of streams, one per
distribution (SeedSequence child i depends only on (seed, i), so the streams do not
shift when the model changes elsewhere):

====== ==============================================
stream  draws
====== ==============================================
0       inter-arrival times (standard exponential or gamma)
1       class marks (uniforms)
2       prediction noise Z_j ~ N(0, 1), p̂_j = p_j·exp(σZ_j)
3       routing uniforms (n × d)
4+2k    work of class k (standard variates, then scaled)
5+2k    prompt tokens of class k (when the class has a token law)
====== ==============================================

Standard variates are scaled afterwards (E/λ, m·e^{σZ−σ²/2}), so two configurations
with the same seed share common random numbers: changing the load rescales the same
arrival pattern, and changing the policy reuses identical jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.sim.queue.model import QueueModel, ServiceDist

STREAM_ARRIVALS = 0
STREAM_CLASSES = 1
STREAM_PREDICTION = 2
STREAM_ROUTING = 3


@dataclass(frozen=True)
class JobSample:
    """Per-job inputs of one run, in arrival order (all float64 except ``cls``)."""

    arrival: np.ndarray
    cls: np.ndarray
    size: np.ndarray
    predicted: np.ndarray
    tokens: np.ndarray
    route_u: np.ndarray

    @property
    def n(self) -> int:
        return int(self.arrival.size)


def _streams(seed: int, n_classes: int) -> list[np.random.Generator]:
    children = np.random.SeedSequence(seed).spawn(4 + 2 * n_classes)
    return [np.random.Generator(np.random.PCG64(c)) for c in children]


def draw_work(dist: ServiceDist, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` draws of a service law (see :class:`ServiceDist`)."""
    if dist.kind == "exponential":
        x = rng.standard_exponential(count) * dist.mean
    elif dist.kind == "lognormal":
        z = rng.standard_normal(count)
        x = dist.mean * np.exp(dist.sigma * z - 0.5 * dist.sigma**2)
    elif dist.kind == "deterministic":
        x = np.full(count, dist.mean)
    else:
        values = np.asarray(dist.values, dtype=np.float64)
        x = values[rng.integers(0, values.size, count)]
    return np.maximum(1.0, np.rint(x)) if dist.integer else x


def arrival_times(model: QueueModel, n: int, rng: np.random.Generator) -> np.ndarray:
    """Arrival epochs: cumulative sums of i.i.d. gaps, or the trace itself.

    Poisson: gaps E/λ with E ~ Exp(1). Gamma with CV c: shape κ = 1/c², gaps G/(κλ) with
    G ~ Gamma(κ, 1), so the mean gap is 1/λ and its CV is c.
    """
    arr = model.arrivals
    if arr.kind == "trace":
        return np.asarray(arr.times[:n], dtype=np.float64)
    if arr.kind == "poisson" or arr.cv == 1.0:
        gaps = rng.standard_exponential(n) / arr.rate
    else:
        shape = 1.0 / arr.cv**2
        gaps = rng.standard_gamma(shape, n) / (shape * arr.rate)
    return np.cumsum(gaps)


def draw_jobs(model: QueueModel, seed: int) -> JobSample:
    """All per-job inputs of ``model`` for ``seed`` (deterministic)."""
    n = model.n_jobs
    k = len(model.classes)
    rngs = _streams(seed, k)
    arrival = arrival_times(model, n, rngs[STREAM_ARRIVALS])
    cum = np.cumsum([c.share for c in model.classes])
    cum[-1] = 1.0
    cls = np.searchsorted(cum, rngs[STREAM_CLASSES].random(n), side="right").astype(np.int64)
    cls = np.minimum(cls, k - 1)
    size = np.empty(n)
    tokens = np.empty(n)
    for i, c in enumerate(model.classes):
        idx = np.flatnonzero(cls == i)
        size[idx] = draw_work(c.service, idx.size, rngs[4 + 2 * i])
        tokens[idx] = draw_work(c.tokens, idx.size, rngs[5 + 2 * i]) if c.tokens is not None else size[idx]
    if model.prediction_sigma > 0:
        predicted = size * np.exp(model.prediction_sigma * rngs[STREAM_PREDICTION].standard_normal(n))
    else:
        predicted = size.copy()
    d = model.power_d if model.routing == "power-of-d" else 1
    route_u = rngs[STREAM_ROUTING].random((n, d))
    return JobSample(arrival, cls, size, predicted, tokens, route_u)

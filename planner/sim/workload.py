"""Workload for the simulators: arrival times and per-request token lengths.

**Arrivals** (seconds from 0, sorted, all below the duration):

* Poisson at rate λ: exponential gaps of mean 1/λ.
* Gamma renewal with coefficient of variation CV: gaps ~ Gamma(shape 1/CV², scale
  CV²/λ), so the mean gap is 1/λ and its CV is CV (CV = 1 is Poisson, > 1 bursty).
* Trace replay: recorded timestamps shifted to start at 0, optionally time-scaled so the
  mean rate is λ, and repeated end to end when the trace is shorter than the duration.

Multiclass traffic is one arrival process at the total rate Σ_k λ_k whose arrivals are
marked with class k with probability λ_k / Σ_j λ_j (for Poisson this is exactly the
superposition of independent per-class Poisson processes).

**Token lengths.** A :class:`LengthLaw` draws integers with one uniform per draw (inverse
CDF), so two runs that share a stream share their lengths draw for draw:

* :class:`LognormalLength`: lognormal(μ, σ) conditioned on [1, hi] (hi = what fits the
  model's context), Q(p) = exp(μ + σ Φ⁻¹(Φ(α) + p (Φ(β) − Φ(α)))), α = (ln 1 − μ)/σ,
  β = (ln hi − μ)/σ, rounded to whole tokens. :meth:`LognormalLength.through` builds it
  through a measured (p50, p99) as the demo history does: μ = ln p50,
  σ = ln(p99/p50) / z₀.₉₉.
* :class:`EmpiricalLength`: the ``planner ingest`` histogram (power-of-two bins): pick a
  bin with probability count/total, then an integer uniformly in [bin_lo, bin_hi).

Default laws per class (no histogram given) are the project's class mapping of the real
traces, as in ``data/README.md`` (demo history):

============ ========================================= ===================================
class        prompt tokens (mean / p50 / p99)          output tokens (mean / p50 / p99)
============ ========================================= ===================================
interactive  Azure conv 2023: 1155 / 1020 / 4142       Azure conv 2023: 211 / 129 / 601
standard     Azure code 2023: 2048 / 1469 / 7436       Azure code 2023: 28 / 13 / 251.5
batch        Azure code 2023: 2048 / 1469 / 7436       Mooncake sample: 357 / 368 / 904
long-context Mooncake sample: 13910 / 8873 / 87330     Mooncake sample: 357 / 368 / 904
============ ========================================= ===================================

Batch is "summarisation": the long prompts of the code trace and the long outputs of the
Mooncake conversation sample (the longest outputs among the bundled real traces);
long-context takes the Mooncake prompts too (p99 87k tokens: documents, RAG, long agent
histories). Outputs are cut at 1,024 tokens and prompts at the model's context minus 1,024
(the demo history's rule): 130,048 tokens on the Llamas, 39,936 on the Qwen models.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from planner.contracts.columns import HISTOGRAM_COLUMNS
from planner.contracts.schemas import Problem, histogram_schema, raise_problems
from planner.errors import InputError
from planner.sources import data_row, source_of

Z99 = 2.3263478740408408
OUTPUT_CAP_TOKENS = 1024
CONTEXT_TOKENS: dict[str, int] = {"llama-3.1-8b": 131072, "llama-3.1-70b": 131072, "qwen3-32b": 40960,
                                  "qwen3-235b-a22b": 40960}
"""max_position_embeddings of each model's Hugging Face config.json."""
DEFAULT_CONTEXT_TOKENS = 8192
ARRIVAL_KINDS = ("poisson", "gamma", "trace")

# (p50, p99, mean) measured on the real traces (data/README.md, demo history section).
TRACE_FIGURES: dict[str, dict[str, tuple[float, float, float]]] = {
    "interactive": {"prompt": (1020.0, 4142.0, 1155.0), "output": (129.0, 601.0, 211.1)},
    "standard": {"prompt": (1469.0, 7436.0, 2048.0), "output": (13.0, 251.5, 27.88)},
    "batch": {"prompt": (1469.0, 7436.0, 2048.0), "output": (368.0, 904.0, 356.9)},
    "long-context": {"prompt": (8873.0, 87330.0, 13910.0), "output": (368.0, 904.0, 356.9)},
}
TRACE_SOURCES: dict[str, str] = {
    "interactive": "Azure LLM inference trace 2023, conversation (prompt and output)",
    "standard": "Azure LLM inference trace 2023, code (prompt and output)",
    "batch": "Azure 2023 code trace prompts; Mooncake conversation sample outputs",
    "long-context": "Mooncake conversation sample (prompt and output)",
}


class LengthLaw(Protocol):
    def sample_from_uniform(self, u: np.ndarray) -> np.ndarray: ...
    def quantile(self, p: float) -> int: ...
    def longest(self) -> int: ...
    def mean(self) -> float: ...
    def describe(self) -> dict[str, float | str]: ...


@dataclass(frozen=True)
class LognormalLength:
    """Whole-token lengths: lognormal(mu, sigma) conditioned on [1, hi], rounded, clipped to [1, hi]."""

    mu: float
    sigma: float
    hi: int

    @classmethod
    def through(cls, p50: float, p99: float, hi: int) -> LognormalLength:
        """The lognormal through a measured median and 99th percentile."""
        if not (p50 > 0 and p99 >= p50):
            raise InputError(
                f"cannot fit a lognormal through p50={p50!r}, p99={p99!r}",
                where="token-length law",
                fix="give 0 < p50 <= p99",
            )
        return cls(math.log(p50), max(math.log(p99 / p50) / Z99, 1e-9), int(hi))

    def _cdf_bounds(self) -> tuple[float, float]:
        lo = float(ndtr((0.0 - self.mu) / self.sigma))
        hi = float(ndtr((math.log(self.hi) - self.mu) / self.sigma))
        return lo, hi

    def _continuous(self, u: np.ndarray | float) -> np.ndarray:
        lo, hi = self._cdf_bounds()
        z = np.asarray(ndtri(lo + np.asarray(u, dtype=np.float64) * (hi - lo)), dtype=np.float64)
        return np.exp(self.mu + self.sigma * z)

    def sample_from_uniform(self, u: np.ndarray) -> np.ndarray:
        return np.asarray(np.clip(np.rint(self._continuous(u)), 1, self.hi), dtype=np.int64)

    def quantile(self, p: float) -> int:
        return int(np.clip(np.ceil(self._continuous(p)), 1, self.hi))

    def longest(self) -> int:
        """The most tokens a draw can have."""
        return int(self.hi)

    def mean(self) -> float:
        lo, hi = self._cdf_bounds()
        s = self.sigma
        upper = float(ndtr((math.log(self.hi) - self.mu) / s - s))
        lower = float(ndtr(-self.mu / s - s))
        return math.exp(self.mu + s * s / 2.0) * (upper - lower) / (hi - lo)

    def describe(self) -> dict[str, float | str]:
        return {"law": "lognormal", "mu": self.mu, "sigma": self.sigma, "cap_tokens": self.hi,
                "mean_tokens": self.mean(), "p50_tokens": self.quantile(0.5), "p99_tokens": self.quantile(0.99)}


@dataclass(frozen=True)
class EmpiricalLength:
    """The histogram law of ``planner ingest``: bin by count, then uniform within the bin."""

    lo: np.ndarray
    hi: np.ndarray
    counts: np.ndarray
    kind: str = "empirical histogram"
    _cum: np.ndarray = field(init=False, repr=False)

    @classmethod
    def points(cls, tokens: np.ndarray, weights: np.ndarray, kind: str) -> EmpiricalLength:
        """A law on whole-token ``tokens`` with relative ``weights``: bins [t, t + 1), so a draw is exactly t."""
        values, inverse = np.unique(np.asarray(tokens, dtype=np.int64), return_inverse=True)
        mass = np.bincount(inverse, weights=np.asarray(weights, dtype=np.float64))
        return cls(values, values + 1, mass, kind)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cum", np.cumsum(self.counts, dtype=np.float64))

    def _position(self, u: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        total = self._cum[-1]
        target = np.asarray(u, dtype=np.float64) * total
        idx = np.minimum(np.searchsorted(self._cum, target, side="right"), self.counts.size - 1)
        before = np.where(idx > 0, self._cum[np.maximum(idx - 1, 0)], 0.0)
        frac = np.clip((target - before) / np.maximum(self.counts[idx], 1), 0.0, np.nextafter(1.0, 0.0))
        return idx, frac

    def sample_from_uniform(self, u: np.ndarray) -> np.ndarray:
        idx, frac = self._position(u)
        width = self.hi[idx] - self.lo[idx]
        return np.asarray(np.maximum(self.lo[idx] + np.floor(frac * width).astype(np.int64), 1))

    def quantile(self, p: float) -> int:
        return int(self.sample_from_uniform(np.array([p]))[0])

    def longest(self) -> int:
        """The most tokens a draw (u in [0, 1)) can have: the last bin with a count, less one (a bin is [lo, hi))."""
        return max(int(self.hi[np.flatnonzero(self.counts > 0)].max()) - 1, 1)

    def mean(self) -> float:
        mids = np.maximum((self.lo + self.hi - 1) / 2.0, 1.0)
        return float((mids * self.counts).sum() / self._cum[-1])

    def describe(self) -> dict[str, float | str]:
        return {"law": self.kind, "bins": int(self.counts.size), "requests": float(self._cum[-1]),
                "mean_tokens": self.mean(), "p50_tokens": self.quantile(0.5), "p99_tokens": self.quantile(0.99)}


@dataclass(frozen=True)
class ClassWorkload:
    """Prompt and output length laws of one traffic class, and where they came from."""

    prompt: LengthLaw
    output: LengthLaw
    source: str


def prompt_cap_tokens(model: str, max_prompt_tokens: int | None = None) -> int:
    """The longest prompt a law may draw: what the model's context leaves for the output, or the
    class's ``max_prompt_tokens`` (the longest prompt its service takes) when that is shorter."""
    cap = CONTEXT_TOKENS.get(model, DEFAULT_CONTEXT_TOKENS) - OUTPUT_CAP_TOKENS
    return min(cap, max_prompt_tokens) if max_prompt_tokens is not None else cap


def builtin_law(name: str, measure: str, cap_tokens: int) -> LengthLaw:
    """The built-in law ``name`` (a key of :data:`TRACE_FIGURES`) of ``measure`` ("prompt" or "output"),
    cut at ``cap_tokens`` for prompts and at :data:`OUTPUT_CAP_TOKENS` for outputs."""
    p50, p99, _ = TRACE_FIGURES[name][measure]
    return LognormalLength.through(p50, p99, cap_tokens if measure == "prompt" else OUTPUT_CAP_TOKENS)


def default_workload(traffic_class: str, model: str, max_prompt_tokens: int | None = None) -> ClassWorkload:
    """The built-in laws of a class named like one (:data:`TRACE_FIGURES`), with their source.

    Prompts are cut at :func:`prompt_cap_tokens`. Any other class name has no built-in law:
    its lengths must be declared or ingested (:mod:`planner.workloads`).
    """
    if traffic_class not in TRACE_FIGURES:
        raise InputError(f"class {traffic_class!r} has no built-in length law", where=f"class {traffic_class!r}",
                         fix=f"declare its prompt_tokens and output_tokens, or name a built-in law "
                             f"({', '.join(TRACE_FIGURES)})")
    source = TRACE_SOURCES[traffic_class]
    if model not in CONTEXT_TOKENS:
        source += f"; context of {model!r} unknown, prompts cut at {DEFAULT_CONTEXT_TOKENS - OUTPUT_CAP_TOKENS}"
    if max_prompt_tokens is not None and max_prompt_tokens < CONTEXT_TOKENS.get(model, DEFAULT_CONTEXT_TOKENS) \
            - OUTPUT_CAP_TOKENS:
        source += f"; prompts cut at the class's max_prompt_tokens {max_prompt_tokens}"
    cap = prompt_cap_tokens(model, max_prompt_tokens)
    return ClassWorkload(builtin_law(traffic_class, "prompt", cap), builtin_law(traffic_class, "output", cap), source)


def _histogram_law(rows: pd.DataFrame, where: str) -> EmpiricalLength:
    rows = rows.sort_values("bin_lo_tokens", kind="stable")
    lo = rows["bin_lo_tokens"].to_numpy(dtype=np.int64)
    hi = rows["bin_hi_tokens"].to_numpy(dtype=np.int64)
    counts = rows["count"].to_numpy(dtype=np.float64)
    if counts.sum() <= 0:
        raise InputError("every bin has count 0", where=where, fix="ingest a log with requests of this class")
    return EmpiricalLength(lo, hi, counts)


def validate_histogram(histogram: pd.DataFrame, where: str = "histogram") -> None:
    """Refuse a histogram without the ingest columns (``where`` names the input), or with broken bins, naming
    every bad cell in one error (the bins of every model and class, used or not: a file with one broken bin is
    suspect as a whole)."""
    missing = [c for c in HISTOGRAM_COLUMNS if c not in histogram.columns]
    if missing:
        raise InputError(f"the token histogram lacks column(s) {', '.join(missing)}", where=where,
                         fix=f"pass the .histogram.csv of `planner ingest` (columns {', '.join(HISTOGRAM_COLUMNS)})")

    def locate(problem: Problem) -> str:
        return f"{data_row(problem.row or 0)}, column '{problem.column}'"

    raise_problems(histogram_schema().problems(histogram, header_fix=str), source_of(histogram, "histogram"), locate)


def workloads_for(
    model: str, class_names: tuple[str, ...], histogram: pd.DataFrame | None = None,
    max_prompt_tokens: Mapping[str, int | None] | None = None,
) -> dict[str, ClassWorkload]:
    """Per-class laws for ``model``: from the histogram where it has the class, else the defaults
    (cut at each class's ``max_prompt_tokens``, when given)."""
    caps = max_prompt_tokens or {}
    result = {k: default_workload(k, model, caps.get(k)) for k in class_names}
    if histogram is None:
        return result
    validate_histogram(histogram)
    for klass in class_names:
        rows = histogram[(histogram["model"] == model) & (histogram["traffic_class"] == klass)]
        prompt = rows[rows["measure"] == "prompt_tokens"]
        output = rows[rows["measure"] == "output_tokens"]
        if prompt.empty or output.empty:
            continue
        where = f"histogram, model {model!r}, class {klass!r}"
        result[klass] = ClassWorkload(_histogram_law(prompt, where + ", prompt_tokens"),
                                      _histogram_law(output, where + ", output_tokens"),
                                      "ingest histogram")
    return result


# ---------------------------------------------------------------------------- arrivals
def poisson_arrivals(rate_rps: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    return gamma_arrivals(rate_rps, 1.0, duration_s, rng)


def gamma_arrivals(rate_rps: float, cv: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Renewal arrivals with Gamma gaps of mean 1/rate and coefficient of variation ``cv`` (1 = Poisson)."""
    if rate_rps <= 0 or duration_s <= 0:
        return np.empty(0, dtype=np.float64)
    if not cv > 0:
        raise InputError(f"arrival CV must be > 0, got {cv!r}", where="arrivals", fix="use e.g. cv = 1 (Poisson)")
    expected = rate_rps * duration_s
    chunk = int(expected + 6.0 * math.sqrt(expected) * max(cv, 1.0) + 16)
    times: list[np.ndarray] = []
    last = 0.0
    while True:
        if cv == 1.0:
            gaps = rng.exponential(1.0 / rate_rps, size=chunk)
        else:
            shape = 1.0 / (cv * cv)
            gaps = rng.gamma(shape, 1.0 / (rate_rps * shape), size=chunk)
        block = last + np.cumsum(gaps)
        times.append(block)
        last = float(block[-1])
        if last >= duration_s:
            break
    out = np.concatenate(times)
    return np.asarray(out[out < duration_s])


def trace_arrivals(timestamps_s: np.ndarray, duration_s: float, rate_rps: float | None = None) -> np.ndarray:
    """Replay recorded arrival times (any origin), rescaled to ``rate_rps`` if given, looped to fill the duration."""
    t = np.sort(np.asarray(timestamps_s, dtype=np.float64))
    if t.size < 2:
        raise InputError("a trace needs at least two arrivals", where="trace", fix="replay a longer trace")
    t = t - t[0]
    span = float(t[-1]) * t.size / (t.size - 1)  # one mean gap after the last arrival before the loop restarts
    if rate_rps is not None:
        scale = (t.size / span) / rate_rps
        t, span = t * scale, span * scale
    repeats = int(math.ceil(duration_s / span)) if span > 0 else 1
    out = (t[None, :] + span * np.arange(repeats)[:, None]).ravel()
    return np.asarray(out[out < duration_s])


def trace_times_s(frame: pd.DataFrame, column: str = "TIMESTAMP", where: str | Path = "trace") -> np.ndarray:
    """Arrival times in seconds (from the first) of a request log with a timestamp column,
    e.g. the Azure LLM inference traces (``TIMESTAMP`` like ``2023-11-16 18:17:03.9799600``).

    ``frame`` is the log as read (:func:`planner.workflows.inputs.read_trace_times` reads a
    file); ``where`` names it in errors."""
    if column not in frame.columns:
        raise InputError(f"no column {column!r}", where=where, fix=f"columns are: {', '.join(map(str, frame.columns))}")
    stamps = pd.to_datetime(frame[column], utc=True, errors="coerce", format="mixed")
    bad = np.flatnonzero(stamps.isna().to_numpy())
    if bad.size:
        raise InputError(f"cannot read timestamp {frame[column].iloc[bad[0]]!r}",
                         where=f"{where}, row {bad[0] + 1}, column {column!r}", fix="use ISO-8601 times")
    ns = stamps.astype("int64").to_numpy()
    return np.sort((ns - ns.min()) / 1e9)


def arrival_times(kind: str, rate_rps: float, duration_s: float, rng: np.random.Generator, *,
                  cv: float = 1.0, trace_s: np.ndarray | None = None) -> np.ndarray:
    """Dispatch on ``kind`` in :data:`ARRIVAL_KINDS`."""
    if kind == "poisson":
        return poisson_arrivals(rate_rps, duration_s, rng)
    if kind == "gamma":
        return gamma_arrivals(rate_rps, cv, duration_s, rng)
    if kind == "trace":
        if trace_s is None:
            raise InputError("trace replay needs timestamps", where="arrivals", fix="pass trace_s")
        return trace_arrivals(trace_s, duration_s, rate_rps if rate_rps > 0 else None)
    raise InputError(f"unknown arrival process {kind!r}", where="arrivals",
                     fix=f"use one of {', '.join(ARRIVAL_KINDS)}")


# ---------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class RequestSample:
    """One replication's requests, in arrival order (ids 0..n-1).

    Optional prefix data (all or none; :mod:`planner.sim.prefix_workload` makes it): request j's
    KV blocks of ``block_tokens`` tokens have the content ids ``block_ids[block_ptr[j]:block_ptr[j+1]]``
    (int64, ``block_ptr`` has n + 1 offsets), in order from the start of its prompt; two requests
    whose lists start with the same ids share that prefix. The list covers the prompt's full
    blocks and may go on over the output. ``session[j]`` is its conversation (−1: none).
    """

    arrival_s: np.ndarray
    cls: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    predicted_output_tokens: np.ndarray
    route_u: np.ndarray
    block_ptr: np.ndarray | None = None
    block_ids: np.ndarray | None = None
    block_tokens: int = 0
    session: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    @property
    def has_prefix(self) -> bool:
        """Whether the requests carry their blocks (the prefix cache then runs)."""
        return self.block_ptr is not None and self.block_ids is not None and self.block_tokens > 0


class PrefixLaw(Protocol):
    """Gives sampled requests their blocks (e.g. :class:`planner.sim.prefix_workload.SharedPrompt`)."""

    def attach(self, sample: RequestSample, seed: np.random.SeedSequence) -> RequestSample: ...


STREAMS = ("arrivals", "classes", "prompt", "output", "prediction", "routing", "prefix")


def sample_requests(
    rates_rps: np.ndarray,
    workloads: list[ClassWorkload],
    duration_s: float,
    seed: np.random.SeedSequence,
    *,
    arrival_kind: str = "poisson",
    cv: float = 1.0,
    trace_s: np.ndarray | None = None,
    prediction_sigma: float = 0.0,
    route_draws: int = 2,
    prefix: PrefixLaw | None = None,
) -> RequestSample:
    """Draw arrivals, classes, lengths and noisy predictions, one stream per distribution.

    ``seed`` spawns the streams of :data:`STREAMS`; the prompt, output and prediction
    streams spawn one child per class, so a class's lengths do not depend on how many
    requests the other classes drew. Predictions are p̂ = p·exp(N(0, σ²)).
    ``route_u`` holds ``route_draws`` uniforms per request for the random routers.
    ``prefix``, when given, attaches the requests' blocks from a stream of its own (the other
    streams, so every other draw, are the same with or without it).
    """
    rates = np.asarray(rates_rps, dtype=np.float64)
    streams = dict(zip(STREAMS, seed.spawn(len(STREAMS)), strict=True))
    total = float(rates.sum())
    times = arrival_times(arrival_kind, total, duration_s, np.random.default_rng(streams["arrivals"]),
                          cv=cv, trace_s=trace_s) if total > 0 else np.empty(0)
    n = times.size
    probs = rates / total if total > 0 else np.full(rates.size, 1.0 / max(rates.size, 1))
    cls = np.random.default_rng(streams["classes"]).choice(rates.size, size=n, p=probs).astype(np.int64)
    prompt = np.empty(n, dtype=np.int64)
    output = np.empty(n, dtype=np.int64)
    predicted = np.empty(n, dtype=np.float64)
    children = {name: streams[name].spawn(rates.size) for name in ("prompt", "output", "prediction")}
    for k, law in enumerate(workloads):
        idx = np.flatnonzero(cls == k)
        prompt[idx] = law.prompt.sample_from_uniform(np.random.default_rng(children["prompt"][k]).random(idx.size))
        output[idx] = law.output.sample_from_uniform(np.random.default_rng(children["output"][k]).random(idx.size))
        noise = np.random.default_rng(children["prediction"][k]).standard_normal(idx.size)
        predicted[idx] = output[idx] * np.exp(prediction_sigma * noise)
    route_u = np.random.default_rng(streams["routing"]).random((n, max(route_draws, 1)))
    sample = RequestSample(times, cls, prompt, output, predicted, route_u)
    return sample if prefix is None else prefix.attach(sample, streams["prefix"])


def class_means(workloads: Mapping[str, ClassWorkload]) -> dict[str, tuple[float, float]]:
    """(mean prompt, mean output) tokens per class."""
    return {k: (w.prompt.mean(), w.output.mean()) for k, w in workloads.items()}

"""The multiclass queue as data: classes, service laws, arrival process, servers, routing, policy.

Everything is validated once here (a bad value is an :class:`InputError` naming the
field and how to fix it) and frozen; sampling and the compiled loop trust it.

Service laws are for the *work* of a job (time on a server of speed 1); a server of
speed v takes work/v. Lognormal uses the mean m and log-space σ: ln S ~ N(μ, σ²)
with μ = ln m − σ²/2, so E[S] = m and E[S²] = m²·e^{σ²}.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from planner.errors import InputError
from planner.sim.policies import get_policy

ServiceKind = Literal["exponential", "lognormal", "deterministic", "empirical"]
ArrivalKind = Literal["poisson", "gamma", "trace"]

ROUTING_CODES: dict[str, int] = {
    "central": 0,  # one shared queue; a free server takes the next job (M/M/c)
    "random": 1,
    "round-robin": 2,
    "jsq": 3,
    "power-of-d": 4,
    "least-work": 5,
}


def _bad(field_name: str, message: str, fix: str) -> InputError:
    return InputError(message, where=f"queue model: {field_name}", fix=fix)


@dataclass(frozen=True)
class ServiceDist:
    """A per-class law for a job's work: exponential, lognormal, deterministic or empirical.

    ``integer`` rounds every draw to a whole number ≥ 1 (token counts); the moments
    below are those of the continuous law.
    """

    kind: ServiceKind
    mean: float = 1.0
    sigma: float = 0.0
    values: tuple[float, ...] = ()
    integer: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("exponential", "lognormal", "deterministic", "empirical"):
            raise _bad("service.kind", f"unknown service law '{self.kind}'",
                       "use exponential, lognormal, deterministic or empirical")
        if self.kind == "empirical":
            if len(self.values) == 0 or min(self.values) < 0:
                raise _bad("service.values", "an empirical law needs non-negative sample values",
                           "pass the observed work values as a tuple")
        elif not self.mean > 0:
            raise _bad("service.mean", f"mean service must be > 0, got {self.mean}",
                       "give the mean work of one job")
        if self.sigma < 0:
            raise _bad("service.sigma", f"log-space sigma must be >= 0, got {self.sigma}",
                       "use 0 for no spread")

    @property
    def first_moment(self) -> float:
        if self.kind == "empirical":
            return float(np.mean(self.values))
        return self.mean

    @property
    def second_moment(self) -> float:
        """E[S²]: 2m² exponential, m²e^{σ²} lognormal, m² deterministic, sample mean of S²."""
        if self.kind == "exponential":
            return 2.0 * self.mean**2
        if self.kind == "lognormal":
            return self.mean**2 * float(np.exp(self.sigma**2))
        if self.kind == "deterministic":
            return self.mean**2
        return float(np.mean(np.square(self.values)))


@dataclass(frozen=True)
class QueueClass:
    """A traffic class: holding-cost weight, share of arrivals, work law, and Dynamo knobs.

    ``tokens`` (optional) is the law of the uncached prompt length used as DRR cost and
    by the Dynamo WSPT key; when absent, the job's work stands in for it.
    """

    name: str
    weight: float
    share: float
    service: ServiceDist
    priority_jump: float = 0.0
    quantum_tokens: float = 4096.0
    tokens: ServiceDist | None = None

    def __post_init__(self) -> None:
        where = f"classes[{self.name}]"
        if not self.weight > 0:
            raise _bad(f"{where}.weight", f"weight must be > 0, got {self.weight}", "use a positive holding cost")
        if not 0 <= self.share <= 1:
            raise _bad(f"{where}.share", f"share must be in [0, 1], got {self.share}", "use a fraction")
        if not self.quantum_tokens > 0:
            raise _bad(f"{where}.quantum_tokens", "the DRR quantum must be > 0", "use a positive token count")


@dataclass(frozen=True)
class ArrivalProcess:
    """Total arrivals: Poisson at ``rate``, a gamma renewal process with coefficient of
    variation ``cv`` (cv = 1 is Poisson), or a replayed trace of arrival ``times``.
    Classes are attached to arrivals independently with probabilities ``share``."""

    kind: ArrivalKind
    rate: float = 1.0
    cv: float = 1.0
    times: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("poisson", "gamma", "trace"):
            raise _bad("arrivals.kind", f"unknown arrival process '{self.kind}'", "use poisson, gamma or trace")
        if self.kind == "trace":
            t = np.asarray(self.times, dtype=np.float64)
            if t.size == 0 or np.any(np.diff(t) < 0) or not np.all(np.isfinite(t)):
                raise _bad("arrivals.times", "a trace needs finite, non-decreasing arrival times",
                           "sort the trace by arrival time and drop empty rows")
        elif not self.rate > 0:
            raise _bad("arrivals.rate", f"arrival rate must be > 0, got {self.rate}", "give requests per time unit")
        if self.kind == "gamma" and not self.cv > 0:
            raise _bad("arrivals.cv", f"the gamma CV must be > 0, got {self.cv}", "use 1 for Poisson-like arrivals")


@dataclass(frozen=True)
class QueueModel:
    """One queueing configuration. ``n_jobs`` arrivals are simulated; the first ``warmup``
    (in arrival order) are left out of every summary statistic. ``policy_params`` are the
    policy's parameter values by name (its defaults for the ones missing)."""

    classes: tuple[QueueClass, ...]
    arrivals: ArrivalProcess
    policy: str = "fcfs"
    n_jobs: int = 10_000
    warmup: int = 0
    speeds: tuple[float, ...] = (1.0,)
    routing: str = "central"
    power_d: int = 2
    prediction_sigma: float = 0.0
    policy_params: tuple[tuple[str, float], ...] = ()
    class_arbiter: bool | None = None
    mu_override: tuple[float, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.classes:
            raise _bad("classes", "at least one class is needed", "add a QueueClass")
        shares = sum(c.share for c in self.classes)
        if abs(shares - 1.0) > 1e-6:
            raise _bad("classes.share", f"class shares sum to {shares:.6f}, not 1", "rescale the shares")
        get_policy(self.policy).values(dict(self.policy_params))  # an unknown name or a value out of range raises
        if self.routing not in ROUTING_CODES:
            raise _bad("routing", f"unknown routing '{self.routing}'", f"use one of: {', '.join(ROUTING_CODES)}")
        if not self.speeds or min(self.speeds) <= 0:
            raise _bad("speeds", "every server needs a speed > 0", "give one positive speed per server")
        if self.routing == "power-of-d" and not 1 <= self.power_d <= len(self.speeds):
            raise _bad("power_d", f"power_d must be in [1, {len(self.speeds)}]", "sample at most every server")
        n_trace = len(self.arrivals.times)
        if self.arrivals.kind == "trace" and self.n_jobs > n_trace:
            raise _bad("n_jobs", f"n_jobs={self.n_jobs} exceeds the trace's {n_trace} arrivals",
                       "lower n_jobs or replay a longer trace")
        if self.n_jobs < 1 or not 0 <= self.warmup < self.n_jobs:
            raise _bad("warmup", f"need 0 <= warmup < n_jobs, got {self.warmup} and {self.n_jobs}",
                       "discard fewer jobs than you simulate")
        if self.prediction_sigma < 0:
            raise _bad("prediction_sigma", "the noise sigma must be >= 0", "use 0 to switch it off")
        if self.mu_override and len(self.mu_override) != len(self.classes):
            raise _bad("mu_override", "one service rate per class is needed", "match the class count")

    @property
    def mean_work(self) -> float:
        """E[S] of the mix: Σ_k share_k E[S_k]."""
        return sum(c.share * c.service.first_moment for c in self.classes)

    @property
    def offered_load(self) -> float:
        """ρ = λ E[S] / Σ speeds (for a trace, λ is the trace's mean rate)."""
        if self.arrivals.kind == "trace":
            t = np.asarray(self.arrivals.times[: self.n_jobs])
            rate = (t.size - 1) / (t[-1] - t[0]) if t.size > 1 and t[-1] > t[0] else float("nan")
        else:
            rate = self.arrivals.rate
        return rate * self.mean_work / sum(self.speeds)

    @property
    def class_mu(self) -> np.ndarray:
        """μ_k = 1 / E[S_k] (the c-mu index's rate), unless overridden."""
        if self.mu_override:
            return np.asarray(self.mu_override, dtype=np.float64)
        return np.array([1.0 / c.service.first_moment for c in self.classes])


def rate_for_load(classes: tuple[QueueClass, ...], rho: float, capacity: float = 1.0) -> float:
    """Arrival rate λ giving load ρ: λ = ρ · capacity / Σ_k share_k E[S_k]."""
    mean = sum(c.share * c.service.first_moment for c in classes)
    return rho * capacity / mean

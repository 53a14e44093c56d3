"""One probe of the search: simulate a unit under one engine setting at one request rate and decide
whether every SLO holds.

**The predicate.** At a rate λ per replica the pool of ``pool_replicas`` replicas receives
N·λ requests per second, split over the classes by the mix: class k arrives at N·λ·p_k.
It is simulated ``R`` times; replication i gives, per class k, the 99th percentile of TTFT,
TPOT and end-to-end latency over the requests that arrived in the measurement window, with
rejected requests at +∞ (exactly :mod:`planner.sim.replica.metrics`). For each active
class (p_k > 0) and each metric m whose SLO the class sets for this model (M_k ⊆ {ttft,
tpot, e2e}, ``Scenario.slo``; a metric that is not set is not checked) the upper end of the
two-sided interval at level 1 − α (the ``confidence``) over replications is

    U_km = x̄_km + t_{R−1, 1−α/2} · s_km / √R

(mean and sample standard deviation of the R per-replication p99s; ``planner.sim.stats``).
U_km is +∞ when any replication rejected more than 1 % of the class's requests (its p99 is
+∞), and when fewer than two replications saw a request of the class (no spread, no
evidence). Then

    ok(λ)  ⇔  U_km ≤ SLO_km   for every active class k and m ∈ M_k.

So ok(λ) says: with the stated confidence, the mean p99 of every class is within its SLO.

**Run length.** A p99 needs requests: over n requests the 99th percentile (inverted CDF) is
the ⌈0.99 n⌉-th smallest, i.e. the maximum when n ≤ 100, an estimate biased low and very
noisy. A fixed simulated time gives few requests at low rates, so ok(λ) would fail at low λ
for want of evidence and hold at higher λ where the same SLO is harder: the search would
land anywhere (with fixed 30-minute runs, five seeds of one unit gave λ* anywhere from 0 to
the true capacity). Each
replication therefore runs for

    D(λ) = max(duration_s, min(n_min / ((1 − w) · N · λ · p_min), n_max / (N · λ)))

with w the warm-up fraction (the first w·D is not measured), p_min the smallest active
share, n_min = ``min_class_requests`` (1,000: ten requests beyond the p99 of the rarest
class) and n_max = ``max_requests`` (a bound for classes with a tiny share). At high rates
this is ``duration_s``; at low rates the expected request count is fixed, so the run holds
the same requests whatever λ, only spread over a longer time.

Replications run in order and stop at the first that makes some U_km infinite, since no
later replication can make ok(λ) true; this never changes the answer. They also stop, from the
second on, once the *lower* end of some class's interval is above its SLO: the miss is then
as clear as the confidence level asks, and ok(λ) is false (U_km ≥ that lower end > SLO_km).
This keeps the search monotone in the SLO: a looser SLO stops no earlier, so whenever the
tight SLOs hold after all R replications the loose ones see the same R replications.

**Common random numbers.** Replication i draws from the fresh SeedSequence
``SeedSequence(seed, spawn_key=(crc32(model), crc32(sku), i))`` (child i of the pair's seed,
which does not depend on the policy, the TP degree or the engine setting, so all of them are
compared on the same requests). The sampler of
:func:`planner.sim.workload.sample_requests` draws each quantity from its own stream
sequentially: the n-th arrival gap is E_n/(N·λ) with E_n the n-th standard exponential of
the arrivals stream, the n-th request's class, routing uniforms, and the j-th class-k
request's prompt, output and prediction noise come from streams that never see λ. At every
λ the pair therefore sees one and the same request sequence, its time axis scaled by 1/λ,
cut at the run length D(λ) (``tests/test_calibrate_search.py`` checks it draw for draw). Fresh
SeedSequence objects are built for every probe because ``SeedSequence.spawn`` is stateful.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace

import numpy as np

from planner.calibrate.inputs import UnitTask
from planner.calibrate.probe_memo import ProbeStore, Row, probe_key
from planner.sim.class_reuse import ENGINE_BLOCK_TOKENS
from planner.sim.policies import get_policy
from planner.sim.replica.metrics import class_p99s
from planner.sim.replica.pool import PoolConfig, ReplicaSpec, run_replication
from planner.sim.stats import replication_ci
from planner.slo import SLO_METRICS, p99_column

NO_EVIDENCE = "fewer than two replications saw a request of the class"
REJECTIONS = "a replication rejected more than 1 % of the class's requests"


def pair_seed(seed: int, model: str, sku: str) -> np.random.SeedSequence:
    """The pair's seed; replication i uses its child i (see the module docstring)."""
    return np.random.SeedSequence(seed, spawn_key=(zlib.crc32(model.encode()), zlib.crc32(sku.encode())))


def replication_seed(seed: int, model: str, sku: str, i: int) -> np.random.SeedSequence:
    """Child i of :func:`pair_seed`, built fresh (equal to ``pair_seed(...).spawn(i + 1)[i]``)."""
    base = pair_seed(seed, model, sku)
    return np.random.SeedSequence(base.entropy, spawn_key=(*base.spawn_key, i), pool_size=base.pool_size)


def run_length_s(task: UnitTask, replica: ReplicaSpec, rate_rps_per_replica: float) -> float:
    """D(λ) of the module docstring, in simulated seconds."""
    s = task.settings
    pool_rate = rate_rps_per_replica * replica.count
    p_min = min(c.share for c in task.active)
    needed = s.min_class_requests / ((1.0 - s.warmup_fraction) * pool_rate * p_min)
    return max(s.duration_s, min(needed, s.max_requests / pool_rate))


def pool_config(task: UnitTask, replica: ReplicaSpec, rate_rps_per_replica: float) -> PoolConfig:
    """The simulated pool at λ = ``rate_rps_per_replica``: N replicas, class k at N·λ·p_k, run D(λ)."""
    s = task.settings
    total = rate_rps_per_replica * replica.count
    duration = run_length_s(task, replica, rate_rps_per_replica)
    classes = tuple(replace(c.spec, rate_rps=total * c.share) for c in task.classes)
    return PoolConfig(
        (replica,), classes, get_policy(s.policy), duration_s=duration, warmup_s=s.warmup_fraction * duration,
        kv_fraction=s.kv_fraction, output_quantile_reserve=s.output_quantile_reserve,
        policy_params=dict(s.policy_params), prediction_sigma=s.prediction_sigma, router=s.router,
        router_overlap_weight=s.router_overlap_weight, block_tokens=ENGINE_BLOCK_TOKENS[task.engine])


@dataclass(frozen=True)
class Bound:
    """U_km against its SLO; ``why`` explains an infinite bound."""

    traffic_class: str
    metric: str
    upper_ms: float
    slo_ms: float
    mean_ms: float
    why: str = ""

    @property
    def ratio(self) -> float:
        return self.upper_ms / self.slo_ms

    @property
    def holds(self) -> bool:
        return self.upper_ms <= self.slo_ms


@dataclass(frozen=True)
class Probe:
    """ok(λ) with its evidence: every bound, the replications run and the mean requests per class."""

    rate_rps: float
    bounds: tuple[Bound, ...]
    run_length_s: float
    replications_run: int
    arrivals_per_replication: dict[str, float]

    @property
    def ok(self) -> bool:
        return all(b.holds for b in self.bounds)

    @property
    def worst(self) -> Bound:
        """The bound furthest over (or nearest to) its SLO; among infinite ones, rejections before
        missing evidence (a replication that stopped the probe early leaves the others short);
        then the first in class order."""
        return max(self.bounds, key=lambda b: (b.ratio, b.why == REJECTIONS))


def upper_bound(values: list[float], confidence: float) -> tuple[float, float, str]:
    """(U, mean, why) for one class and metric over replications (see the module docstring)."""
    x = np.asarray(values, dtype=np.float64)
    if np.isposinf(x).any():
        return math.inf, math.inf, REJECTIONS
    finite = x[np.isfinite(x)]
    if finite.size < 2:
        return math.inf, float(finite.mean()) if finite.size else math.nan, NO_EVIDENCE
    ci = replication_ci(finite, level=confidence)
    return ci.high, ci.mean, ""


def _clearly_missed(p99: dict[tuple[int, str], list[float]], checked: dict[int, dict[str, float]],
                    confidence: float) -> bool:
    """Some class's interval over the replications so far lies wholly above its SLO."""
    for (k, m), values in p99.items():
        finite = np.asarray(values, dtype=np.float64)
        if finite.size >= 2 and np.isfinite(finite).all() and replication_ci(finite, level=confidence).low > \
                checked[k][m]:
            return True
    return False


def _replication_row(task: UnitTask, config: PoolConfig, i: int) -> Row:
    """Replication i simulated: per active class, its arrivals and the p99 of every metric."""
    seed = replication_seed(task.settings.seed, task.model, task.sku, i)
    rows = class_p99s(run_replication(config, seed))
    return {task.classes[k].name: {"arrived": float(rows[k]["arrived"]),
                                   **{m: float(rows[k][p99_column(m)]) for m in SLO_METRICS}}
            for k, c in enumerate(task.classes) if c.share > 0}


def _usable(rows: list[Row] | None, task: UnitTask) -> list[Row]:
    """Stored rows that carry every active class's arrivals and p99s; none (simulate again) when one does not."""
    fields = {"arrived", *SLO_METRICS}
    names = [c.name for c in task.classes if c.share > 0]
    if rows is None or any(name not in row or not fields <= row[name].keys() for row in rows for name in names):
        return []
    return list(rows)


def first_replication(task: UnitTask, replica: ReplicaSpec, rate_rps_per_replica: float,
                      store: ProbeStore | None = None) -> Row:
    """Replication 0 of the probe at λ: the same row :func:`probe` reads or simulates first, read from ``store``
    when kept there, else simulated and kept."""
    key = probe_key(task, replica, rate_rps_per_replica) if store is not None else ""
    kept = _usable(store.get(key), task) if store is not None else []
    if kept:
        return kept[0]
    row = _replication_row(task, pool_config(task, replica, rate_rps_per_replica), 0)
    if store is not None:
        store.put(key, [row])
    return row


def probe(task: UnitTask, replica: ReplicaSpec, rate_rps_per_replica: float, store: ProbeStore | None = None) -> Probe:
    """Simulate the unit under ``replica``'s engine setting at λ and evaluate ok(λ); replications already in
    ``store`` are read, not simulated (:mod:`.probe_memo`), and the ones simulated are added to it."""
    config = pool_config(task, replica, rate_rps_per_replica)
    key = probe_key(task, replica, rate_rps_per_replica) if store is not None else ""
    kept = _usable(store.get(key), task) if store is not None else []
    known = len(kept)
    active = [k for k, c in enumerate(task.classes) if c.share > 0]
    checked = {k: dict(task.classes[k].spec.slo.targets()) for k in active}  # metric -> SLO, the set ones only
    p99: dict[tuple[int, str], list[float]] = {(k, m): [] for k in active for m in checked[k]}
    arrivals = {task.classes[k].name: 0.0 for k in active}
    run = 0
    for i in range(task.settings.replications):
        if i == len(kept):
            kept.append(_replication_row(task, config, i))
        row = kept[i]
        run += 1
        for k in active:
            name = task.classes[k].name
            arrivals[name] += row[name]["arrived"]
            for m in checked[k]:
                p99[(k, m)].append(row[name][m])
        if any(math.isinf(v[-1]) and v[-1] > 0 for v in p99.values()) or _clearly_missed(
                p99, checked, task.settings.confidence):
            break
    if store is not None and len(kept) > known:
        store.put(key, kept)
    bounds = []
    for k in active:
        for m, slo in checked[k].items():
            upper, mean, why = upper_bound(p99[(k, m)], task.settings.confidence)
            bounds.append(Bound(task.classes[k].name, m, upper, slo, mean, why))
    return Probe(rate_rps_per_replica, tuple(bounds), config.duration_s, run, {k: v / run for k, v in arrivals.items()})

"""The simulator against closed forms: Pollaczek–Khinchine, Cobham, Erlang C.

Tolerance rule, used by every test here: R independent replications (seeds 0..R−1)
give R i.i.d. estimates; their Student-t 95% half-width hw measures this run's own
noise. We accept |sim − theory| ≤ max(3·hw, 1% of theory): 3·hw is about 6.6
standard errors at R = 20, so a correct simulator fails with negligible probability,
while any model error larger than the noise is caught; the 1% floor covers the
O(1/n) bias of finite runs that start empty. Each test also asserts hw < 8% of the
theory value, so a loose interval cannot make the check vacuous.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.analytics import cobham_mean_waits, erlang_c_mean_wait, pk_mean_wait
from planner.sim.queue import ArrivalProcess, QueueClass, QueueModel, ServiceDist, simulate_queue
from planner.sim.stats import ConfidenceInterval, replication_ci

R = 20


def _agrees(ci: ConfidenceInterval, theory: float) -> bool:
    assert ci.half_width < 0.08 * theory, f"interval too wide to test: {ci}"
    return abs(ci.mean - theory) <= max(3.0 * ci.half_width, 0.01 * theory)


def _per_class_waits(model: QueueModel) -> np.ndarray:
    """R x K matrix of post-warm-up per-class mean waits."""
    out = np.empty((R, len(model.classes)))
    for seed in range(R):
        run = simulate_queue(model, seed)
        wait, cls = run.wait[run.kept], run.cls[run.kept]
        out[seed] = [wait[cls == k].mean() for k in range(len(model.classes))]
    return out


@pytest.mark.parametrize("law", [ServiceDist("lognormal", 1.0, 1.0), ServiceDist("deterministic", 1.0),
                                 ServiceDist("exponential", 1.0)])
def test_fcfs_mg1_mean_wait_matches_pollaczek_khinchine(law: ServiceDist) -> None:
    lam = 0.7
    model = QueueModel((QueueClass("only", 1.0, 1.0, law),), ArrivalProcess("poisson", lam), policy="fcfs",
                       n_jobs=50_000, warmup=5_000)
    ci = replication_ci(_per_class_waits(model)[:, 0])
    theory = pk_mean_wait(lam, law.first_moment, law.second_moment)
    assert _agrees(ci, theory), (ci, theory)


def test_cmu_per_class_mean_wait_matches_cobham() -> None:
    """c-mu is non-preemptive priority in w_k mu_k order: interactive > standard > batch."""
    classes = (
        QueueClass("interactive", 8.0, 0.50, ServiceDist("lognormal", 0.30, 0.8)),
        QueueClass("standard", 2.0, 0.35, ServiceDist("exponential", 1.00)),
        QueueClass("batch", 0.5, 0.15, ServiceDist("lognormal", 4.00, 0.8)),
    )
    lam = 0.8 / sum(c.share * c.service.mean for c in classes)
    model = QueueModel(classes, ArrivalProcess("poisson", lam), policy="cmu", n_jobs=60_000, warmup=6_000)
    waits = _per_class_waits(model)
    theory = cobham_mean_waits([lam * c.share for c in classes], [c.service.first_moment for c in classes],
                               [c.service.second_moment for c in classes])
    for k, c in enumerate(classes):
        ci = replication_ci(waits[:, k])
        assert _agrees(ci, theory[k]), (c.name, ci, theory[k])


def test_mmc_fcfs_mean_wait_matches_erlang_c() -> None:
    c, mu, lam = 4, 1.0, 3.2
    model = QueueModel((QueueClass("only", 1.0, 1.0, ServiceDist("exponential", 1.0 / mu)),),
                       ArrivalProcess("poisson", lam), speeds=(1.0,) * c, routing="central",
                       n_jobs=50_000, warmup=5_000)
    ci = replication_ci(_per_class_waits(model)[:, 0])
    theory = erlang_c_mean_wait(lam, mu, c)
    assert _agrees(ci, theory), (ci, theory)

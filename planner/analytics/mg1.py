"""Closed forms for single-server queues: Pollaczek–Khinchine, Cobham, processor sharing.

All functions are pure and take rates and moments; they raise :class:`InputError`
for an unstable or ill-posed queue instead of returning a negative delay.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.errors import InputError


def _require_stable(rho: float, where: str) -> None:
    if not 0 <= rho < 1:
        raise InputError(
            f"the queue is unstable (load rho = {rho:.4f} >= 1) or the load is negative",
            where=where,
            fix="lower the arrival rate or add capacity so that rho < 1",
        )


def pk_mean_wait(lam: float, es: float, es2: float) -> float:
    """Pollaczek–Khinchine mean wait of M/G/1 FCFS.

    E[W] = λ E[S²] / (2 (1 − ρ)),  ρ = λ E[S].
    (Kleinrock, *Queueing Systems* vol. 1, eq. 5.105.) Mean sojourn is E[W] + E[S].
    """
    rho = lam * es
    _require_stable(rho, "pk_mean_wait")
    return lam * es2 / (2.0 * (1.0 - rho))


def cobham_mean_waits(lams: Sequence[float], es: Sequence[float], es2: Sequence[float]) -> list[float]:
    """Cobham's per-class mean wait for non-preemptive priority M/G/1 (classes in priority order).

    With ρ_j = λ_j E[S_j], σ_k = Σ_{j≤k} ρ_j (σ_0 = 0) and the mean residual work
    W_0 = Σ_j λ_j E[S_j²] / 2 (over all classes),

        E[W_k] = W_0 / ((1 − σ_{k−1}) (1 − σ_k)).

    (A. Cobham, "Priority assignment in waiting line problems", Operations Research 2,
    1954; Kleinrock vol. 2, eq. 3.30.) Only σ_K < 1 is required for class K's formula;
    a class with σ_k ≥ 1 gets an infinite wait.
    """
    if not (len(lams) == len(es) == len(es2)):
        raise InputError("rates and moments must have one entry per class", where="cobham_mean_waits",
                         fix="pass equal-length sequences, highest priority first")
    w0 = 0.5 * sum(lam * m2 for lam, m2 in zip(lams, es2, strict=True))
    waits: list[float] = []
    sigma_prev = 0.0
    for lam, m1 in zip(lams, es, strict=True):
        sigma = sigma_prev + lam * m1
        waits.append(float("inf") if sigma >= 1 else w0 / ((1.0 - sigma_prev) * (1.0 - sigma)))
        sigma_prev = sigma
    return waits


def ps_mean_sojourn(lam: float, es: float) -> float:
    """M/G/1 processor sharing mean sojourn, insensitive to the service law beyond its mean.

    E[T] = E[S] / (1 − ρ); for M/M/1-PS with μ = 1/E[S] this is 1/(μ − λ), and a job of
    size x has E[T | x] = x / (1 − ρ). (Kleinrock vol. 2, §4.4.)
    """
    rho = lam * es
    _require_stable(rho, "ps_mean_sojourn")
    return es / (1.0 - rho)

"""Hourly token statistics from per-request lengths that follow a truncated lognormal.

A request's prompt (or output) length X is lognormal(mu, sigma) conditioned on
lo <= X <= hi (hi is what fits in the model's context window). With
a = (ln lo - mu)/sigma, b = (ln hi - mu)/sigma and Z = Phi(b) - Phi(a):

    quantile   Q(p) = exp(mu + sigma * Phi^-1(Phi(a) + p Z))
    mean       m1   = exp(mu + sigma^2/2)  (Phi(b - sigma)   - Phi(a - sigma))   / Z
    2nd moment m2   = exp(2 mu + 2 sigma^2) (Phi(b - 2 sigma) - Phi(a - 2 sigma)) / Z

For an hour with n requests the sum of lengths and the sample quantiles are drawn
from their large-n laws instead of drawing n lengths (which would take ~10^9 draws
for the whole history):

    sum   ~ Normal(n m1, n (m2 - m1^2))                       (central limit theorem)
    q_hat = Q(U),  U ~ Beta(k, n - k + 1),  k = ceil(p n)

The nearest-rank p-quantile of n draws is their k-th order statistic, and the k-th
order statistic of n uniforms is Beta(k, n - k + 1), so q_hat has exactly the law of the
sample quantile (each quantile on its own; their weak dependence is not modelled).

For n <= EXACT_MAX the n lengths are drawn exactly (inverse CDF of uniforms) and the
p50/p99 are nearest-rank quantiles of those draws. Lengths are whole tokens, so every
figure is rounded and clipped to [lo, hi] (sums to [n lo, n hi]); p99 is never below p50.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

EXACT_MAX = 200
QUANTILES = (0.5, 0.99)


@dataclass(frozen=True)
class LengthLaw:
    """A lognormal length law on [lo, hi]; ``mu`` may be one value per hour."""

    mu: np.ndarray
    sigma: float
    lo: float
    hi: float

    def _bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = (np.log(self.lo) - self.mu) / self.sigma
        b = (np.log(self.hi) - self.mu) / self.sigma
        return a, b, ndtr(b) - ndtr(a)

    def quantile(self, p: float | np.ndarray) -> np.ndarray:
        a, _, z = self._bounds()
        return np.exp(self.mu + self.sigma * ndtri(ndtr(a) + p * z))

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, variance) of one request's length."""
        a, b, z = self._bounds()
        s = self.sigma
        m1 = np.exp(self.mu + s * s / 2) * (ndtr(b - s) - ndtr(a - s)) / z
        m2 = np.exp(2 * self.mu + 2 * s * s) * (ndtr(b - 2 * s) - ndtr(a - 2 * s)) / z
        return m1, np.maximum(m2 - m1 * m1, 0.0)


def hour_token_stats(
    requests: np.ndarray, law: LengthLaw, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sum, p50, p99) of the per-request lengths in each hour, as int64 arrays.

    ``law.mu`` has one entry per hour. Hours with zero requests get zeros. The draws are
    taken from ``rng`` in a fixed order (one normal and two betas per hour, then the exact draws
    for small hours in time order), so the result is a pure function of the seed.
    """
    n = np.asarray(requests, dtype=np.int64)
    mu = np.broadcast_to(np.asarray(law.mu, dtype=float), n.shape)
    law = LengthLaw(mu=mu, sigma=law.sigma, lo=law.lo, hi=law.hi)
    nf = np.maximum(n, 1).astype(float)
    mean, var = law.moments()
    total = np.rint(nf * mean + np.sqrt(nf * var) * rng.standard_normal(n.size))
    stats = [np.clip(total, nf * law.lo, nf * law.hi)]
    for p in QUANTILES:
        k = np.ceil(p * nf)
        stats.append(np.clip(np.rint(law.quantile(rng.beta(k, nf - k + 1.0))), law.lo, law.hi))
    total, p50, p99 = (s.astype(np.int64) for s in stats)
    p99 = np.maximum(p99, p50)

    for i in np.flatnonzero((n > 0) & (n <= EXACT_MAX)):
        one = LengthLaw(mu=mu[i], sigma=law.sigma, lo=law.lo, hi=law.hi)
        a, _, zz = one._bounds()
        u = rng.random(int(n[i]))
        draws = np.clip(np.rint(np.exp(mu[i] + law.sigma * ndtri(ndtr(a) + u * zz))), law.lo, law.hi)
        total[i] = int(draws.sum())
        p50[i], p99[i] = np.quantile(draws, QUANTILES, method="inverted_cdf").astype(np.int64)
    idle = n == 0
    total[idle] = p50[idle] = p99[idle] = 0
    return total, p50, p99

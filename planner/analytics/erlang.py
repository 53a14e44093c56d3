"""Erlang C for M/M/c FCFS, and square-root staffing (Halfin–Whitt).

Offered load a = λ/μ (in servers), per-server utilisation ρ = a/c < 1.

* Erlang B by the stable recursion B(0) = 1, B(k) = a·B(k−1) / (k + a·B(k−1)).
* Erlang C (probability an arrival waits):  C(c, a) = c·B(c) / (c − a·(1 − B(c))).
* Mean wait:  E[W] = C(c, a) / (cμ − λ);  mean sojourn E[W] + 1/μ.
* Square-root staffing:  c = ⌈a + β√a⌉, where in the Halfin–Whitt regime
  P(wait) → α(β) = [1 + β Φ(β)/φ(β)]⁻¹ (Halfin & Whitt, Operations Research 29, 1981).
"""

from __future__ import annotations

import math
from typing import cast

from scipy.stats import norm

from planner.errors import InputError


def erlang_b(c: int, a: float) -> float:
    """Blocking probability of M/M/c/c with offered load a."""
    if c < 0 or a < 0:
        raise InputError("servers and offered load must be >= 0", where="erlang_b", fix="check c and a")
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival to M/M/c waits, C(c, a); requires a < c."""
    if not a < c:
        raise InputError(
            f"M/M/c is unstable: offered load a = {a:.4f} >= c = {c}",
            where="erlang_c",
            fix="add servers or lower the arrival rate",
        )
    b = erlang_b(c, a)
    return c * b / (c - a * (1.0 - b))


def erlang_c_mean_wait(lam: float, mu: float, c: int) -> float:
    """M/M/c FCFS mean wait in queue: C(c, λ/μ) / (cμ − λ)."""
    a = lam / mu
    return erlang_c(c, a) / (c * mu - lam)


def halfin_whitt_wait_probability(beta: float) -> float:
    """Limiting P(wait) for c = a + β√a servers: 1 / (1 + β Φ(β)/φ(β))."""
    # scipy is untyped: norm.cdf and norm.pdf of a float are numpy floats
    return cast(float, 1.0 / (1.0 + beta * norm.cdf(beta) / norm.pdf(beta)))


def halfin_whitt_beta(target_wait_probability: float) -> float:
    """The β whose Halfin–Whitt wait probability equals the target (bisection on (0, 10))."""
    if not 0 < target_wait_probability < 1:
        raise InputError("the target wait probability must be in (0, 1)", where="halfin_whitt_beta",
                         fix="for example 0.2")
    lo, hi = 1e-9, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if halfin_whitt_wait_probability(mid) > target_wait_probability:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def sqrt_staffing(a: float, beta: float) -> int:
    """Square-root staffing rule c = ⌈a + β√a⌉ (at least one server)."""
    if a < 0 or beta < 0:
        raise InputError("offered load and beta must be >= 0", where="sqrt_staffing", fix="check a and beta")
    return max(1, math.ceil(a + beta * math.sqrt(a)))


def min_servers_erlang_c(lam: float, mu: float, target_wait_probability: float) -> int:
    """The fewest servers with C(c, λ/μ) ≤ target, by exact search from ⌊a⌋ + 1."""
    a = lam / mu
    c = int(math.floor(a)) + 1
    while erlang_c(c, a) > target_wait_probability:
        c += 1
    return c

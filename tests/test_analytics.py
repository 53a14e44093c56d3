"""Closed forms against textbook values and each other."""

from __future__ import annotations

import math

import pytest

from planner.analytics import (
    cobham_mean_waits,
    erlang_b,
    erlang_c,
    erlang_c_mean_wait,
    halfin_whitt_beta,
    halfin_whitt_wait_probability,
    min_servers_erlang_c,
    pk_mean_wait,
    ps_mean_sojourn,
    sqrt_staffing,
)
from planner.errors import InputError


def test_pk_reduces_to_mm1_and_md1() -> None:
    lam, mu = 0.8, 1.0
    assert pk_mean_wait(lam, 1 / mu, 2 / mu**2) == pytest.approx(lam / (mu * (mu - lam)))  # M/M/1: rho/(mu-lam)
    assert pk_mean_wait(lam, 1.0, 1.0) == pytest.approx(0.8 / (2 * 0.2))  # M/D/1: half of M/M/1
    with pytest.raises(InputError, match="unstable"):
        pk_mean_wait(1.2, 1.0, 2.0)


def test_cobham_single_class_is_pk_and_conserves_work() -> None:
    assert cobham_mean_waits([0.7], [1.0], [2.0])[0] == pytest.approx(pk_mean_wait(0.7, 1.0, 2.0))
    lams, es, es2 = [0.3, 0.2, 0.1], [0.5, 1.0, 2.0], [0.5, 2.0, 8.0]
    waits = cobham_mean_waits(lams, es, es2)
    assert waits[0] < waits[1] < waits[2]
    # Kleinrock's conservation law: sum_k rho_k W_k equals its FCFS value rho W_FCFS
    rho = [lam * m for lam, m in zip(lams, es, strict=True)]
    lam_tot = sum(lams)
    w_fcfs = pk_mean_wait(lam_tot, sum(rho) / lam_tot,
                          sum(lam * m2 for lam, m2 in zip(lams, es2, strict=True)) / lam_tot)
    assert sum(r * w for r, w in zip(rho, waits, strict=True)) == pytest.approx(sum(rho) * w_fcfs)
    assert cobham_mean_waits([0.5, 0.6], [1.0, 1.0], [2.0, 2.0])[1] == math.inf


def test_erlang_values() -> None:
    assert erlang_b(1, 1.0) == pytest.approx(0.5)
    assert erlang_c(1, 0.8) == pytest.approx(0.8)  # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c_mean_wait(0.8, 1.0, 1) == pytest.approx(4.0)
    with pytest.raises(InputError, match="unstable"):
        erlang_c(3, 3.0)


def test_square_root_staffing() -> None:
    beta = halfin_whitt_beta(0.2)
    assert halfin_whitt_wait_probability(beta) == pytest.approx(0.2, abs=1e-9)
    c = sqrt_staffing(100.0, beta)
    assert c == 111
    assert abs(c - min_servers_erlang_c(100.0, 1.0, 0.2)) <= 1
    assert sqrt_staffing(0.0, 1.0) == 1


def test_processor_sharing() -> None:
    assert ps_mean_sojourn(0.5, 1.0) == pytest.approx(1 / (1.0 - 0.5))  # M/M/1-PS: 1/(mu - lambda)

"""Series with a known structure, for simulate-then-recover tests and the speed benchmark.

The truth is the forecaster's own model family, so a test can compare what was
recovered with what was put in::

    log x_t = log(L) + g * t/8760                          (level, yearly growth g)
              + A_d [sin(2 pi (t - 9)/24) + 0.3 sin(4 pi t/24)]     (daily)
              - A_w * [t is Saturday or Sunday]                     (weekly)
              + u_t,         u_t = phi u_{t-1} + e_t,   sd(u) = sigma_u

``t`` counts hours from 2025-01-06T00:00Z (a Monday). With ``poisson=True`` the
hourly value is a Poisson count with mean ``exp(log x_t)`` (for low-volume series);
otherwise it is ``exp(log x_t)`` itself, so ``log x_t`` is exactly known.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

START = pd.Timestamp("2025-01-06T00:00:00Z")


@dataclass(frozen=True)
class Truth:
    level: float = 2000.0
    growth_per_year: float = 0.5
    daily_amp: float = 0.5
    weekend_drop: float = 0.3
    sigma_u: float = 0.08
    phi: float = 0.6


def log_mean(n_hours: int, truth: Truth, offset: int = 0) -> np.ndarray:
    """The deterministic part of ``log x_t`` for hours ``offset .. offset + n_hours - 1``."""
    t = np.arange(offset, offset + n_hours, dtype=float)
    hod = t % 24
    weekend = ((t // 24) % 7) >= 5
    daily = truth.daily_amp * (np.sin(2 * np.pi * (hod - 9) / 24) + 0.3 * np.sin(4 * np.pi * hod / 24))
    log_level: np.ndarray = (np.log(truth.level) + np.log1p(truth.growth_per_year) * t / 8760 + daily
                             - truth.weekend_drop * weekend)
    return log_level


def ar1_noise(n_hours: int, truth: Truth, rng: np.random.Generator) -> np.ndarray:
    """Stationary AR(1) noise with marginal standard deviation ``sigma_u``."""
    e = rng.normal(0.0, truth.sigma_u * np.sqrt(1 - truth.phi ** 2), n_hours)
    u = np.empty(n_hours)
    u[0] = rng.normal(0.0, truth.sigma_u)
    for i in range(1, n_hours):
        u[i] = truth.phi * u[i - 1] + e[i]
    return u


def synthetic_series(n_hours: int, rng: np.random.Generator, truth: Truth = Truth(),
                     poisson: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(values, true log-mean) for ``n_hours`` hours starting at ``START``."""
    mean = log_mean(n_hours, truth)
    log_x = mean + ar1_noise(n_hours, truth, rng)
    values = rng.poisson(np.exp(log_x)).astype(float) if poisson else np.exp(log_x)
    return values, mean


def hourly_stamps(n_hours: int, start: pd.Timestamp = START) -> list[str]:
    return [(start + pd.Timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(n_hours)]


def synthetic_history(n_series: int, n_hours: int, seed: int = 0, truth: Truth = Truth(),
                      poisson: bool = True) -> pd.DataFrame:
    """A demand history (contract columns ts, region, model, traffic_class, requests) of
    ``n_series`` independent series, one ``SeedSequence`` child per series."""
    stamps = hourly_stamps(n_hours)
    parts = []
    for i, child in enumerate(np.random.SeedSequence(seed).spawn(n_series)):
        rng = np.random.default_rng(child)
        level = truth.level * (0.5 + (i % 7) / 3)
        values, _ = synthetic_series(n_hours, rng, replace(truth, level=level), poisson)
        parts.append(pd.DataFrame({"ts": stamps, "region": f"r{i // 3:03d}", "model": "llama-3.1-8b",
                                   "traffic_class": ("interactive", "standard", "batch")[i % 3],
                                   "requests": values}))
    return pd.concat(parts, ignore_index=True)

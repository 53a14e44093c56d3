"""Prediction intervals calibrated on backtest errors (split conformal on standardised log errors).

A model's own intervals assume its error model is right; on real traffic they are often
too narrow (a 90 % band that covered 65 % of hours on ServeGen m-large) or too wide. The
calibration keeps the model's median and the shape of its band over the horizon (wider
further ahead) but takes the band's width from how far the model really erred in the
backtest.

For a forecast hour with model quantiles ``Q(tau)``, on the log scale ``y = log(1 + x)``::

    m = log(1 + Q(0.5))                                   (the model's median)
    w = max(W_MIN, (log(1 + Q(0.95)) - m) / z_0.95)     (its implied spread, from the upper half)
    u = (log(1 + x) - m) / w                               (the standardised error)

The spread is read from the band's upper half: for a log-Gaussian model both halves are the
same, but an additive band (a seasonal naive's) clipped at zero in a quiet hour has a lower
half of ``m`` itself, which read as a spread made the calibrated q99 of a 30-day forecast
thousands of times the history's peak. The upper half is also the one plans buy on.

Over the backtest's scored hours the absolute deviations ``r_i = |u_i - median(u)|`` are
collected (``n`` of them). A central band of coverage ``c`` has the half-width

    h(c) = the ceil((n + 1) c)-th smallest r_i                 (split conformal)

and the calibrated quantile at level ``tau`` is::

    Qc(tau) = max(0, exp(m + sign(tau - 1/2) h(|2 tau - 1|) w) - 1)

The band is symmetric on the standardised log scale because a few windows of one series
do not tell the two tails apart reliably (measured: an asymmetric band from the raw error
quantiles missed 80 % coverage on ServeGen m-large by 12 points, the symmetric one did
not); the median stays the model's own, because the backtest's median error is a poor
estimate of the next window's bias (shifting by it made the demo's point forecast worse).
Where ``ceil((n + 1) c) > n`` (q99 from 144 errors) the half-width is extrapolated with a
Gaussian tail through the 90 % half-width, and never below the largest deviation seen.
``h`` grows with ``c`` and ``w > 0``, so the quantiles are monotone in the level.

Beyond the evidence. The errors come from backtest windows of ``L`` hours, often far shorter
than the horizon on a short history (48 h windows for a 30-day forecast from two weeks). How
the model widens its band past ``L`` is then its own assumption, untested: an integrated
component or a seasonal random walk widens it with every hour, and multiplied by a half-width
measured at short leads it ran a q99 to thousands of times the history's peak. So hours past
the longest lead scored keep the widest spread the model had within it::

    w_h = min(w_h, max_{i < L} w_i)        for every forecast hour h

which leaves a forecast within its backtest's reach unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

W_MIN = 0.01
"""Floor of the implied log-scale spread: a model with a zero-width band still scales its errors."""
ANCHOR_HIGH = 0.95
Z_ANCHOR = float(ndtri(ANCHOR_HIGH))
SPREAD_LEVELS = (0.5, ANCHOR_HIGH)
"""The model quantiles the calibration reads: its median and its 90 % band."""
TAIL_ANCHOR_COVERAGE = 0.9


def centre_and_spread(quantiles: dict[float, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``m`` and ``w`` of the module docstring from a model's 50 % and 95 % quantiles."""
    m = np.log1p(np.maximum(quantiles[0.5], 0.0))
    upper = np.log1p(np.maximum(quantiles[ANCHOR_HIGH], 0.0)) - m
    return m, np.maximum(upper / Z_ANCHOR, W_MIN)


def standardised_errors(actual: np.ndarray, quantiles: dict[float, np.ndarray]) -> np.ndarray:
    """``u`` for each hour with actual ``actual`` (arrays aligned hour by hour)."""
    m, w = centre_and_spread(quantiles)
    errors: np.ndarray = (np.log1p(np.maximum(actual, 0.0)) - m) / w
    return errors


@dataclass(frozen=True)
class Calibration:
    """The backtest's absolute standardised deviations, sorted; empty means "keep the model's own band"."""

    deviations: np.ndarray

    @classmethod
    def from_errors(cls, errors: Sequence[np.ndarray]) -> Calibration:
        pooled = np.concatenate([np.asarray(e, dtype=float) for e in errors]) if errors else np.empty(0)
        pooled = pooled[np.isfinite(pooled)]
        if pooled.size == 0:
            return cls(np.empty(0))
        return cls(np.sort(np.abs(pooled - np.median(pooled))))

    @property
    def n(self) -> int:
        return int(self.deviations.size)

    def half_width(self, coverage: float) -> float:
        """``h(coverage)`` of the module docstring, in units of the model's spread ``w``."""
        n = self.n
        if coverage <= 0.0:
            return 0.0
        rank = math.ceil((n + 1) * coverage)
        if rank <= n:
            return float(self.deviations[rank - 1])
        anchor = self.half_width(TAIL_ANCHOR_COVERAGE) / float(ndtri(0.5 + TAIL_ANCHOR_COVERAGE / 2))
        return max(anchor * float(ndtri(0.5 + coverage / 2)), float(self.deviations[-1]))

    def apply(self, quantiles: dict[float, np.ndarray], levels: Sequence[float],
              evidence_hours: int | None = None) -> dict[float, np.ndarray]:
        """Calibrated quantiles at ``levels`` from a model's quantiles (which include ``SPREAD_LEVELS``); with
        ``evidence_hours`` (the longest lead the backtest scored), no wider past it than within it."""
        if self.n == 0:
            return {lvl: quantiles[lvl] for lvl in levels}
        m, w = centre_and_spread(quantiles)
        if evidence_hours is not None and 0 < evidence_hours < w.size:
            w = np.minimum(w, float(np.max(w[:evidence_hours])))
        out: dict[float, np.ndarray] = {}
        for lvl in levels:
            offset = math.copysign(self.half_width(abs(2.0 * lvl - 1.0)), lvl - 0.5)
            out[lvl] = np.maximum(np.expm1(m + offset * w), 0.0)
        return out

    def describe(self) -> dict[str, object]:
        if self.n == 0:
            return {"method": "none: the model's own intervals", "errors": 0}
        return {"method": "split conformal on standardised log errors of the backtest", "errors": self.n,
                "half_width_80": self.half_width(0.8), "half_width_90": self.half_width(0.9),
                "half_width_98": self.half_width(0.98)}

"""Prediction intervals calibrated on backtest errors.

A model's own intervals assume its error model is right; on real traffic they are often
too narrow (a 90 % band that covers 65 % of hours). The calibration keeps the shape of the
model's band over the horizon (wider further ahead) but takes its centre and width from
how the model really erred in the backtest.

For a forecast hour with model quantiles ``Q(tau)``, on the log scale ``y = log(1 + x)``::

    m = log(1 + Q(0.5))                                   (the model's median)
    w = max(W_MIN, (log(1 + Q(0.95)) - log(1 + Q(0.05))) / (2 z_0.95))   (its implied spread)
    u = (log(1 + x) - m) / w                               (the standardised error)

Over the backtest's scored hours the errors ``u_1..u_n`` are collected; the calibrated
quantile at level ``tau`` of a new forecast is then::

    Qc(tau) = max(0, exp(m + q_u(tau) w) - 1)

with ``q_u(tau)`` the empirical ``tau`` quantile of the ``u_i`` (conformal in spirit: the
band is as wide as the errors were). A level too extreme for the sample
(``n min(tau, 1 - tau) < MIN_TAIL_POINTS``) is extrapolated with a Gaussian tail anchored
at the 5 % and 95 % error quantiles, separately on each side (and never inside the sample's
largest or smallest error when the level is beyond its reach), so that q99 from 72 errors is
neither the sample maximum nor infinite. ``q_u`` is non-decreasing in ``tau`` and ``w > 0``,
so the calibrated quantiles are monotone in the level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

W_MIN = 0.01
"""Floor of the implied log-scale spread: a model with a zero-width band still scales its errors."""
MIN_TAIL_POINTS = 5
ANCHOR_LOW, ANCHOR_HIGH = 0.05, 0.95
Z_ANCHOR = float(ndtri(ANCHOR_HIGH))
SPREAD_LEVELS = (ANCHOR_LOW, 0.5, ANCHOR_HIGH)
"""The model quantiles the calibration reads: its median and its 90 % band."""


def centre_and_spread(quantiles: dict[float, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``m`` and ``w`` of the module docstring from a model's 5 %, 50 % and 95 % quantiles."""
    m = np.log1p(np.maximum(quantiles[0.5], 0.0))
    width = np.log1p(np.maximum(quantiles[ANCHOR_HIGH], 0.0)) - np.log1p(np.maximum(quantiles[ANCHOR_LOW], 0.0))
    return m, np.maximum(width / (2.0 * Z_ANCHOR), W_MIN)


def standardised_errors(actual: np.ndarray, quantiles: dict[float, np.ndarray]) -> np.ndarray:
    """``u`` for each hour with actual ``actual`` (arrays aligned hour by hour)."""
    m, w = centre_and_spread(quantiles)
    errors: np.ndarray = (np.log1p(np.maximum(actual, 0.0)) - m) / w
    return errors


@dataclass(frozen=True)
class Calibration:
    """The backtest's standardised errors, sorted; empty means "keep the model's own band"."""

    errors: np.ndarray

    @classmethod
    def from_errors(cls, errors: Sequence[np.ndarray]) -> Calibration:
        pooled = np.concatenate([np.asarray(e, dtype=float) for e in errors]) if errors else np.empty(0)
        return cls(np.sort(pooled[np.isfinite(pooled)]))

    @property
    def n(self) -> int:
        return int(self.errors.size)

    def error_quantile(self, level: float) -> float:
        """``q_u(level)``: empirical inside the sample's reach, a Gaussian tail beyond it."""
        n = self.n
        if n * min(level, 1.0 - level) >= MIN_TAIL_POINTS:
            return float(np.quantile(self.errors, level, method="linear"))
        median = float(np.quantile(self.errors, 0.5, method="linear"))
        anchor = ANCHOR_HIGH if level > 0.5 else ANCHOR_LOW
        spread = abs(float(np.quantile(self.errors, anchor, method="linear")) - median) / Z_ANCHOR
        extrapolated = median + float(ndtri(level)) * spread
        # A level beyond the sample's reach (rank past n/(n+1)) lies beyond every error seen.
        if level > n / (n + 1.0):
            return max(extrapolated, float(self.errors[-1]))
        if level < 1.0 / (n + 1.0):
            return min(extrapolated, float(self.errors[0]))
        return extrapolated

    def apply(self, quantiles: dict[float, np.ndarray], levels: Sequence[float]) -> dict[float, np.ndarray]:
        """Calibrated quantiles at ``levels`` from a model's quantiles (which include ``SPREAD_LEVELS``)."""
        if self.n == 0:
            return {lvl: quantiles[lvl] for lvl in levels}
        m, w = centre_and_spread(quantiles)
        out: dict[float, np.ndarray] = {}
        running = None
        for lvl in sorted(levels):
            q = np.maximum(np.expm1(m + self.error_quantile(lvl) * w), 0.0)
            running = q if running is None else np.maximum(running, q)
            out[lvl] = running.copy()
        return out

    def describe(self) -> dict[str, object]:
        if self.n == 0:
            return {"method": "none: the model's own intervals", "errors": 0}
        return {"method": "empirical quantiles of standardised log errors in the backtest", "errors": self.n,
                "error_q05": self.error_quantile(0.05), "error_q50": self.error_quantile(0.5),
                "error_q95": self.error_quantile(0.95)}

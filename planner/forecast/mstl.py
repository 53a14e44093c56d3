"""Multiple seasonal-trend decomposition (MSTL) on ``log(1 + x)``, an ARIMA on what is left.

On the trailing ``window_hours`` (8 weeks) of ``y_t = log1p(x_t)``::

    y_t = s24_t + s168_t + a_t
    (1 - phi B)(1 - B) a_t = (1 + theta B) e_t,     e_t ~ N(0, sigma^2)     (``LONG_ORDER``)

or, on a window shorter than ``STATIONARY_BELOW_HOURS`` (eight weeks), the damped form

    (1 - phi B)(a_t - mu) = (1 + theta B) e_t,   mu the window's mean of a_t   (``SHORT_ORDER``)

An integrated component's forecast variance grows with every hour ahead (``sigma^2 h``
for a random walk): extrapolated a month from two weeks, its q99 reached 22 times the
history's peak. A few weeks cannot tell a drifting level from a level that wanders about
its mean, so a short window gets the mean-reverting form, whose variance levels off at
the series' own; once the window holds eight weeks the level's drift has been seen, and
the integrated form is used.

``s24`` and ``s168`` are the daily and weekly components of an MSTL decomposition of the
filled series (LOESS needs every hour; STL per period, ``iterate`` passes, seasonal LOESS
windows 11 and 15 as in statsmodels' MSTL). The seasonal LOESS is local-constant
(degree 0): the last cycle, the one repeated forward, sits at the end of every
cycle-subseries, where a local line extrapolates the last days' noise into the profile.
The weekly component is used only once the window holds ``weekly_from_hours`` (three
weeks): from two cycles the weekly LOESS passes through every point and absorbs the
noise, and the intervals collapse. The seasonally adjusted
``a_t`` gets an ARIMA(1,1,1) by exact maximum likelihood (Kalman filter; missing and
masked hours are missing observations). The seasonal components are repeated forward from
their last cycle; the ARIMA forecast gives the mean and variance on the log scale, and
quantiles are back-transformed (:mod:`planner.forecast.log_gaussian`).

The LOESS smoothers of the trend and low-pass steps are evaluated every
``ceil(window / 10)`` points and interpolated in between (R's ``stl`` default), which
makes the weekly decomposition several times cheaper than evaluating every point.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from statsmodels.tsa.seasonal import STL
from statsmodels.tsa.statespace.sarimax import SARIMAX
from threadpoolctl import threadpool_limits

from planner.forecast.forecaster import FitFailure, SeriesForecast, SeriesHistory
from planner.forecast.log_gaussian import LogWindow, back_transform, log_window

SEASONAL_WINDOWS = {24: 11, 168: 15}
LONG_ORDER = (1, 1, 1)
SHORT_ORDER = (1, 0, 1)
STATIONARY_BELOW_HOURS = 8 * 168
SEASONAL_DEG = 0


def _odd(n: float) -> int:
    k = int(math.ceil(n))
    return k if k % 2 else k + 1


def _stl(y: np.ndarray, period: int) -> np.ndarray:
    """The seasonal component of one STL pass with R's default LOESS jumps."""
    seasonal = SEASONAL_WINDOWS[period]
    trend = _odd(1.5 * period / (1 - 1.5 / seasonal))
    low_pass = _odd(period + 1)
    result = STL(y, period=period, seasonal=seasonal, trend=trend, low_pass=low_pass,
                 seasonal_deg=SEASONAL_DEG, seasonal_jump=math.ceil(seasonal / 10), trend_jump=math.ceil(trend / 10),
                 low_pass_jump=math.ceil(low_pass / 10)).fit()
    return np.asarray(result.seasonal, dtype=float)


def decompose(y: np.ndarray, periods: Sequence[int], iterate: int = 2) -> np.ndarray:
    """Seasonal components (one row per period) by MSTL's back-fitting loop."""
    seasonal = np.zeros((len(periods), y.size))
    deseasonalised = y.copy()
    for _ in range(iterate if len(periods) > 1 else 1):
        for i, period in enumerate(periods):
            deseasonalised = deseasonalised + seasonal[i]
            seasonal[i] = _stl(deseasonalised, period)
            deseasonalised = deseasonalised - seasonal[i]
    return seasonal


@dataclass
class MstlFit:
    """The seasonal profiles repeated forward and the ARIMA of the adjusted series."""

    periods: tuple[int, ...]
    profiles: list[np.ndarray]
    arima: Any  # statsmodels MLEResults (in-process only)
    history_max: float
    order: tuple[int, int, int] = LONG_ORDER
    level: float = 0.0

    def log_forecast(self, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        fc = self.arima.get_forecast(horizon)
        m = np.asarray(fc.predicted_mean, dtype=float) + self.level
        h = np.arange(horizon)
        for period, profile in zip(self.periods, self.profiles, strict=True):
            m = m + profile[h % period]
        return m, np.asarray(fc.var_pred_mean, dtype=float)

    @property
    def model_used(self) -> str:
        periods = ",".join(str(p) for p in self.periods)
        p, d, q = self.order
        return f"mstl({periods})+arima({p},{d},{q}){'+mean' if d == 0 else ''} log1p"

    def describe(self) -> dict[str, Any]:
        params = dict(zip(self.arima.model.param_names, self.arima.params, strict=True))
        return {"periods": list(self.periods), "arima_order": list(self.order), "transform": "log1p",
                "n_obs": int(self.arima.nobs),
                **{name: float(f"{float(value):.6g}") for name, value in params.items()}}


def order_for(window_hours: int) -> tuple[int, int, int]:
    """The ARIMA order of the module docstring: mean-reverting on a short window, integrated on a long one."""
    return SHORT_ORDER if window_hours < STATIONARY_BELOW_HOURS else LONG_ORDER


def _fit_adjusted(adjusted: np.ndarray, order: tuple[int, int, int], maxiter: int) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = SARIMAX(adjusted, order=order, trend="n", concentrate_scale=True).fit(disp=False, maxiter=maxiter)
    except (ValueError, np.linalg.LinAlgError) as exc:
        raise FitFailure(f"ARIMA{order} on the adjusted series failed: {str(exc)[:200]}") from None
    if not res.mle_retvals.get("converged", False) or not np.all(np.isfinite(res.params)):
        raise FitFailure(f"ARIMA{order} on the adjusted series did not converge")
    return res


@dataclass(frozen=True, eq=False)
class MstlForecaster:
    """MSTL plus an ARIMA on the adjusted series as a :class:`~planner.forecast.forecaster.Forecaster`."""

    window_hours: int = 8 * 168
    weekly_from_hours: int = 3 * 168
    iterate: int = 2
    maxiter: int = 50
    max_growth_factor: float = 10.0
    fitted: MstlFit | None = None

    @property
    def name(self) -> str:
        return "mstl"

    def fit(self, history: SeriesHistory) -> MstlForecaster:
        window = log_window(history, self.window_hours)
        with threadpool_limits(limits=1):
            return replace(self, fitted=self._fit(window))

    def _fit(self, window: LogWindow) -> MstlFit:
        periods = (24, 168) if window.y.size >= self.weekly_from_hours else (24,)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                seasonal = decompose(window.y, periods, self.iterate)
        except (ValueError, np.linalg.LinAlgError) as exc:
            raise FitFailure(f"MSTL decomposition failed: {str(exc)[:200]}") from None
        adjusted = np.where(window.observed, window.y - seasonal.sum(axis=0), np.nan)
        order = order_for(window.y.size)
        # The mean-reverting form reverts to the window's mean level (mu), taken out before the fit.
        level = float(np.nanmean(adjusted)) if order[1] == 0 else 0.0
        arima = _fit_adjusted(adjusted - level, order, self.maxiter)
        profiles = [seasonal[i, -period:] for i, period in enumerate(periods)]
        return MstlFit(periods, profiles, arima, window.history_max, order, level)

    def predict(self, horizon: int, levels: Sequence[float]) -> SeriesForecast:
        if self.fitted is None:
            raise RuntimeError("MstlForecaster.predict called before fit")
        m, v = self.fitted.log_forecast(horizon)
        mean, quants = back_transform(m, v, list(levels), self.fitted.history_max, self.max_growth_factor)
        return SeriesForecast(mean, quants, self.fitted.model_used, details=self.fitted.describe())

"""Exponential smoothing with a damped additive trend and an additive season, on ``log(1 + x)``.

The model (ETS(A,Ad,A) in Hyndman's taxonomy) on the trailing ``window_hours`` of
``y_t = log1p(x_t)`` (the filled series: the recursions need every hour)::

    y_t = l_{t-1} + phi b_{t-1} + s_{t-m} + e_t,      e_t ~ N(0, sigma^2)
    l_t = l_{t-1} + phi b_{t-1} + alpha e_t
    b_t = phi b_{t-1} + beta e_t
    s_t = s_{t-m} + gamma e_t

with a season of ``m = 24`` hours, or ``m = 168`` once the window holds
``weekly_from_hours`` (three weeks): the weekly season then carries the daily shape of
every weekday. The damping ``phi < 1`` makes the trend's contribution at horizon h
``b phi (1 - phi^h) / (1 - phi)``, bounded however far ahead, so a short window's slope is
never extrapolated linearly.

``alpha`` is bounded by ``max_alpha``: the level should move over days, not hours. Left
free, the likelihood of one-hour-ahead errors takes hour-to-hour autocorrelation for
level changes (alpha near 1), and the forecast variance ``sigma^2 (1 + sum_j c_j^2)``
then grows like a random walk's over a two-week horizon, which makes the log-normal
mean and the upper quantiles explode (``docs/decisions/0022-forecast-candidate-models.md``).

Initial states come from statsmodels' heuristic (a classical decomposition of the first
cycles), so only alpha, beta, gamma and phi are estimated (maximum likelihood, a
deterministic optimiser). The h-step forecast is Gaussian on the log scale with the
model's analytic variance; quantiles and the mean are back-transformed
(:mod:`planner.forecast.log_gaussian`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from statsmodels.tsa.exponential_smoothing.ets import ETSModel
from threadpoolctl import threadpool_limits

from planner.forecast.forecaster import FitFailure, SeriesForecast, SeriesHistory
from planner.forecast.log_gaussian import back_transform, log_window


@dataclass
class EtsFit:
    """A fitted ETS: its statsmodels results (in-process only) and what the metadata reports."""

    results: Any
    season: int
    n_obs: int
    history_max: float

    def log_forecast(self, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        pred = self.results.get_prediction(start=self.n_obs, end=self.n_obs + horizon - 1)
        return np.asarray(pred.predicted_mean, dtype=float), np.asarray(pred.forecast_variance, dtype=float)

    @property
    def model_used(self) -> str:
        return f"ets(A,Ad,A)(m={self.season},phi={float(self.results.phi):.3f}) log1p"

    def describe(self) -> dict[str, Any]:
        params = dict(zip(self.results.model.param_names, self.results.params, strict=False))
        return {"season_hours": self.season, "transform": "log1p", "n_obs": self.n_obs,
                **{name: float(f"{float(value):.6g}") for name, value in params.items()
                   if name.startswith(("smoothing", "damping"))}}


def fit_ets(y: np.ndarray, season: int, max_alpha: float, maxiter: int = 200) -> EtsFit:
    """ETS(A,Ad,A) with season ``season`` on the complete series ``y``.

    Raises FitFailure when the optimiser does not converge or statsmodels refuses the series.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ETSModel(pd.Series(y), error="add", trend="add", damped_trend=True, seasonal="add",
                             seasonal_periods=season, initialization_method="heuristic",
                             bounds={"smoothing_level": (1e-4, max_alpha)})
            results = model.fit(disp=False, maxiter=maxiter)
    except (ValueError, np.linalg.LinAlgError) as exc:
        raise FitFailure(f"ETS fit failed: {str(exc)[:200]}") from None
    if not results.mle_retvals.get("converged", False) or not np.all(np.isfinite(results.params)):
        raise FitFailure("ETS fit did not converge")
    return EtsFit(results, season, int(y.size), 0.0)


@dataclass(frozen=True, eq=False)
class EtsForecaster:
    """Damped-trend seasonal exponential smoothing as a :class:`~planner.forecast.forecaster.Forecaster`."""

    window_hours: int = 8 * 168
    weekly_from_hours: int = 3 * 168
    max_alpha: float = 0.05
    max_growth_factor: float = 10.0
    fitted: EtsFit | None = None

    @property
    def name(self) -> str:
        return "ets"

    def fit(self, history: SeriesHistory) -> EtsForecaster:
        window = log_window(history, self.window_hours)
        season = 168 if window.y.size >= self.weekly_from_hours else 24
        with threadpool_limits(limits=1):
            fitted = fit_ets(window.y, season, self.max_alpha)
        return replace(self, fitted=replace(fitted, history_max=window.history_max))

    def predict(self, horizon: int, levels: Sequence[float]) -> SeriesForecast:
        if self.fitted is None:
            raise RuntimeError("EtsForecaster.predict called before fit")
        m, v = self.fitted.log_forecast(horizon)
        mean, quants = back_transform(m, v, list(levels), self.fitted.history_max, self.max_growth_factor)
        return SeriesForecast(mean, quants, self.fitted.model_used, details=self.fitted.describe())

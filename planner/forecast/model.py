"""One series, one model: dynamic harmonic regression in log space with ARMA errors.

The model: a regression fitted to the trailing ``window_hours`` (24 weeks) of one
hourly series ``x_t``, and an ARMA fitted to the last ``arma_window_hours`` (8
weeks) of its residuals::

    y_t = log(1 + x_t)
    y_t = b0 + b1*tau_t                                          (level and growth)
          + sum_{k=1..K} [a_k sin(2 pi k t/24)  + c_k cos(2 pi k t/24)]     (daily)
          + sum_{j in J*} [g_j sin(2 pi j t/168) + h_j cos(2 pi j t/168)]   (weekly)
          + u_t
    phi(B) u_t = theta(B) e_t,   e_t ~ N(0, sigma^2),   ARMA(p, q)

``t`` is the absolute hour (hours since 1970-01-01 UTC, taken modulo the period) so
that phases mean the same hour of day and of week in every series; ``tau`` is time
in weeks from the window's last hour. The weekly set ``J* = {1..J} minus multiples
of 7`` skips the weekly harmonics that coincide with daily ones (168/24 = 7). Weekly
harmonics next to 7k let the daily shape differ between weekdays and weekends.

Why this model, its windows, and the alternatives measured against it (MSTL + ARIMA,
SARIMA, the additive form): ``docs/decisions/0004-forecast-harmonic-regression-with-arma-errors.md``.

Short histories. The model fits from ``MIN_OBSERVED_HOURS`` (7 days) observed hours,
whatever ``ModelSpec.min_history_hours`` says (that minimum is the selection layer's:
which series get the model at all). Under two weeks of window only daily harmonics are
candidates; weekly ones from two weekly cycles on. On a window under
``SHORT_WINDOW_WEEKS`` (8 weeks) the fitted trend is damped ahead of the window end: its
contribution at ``h`` weeks is ``b1 phi (1 - phi^h) / (1 - phi)`` with ``phi =
TREND_DAMPING_PER_WEEK``, so two weeks of growth add at most a third of a week's more
(measured on 7- and 14-day cuts of the demo and on ServeGen,
``docs/decisions/0022-forecast-candidate-models.md``); a longer window keeps it linear.

Order selection (all by an information criterion, deterministic):
1. Harmonics K, J and the trend switch by AIC of the OLS fit with an AR(1)
   correction for the residual autocorrelation (plain OLS AIC overfits harmonics
   when errors are autocorrelated):  AIC = n' log(s_e^2) + 2 (k + 2),  where
   e_t = r_t - rho r_{t-1} over consecutive observed pairs.
2. ARMA (p, q) screened by Hannan-Rissanen (regressions only, cheap):
   AIC = n log(sigma_HR^2) + 2 (p + q).
3. The best ``n_exact`` screened orders are re-estimated by exact Gaussian
   maximum likelihood (Kalman filter; missing and masked hours are missing
   observations, not zeros), and the lowest exact AIC among *converged* fits wins.
   Reported AIC = -2 llf + 2 (p + q + 1 + k_regression).
The exact stage is bounded by ``n_exact`` fits of at most ``maxiter`` optimiser iterations each,
never by the clock, so the same series gives the same model on a busy machine as on a quiet one.

Forecast and quantiles. On the log scale the h-step forecast is Gaussian with mean
``m_h = x_h' b + E[u_{T+h}]`` and variance
``v_h = Var_ARMA(h) + x_h' (X'X)^-1 x_h * s_LR^2``, the second term being the
regression-parameter uncertainty with the ARMA long-run variance
``s_LR^2 = sigma^2 (theta(1)/phi(1))^2`` (capped at n * Var(u)). Because
``x = exp(y) - 1`` is monotone, quantiles transform exactly:
``Q_x(tau) = exp(m_h + z_tau sqrt(v_h)) - 1`` (then clipped at 0): quantiles are
the model's own prediction intervals back-transformed, no simulation needed. The
mean is the log-normal mean ``exp(m_h + v_h/2) - 1``, clipped at 0.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.special import ndtri
from statsmodels.tsa.arima.estimators.hannan_rissanen import hannan_rissanen
from statsmodels.tsa.statespace.sarimax import SARIMAX
from threadpoolctl import threadpool_limits

from planner.contracts import DEFAULT_MAX_GROWTH
from planner.forecast.forecaster import FitFailure, SeriesForecast, SeriesHistory
from planner.forecast.log_gaussian import MIN_OBSERVED_HOURS  # one floor for every model: 7 days observed

WEEKLY_FROM_HOURS = 2 * 168
SHORT_WINDOW_WEEKS = 8.0
TREND_DAMPING_PER_WEEK = 0.25


@dataclass(frozen=True)
class ModelSpec:
    """Settings of the forecast step: the history a series needs before it gets the selected
    forecaster (``min_history_hours``), the harmonic model's search space and budgets, and the
    multiple of its history's peak no forecast value may exceed (``max_growth``,
    :mod:`planner.forecast.growth`), and whether partly collected hours are masked or kept as
    demand (``partial_hours``: ``"mask"`` or ``"keep"``, :mod:`planner.forecast.quality` rule 6b).
    ``max_growth_factor`` is the harmonic and decomposition models' own sanity check: a median
    path above it is a failed fit, not a forecast.

    The defaults and their measurements: ``docs/decisions/0004-forecast-harmonic-regression-with-arma-errors.md``.
    """

    window_hours: int = 24 * 168
    arma_window_hours: int = 8 * 168
    min_history_hours: int = 168
    daily_grid: tuple[int, ...] = (3, 5, 8, 11)
    weekly_grid: tuple[int, ...] = (0, 3, 6, 10, 13, 20)
    trend_options: tuple[bool, ...] = (False, True)
    arma_orders: tuple[tuple[int, int], ...] = (
        (1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (1, 2), (2, 2), (3, 1), (0, 1), (0, 0),
    )
    n_exact: int = 2
    maxiter: int = 50
    max_growth_factor: float = 10.0
    max_growth: float = DEFAULT_MAX_GROWTH
    partial_hours: str = "mask"

    def as_dict(self) -> dict[str, Any]:
        return {
            "window_hours": self.window_hours,
            "arma_window_hours": self.arma_window_hours,
            "min_history_hours": self.min_history_hours,
            "daily_grid": list(self.daily_grid),
            "weekly_grid": list(self.weekly_grid),
            "trend_options": list(self.trend_options),
            "arma_orders": [list(o) for o in self.arma_orders],
            "n_exact": self.n_exact,
            "maxiter": self.maxiter,
            "max_growth_factor": self.max_growth_factor,
            "max_growth": self.max_growth,
            "partial_hours": self.partial_hours,
        }


@dataclass
class FittedModel:
    """Everything needed to forecast, plus what the metadata reports."""

    t_end_abs: int
    daily: int
    weekly: int
    trend: bool
    order: tuple[int, int]
    beta: np.ndarray
    xtx_inv: np.ndarray
    s2_long_run: float
    arma: Any  # statsmodels MLEResults (in-process only)
    aic: float
    sigma2: float
    n_obs: int
    history_max: float
    trend_damping: float = 1.0
    candidates: list[dict[str, Any]] = field(default_factory=list)
    regression_candidates: int = 0

    @property
    def model_used(self) -> str:
        p, q = self.order
        trend = ""
        if self.trend:
            trend = "+trend" if self.trend_damping == 1.0 else f"+damped_trend(phi={self.trend_damping:g}/week)"
        return f"fourier(d={self.daily},w={self.weekly}){trend}+arima({p},0,{q}) log1p"

    def describe(self) -> dict[str, Any]:
        return {
            "daily_harmonics": self.daily,
            "weekly_harmonics": self.weekly,
            "trend": self.trend,
            **({"trend_damping_per_week": self.trend_damping} if self.trend and self.trend_damping != 1.0 else {}),
            "arima_order": [self.order[0], 0, self.order[1]],
            "transform": "log1p",
            "aic": round(float(self.aic), 4),
            "sigma2_log": float(f"{self.sigma2:.6g}"),
            "n_obs": self.n_obs,
            "arma_candidates": self.candidates,
            "regression_candidates": self.regression_candidates,
        }


def weekly_set(weekly: int) -> list[int]:
    """Weekly harmonics 1..``weekly`` without the multiples of 7, which repeat daily ones."""
    return [j for j in range(1, weekly + 1) if j % 7]


def design(t_abs: np.ndarray, t_end_abs: int, daily: int, weekly: int, trend: bool) -> np.ndarray:
    """Regression matrix for absolute hours ``t_abs`` (see the module docstring).

    Columns: intercept, the trend when asked, then a sine and a cosine per daily and per
    weekly harmonic. The phase is ``(2 pi (t mod period)) / period``, in that order of
    operations: the fitted numbers depend on it to the last bit
    (``docs/decisions/0009-forecast-fourier-terms.md``).
    """
    cols = [np.ones(t_abs.size)]
    if trend:
        cols.append((t_abs - t_end_abs) / 168.0)
    for period, ks in ((24, range(1, daily + 1)), (168, weekly_set(weekly))):
        phase = 2.0 * np.pi * (t_abs % period) / period
        for k in ks:
            cols.append(np.sin(k * phase))
            cols.append(np.cos(k * phase))
    return np.column_stack(cols)


def _column_index(daily: int, weekly: int, trend: bool, max_daily: int, max_trend: bool) -> np.ndarray:
    """Columns of ``design(.., daily, weekly, trend)`` inside the largest design matrix."""
    idx = [0]
    base = 1
    if max_trend:
        if trend:
            idx.append(1)
        base = 2
    idx += list(range(base, base + 2 * daily))
    base += 2 * max_daily
    idx += list(range(base, base + 2 * len(weekly_set(weekly))))
    return np.array(idx)


def _select_regression(y: np.ndarray, obs: np.ndarray, t_abs: np.ndarray, t_end: int,
                       spec: ModelSpec) -> tuple[int, int, bool, list[dict[str, Any]]]:
    """Pick K, J and trend by the AR(1)-corrected AIC of step 1.

    Every candidate is a column subset of one largest design, so the Gram matrix
    ``X'X`` and ``X'y`` are formed once and each candidate costs one small solve.
    """
    pairs = obs[1:] & obs[:-1]
    # Weekly harmonics need two full weekly cycles to be told apart from level changes.
    weekly_grid = spec.weekly_grid if y.size >= WEEKLY_FROM_HOURS else (0,)
    max_daily, max_weekly, max_trend = max(spec.daily_grid), max(weekly_grid), any(spec.trend_options)
    X_full = design(t_abs, t_end, max_daily, max_weekly, max_trend)
    Xo = X_full[obs]
    gram, xty = Xo.T @ Xo, Xo.T @ y[obs]
    best: tuple[float, int, int, bool] | None = None
    tried = []
    for trend in spec.trend_options:
        for daily in spec.daily_grid:
            for weekly in weekly_grid:
                cols = _column_index(daily, weekly, trend, max_daily, max_trend)
                k = cols.size
                if k + 10 > obs.sum():
                    continue
                try:
                    beta = np.linalg.solve(gram[np.ix_(cols, cols)], xty[cols])
                except np.linalg.LinAlgError:
                    continue
                r = np.where(obs, y - X_full[:, cols] @ beta, 0.0)
                a, b = r[1:][pairs], r[:-1][pairs]
                rho = float(np.clip(a @ b / max(b @ b, 1e-300), -0.999, 0.999))
                s2 = float(np.mean((a - rho * b) ** 2))
                aic = a.size * np.log(max(s2, 1e-300)) + 2 * (k + 2)
                tried.append({"daily": daily, "weekly": weekly, "trend": trend, "aic_ar1": round(float(aic), 3)})
                if best is None or aic < best[0] - 1e-9:
                    best = (aic, daily, weekly, trend)
    if best is None:
        raise FitFailure("too few observations for any harmonic regression")
    return best[1], best[2], best[3], tried


def _screen_arma(r0: np.ndarray, spec: ModelSpec) -> list[tuple[float, tuple[int, int], np.ndarray | None]]:
    """Hannan-Rissanen screening AIC for every candidate order (step 2), with its estimates."""
    n = r0.size
    scored = []
    for order in spec.arma_orders:
        p, q = order
        start: np.ndarray | None
        if p == 0 and q == 0:
            s2 = float(np.mean(r0 ** 2))
            start = np.array([])
        else:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est, _ = hannan_rissanen(r0, ar_order=p, ma_order=q, demean=False)
                s2 = float(est.sigma2)
                start = np.concatenate([est.ar_params, est.ma_params])
                if not (est.is_stationary and est.is_invertible):
                    start = None
            except (ValueError, np.linalg.LinAlgError):
                continue
        if not np.isfinite(s2) or s2 <= 0:
            continue
        scored.append((n * np.log(s2) + 2 * (p + q), order, start))
    scored.sort(key=lambda item: item[0])  # stable: ties keep the candidate-list order
    return scored


def _long_run_variance(params_ar: np.ndarray, params_ma: np.ndarray, sigma2: float, var_u: float, n: int) -> float:
    phi1 = 1.0 - float(np.sum(params_ar))
    theta1 = 1.0 + float(np.sum(params_ma))
    if abs(phi1) < 1e-12:
        return n * var_u
    return float(min(sigma2 * (theta1 / phi1) ** 2, n * var_u))


def fit(values: np.ndarray, t_start_abs: int, spec: ModelSpec = ModelSpec()) -> FittedModel:
    """Fit one series. ``values`` is hourly, NaN where missing or masked.

    ``t_start_abs`` is the absolute hour (hours since the Unix epoch) of ``values[0]``.
    Raises FitFailure with a reason when no candidate converges.

    BLAS runs single-threaded inside: the matrices are small, so threads only add
    contention, and one thread makes the bits independent of the caller.
    """
    with threadpool_limits(limits=1):
        return _fit(values, t_start_abs, spec)


def _fit(values: np.ndarray, t_start_abs: int, spec: ModelSpec) -> FittedModel:
    values = np.asarray(values, dtype=float)
    if values.size > spec.window_hours:
        t_start_abs += values.size - spec.window_hours
        values = values[-spec.window_hours:]
    obs = ~np.isnan(values)
    if obs.sum() < MIN_OBSERVED_HOURS:
        raise FitFailure(f"only {int(obs.sum())} observed hours in the fit window, need {MIN_OBSERVED_HOURS}")
    first = int(np.argmax(obs))
    values, obs, t_start_abs = values[first:], obs[first:], t_start_abs + first
    n = values.size
    t_abs = t_start_abs + np.arange(n, dtype=np.int64)
    t_end = int(t_abs[-1])
    y = np.log1p(np.where(obs, values, 0.0))
    if float(np.std(y[obs])) < 1e-9:
        raise FitFailure("constant series: nothing for a seasonal model to learn")

    daily, weekly, trend, reg_tried = _select_regression(y, obs, t_abs, t_end, spec)
    X = design(t_abs, t_end, daily, weekly, trend)
    Xo = X[obs]
    beta, *_ = np.linalg.lstsq(Xo, y[obs], rcond=None)
    xtx_inv = np.linalg.pinv(Xo.T @ Xo)
    resid_all = np.where(obs, y - X @ beta, np.nan)
    resid = resid_all[-spec.arma_window_hours:]

    screened = _screen_arma(np.nan_to_num(resid, nan=0.0), spec)
    if not screened:
        raise FitFailure("no ARMA order could be screened")
    best: tuple[float, tuple[int, int], Any] | None = None
    candidates: list[dict[str, Any]] = []
    for screen_aic, order, start_params in screened[: spec.n_exact]:
        p, q = order
        model = SARIMAX(resid, order=(p, 0, q), trend="n", concentrate_scale=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if p == 0 and q == 0:  # white noise: nothing to optimise, sigma^2 is concentrated out
                    res, converged = model.filter(np.empty(0)), True
                else:
                    res = model.fit(start_params=start_params, disp=False, maxiter=spec.maxiter)
                    converged = bool(res.mle_retvals.get("converged", False))
        except (ValueError, np.linalg.LinAlgError) as exc:
            candidates.append({"order": [p, 0, q], "aic_screen": round(float(screen_aic), 3), "error": str(exc)[:200]})
            continue
        finite = bool(np.all(np.isfinite(res.params))) and np.isfinite(res.llf)
        k_total = len(res.params) + 1 + X.shape[1]  # + 1: the concentrated-out sigma^2
        aic = -2.0 * float(res.llf) + 2.0 * k_total
        candidates.append({"order": [p, 0, q], "aic_screen": round(float(screen_aic), 3),
                           "aic": round(aic, 4) if finite else None, "converged": bool(converged and finite)})
        if converged and finite and (best is None or aic < best[0] - 1e-9):
            best = (aic, order, res)
    if best is None:
        raise FitFailure("ARMA fit did not converge for any candidate order "
                         + ", ".join(f"({c['order'][0]},0,{c['order'][2]})" for c in candidates))
    aic, order, res = best
    params = dict(zip(res.model.param_names, res.params, strict=True))
    ar = np.array([params[f"ar.L{i}"] for i in range(1, order[0] + 1)])
    ma = np.array([params[f"ma.L{i}"] for i in range(1, order[1] + 1)])
    sigma2 = float(res.scale)
    var_u = float(np.nanvar(resid))
    fitted = FittedModel(
        t_end_abs=t_end, daily=daily, weekly=weekly, trend=trend, order=order, beta=beta,
        xtx_inv=xtx_inv, s2_long_run=_long_run_variance(ar, ma, sigma2, var_u, int(obs.sum())),
        arma=res, aic=aic, sigma2=sigma2, n_obs=int(obs.sum()), history_max=float(np.nanmax(values)),
        trend_damping=trend_damping(n), candidates=candidates, regression_candidates=len(reg_tried),
    )
    return fitted


def trend_damping(window_hours: int) -> float:
    """Weekly damping of the trend's extrapolation: 1 (linear) for a window of at least
    ``SHORT_WINDOW_WEEKS`` weeks, ``TREND_DAMPING_PER_WEEK`` for a shorter one."""
    return 1.0 if window_hours >= SHORT_WINDOW_WEEKS * 168 else TREND_DAMPING_PER_WEEK


def damped_weeks(hours: np.ndarray, phi: float) -> np.ndarray:
    """The trend regressor ``tau`` ahead of the window end: ``h`` weeks when ``phi`` is 1, else
    ``phi (1 - phi^h) / (1 - phi)``, the damped trend's contribution at horizon ``h`` weeks
    (it grows like ``h`` at first and never beyond ``phi / (1 - phi)`` weeks of growth)."""
    weeks = hours / 168.0
    if phi >= 1.0:
        return weeks
    out: np.ndarray = phi * (1.0 - phi ** weeks) / (1.0 - phi)
    return out


def log_forecast(fitted: FittedModel, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of ``log(1 + x)`` for hours 1..horizon after the window end.

    On a short window the trend column is damped ahead of the window end
    (:func:`trend_damping`): two or three weeks of growth say little about the next weeks.
    """
    t_f = fitted.t_end_abs + np.arange(1, horizon + 1, dtype=np.int64)
    X_f = design(t_f, fitted.t_end_abs, fitted.daily, fitted.weekly, fitted.trend)
    if fitted.trend and fitted.trend_damping < 1.0:
        X_f[:, 1] = damped_weeks(np.arange(1, horizon + 1, dtype=float), fitted.trend_damping)
    arma_fc = fitted.arma.get_forecast(horizon)
    m = X_f @ fitted.beta + np.asarray(arma_fc.predicted_mean)
    v_param = np.einsum("ij,jk,ik->i", X_f, fitted.xtx_inv, X_f) * fitted.s2_long_run
    v = np.asarray(arma_fc.var_pred_mean) + np.maximum(v_param, 0.0)
    return m, v


def forecast(fitted: FittedModel, horizon: int, levels: list[float], *,
             max_growth_factor: float = ModelSpec.max_growth_factor) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Mean and quantiles on the original scale (never negative, monotone in level).

    Raises FitFailure when the forecast is not finite or implausible (mean above
    ``max_growth_factor`` times the largest value in the fit window).
    """
    m, v = log_forecast(fitted, horizon)
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(v))):
        raise FitFailure("forecast is not finite")
    sd = np.sqrt(v)
    mean = np.maximum(np.expm1(m + 0.5 * v), 0.0)
    ceiling = max_growth_factor * max(fitted.history_max, 1.0)
    if float(np.max(np.expm1(m))) > ceiling:
        raise FitFailure(f"implausible forecast: median path exceeds {max_growth_factor:g}x the window maximum")
    quants = {lvl: np.maximum(np.expm1(m + float(ndtri(lvl)) * sd), 0.0) for lvl in sorted(levels)}
    return mean, quants


@dataclass(frozen=True, eq=False)
class HarmonicForecaster:
    """The harmonic model as a :class:`~planner.forecast.forecaster.Forecaster`."""

    spec: ModelSpec = ModelSpec()
    fitted: FittedModel | None = None

    @property
    def name(self) -> str:
        return "harmonic"

    def fit(self, history: SeriesHistory) -> HarmonicForecaster:
        return replace(self, fitted=fit(history.values, history.t_start_abs, self.spec))

    def predict(self, horizon: int, levels: Sequence[float]) -> SeriesForecast:
        if self.fitted is None:
            raise RuntimeError("HarmonicForecaster.predict called before fit")
        mean, quants = forecast(self.fitted, horizon, list(levels), max_growth_factor=self.spec.max_growth_factor)
        return SeriesForecast(mean, quants, self.fitted.model_used, details=self.fitted.describe())


__all__ = ["FitFailure", "FittedModel", "HarmonicForecaster", "ModelSpec", "design", "fit", "forecast",
           "log_forecast"]

"""Rolling-origin backtest of the selected forecaster and both seasonal-naive baselines, in one run.

Windows. With ``n`` hours of history, horizon ``H``, ``W = 3`` windows
and ``M`` the forecaster's minimum history (``ModelSpec.min_history_hours``, 2 weeks, so
that every window tests the forecaster rather than its short-history fallback), the
window length is ``L = H`` when ``n >= M + W*H``; otherwise
``L = min(H, floor((n - M) / W))`` rounded down to whole days (the stated
fraction ``L/H`` is recorded), and with less than one day per window the backtest
is skipped with a reason. Origins are ``o_i = n - (W - i) L``, ``i = 0..W-1``: the
windows tile the last ``W L`` hours, and each forecast uses only data before its
origin (the same code path as the final forecast, fallbacks included).

Scoring uses only hours that were really observed (missing or outage-masked hours
are not demand and are not scored). For a window with actuals ``x``, point
forecast ``f`` (the median forecast ``Q(0.5)``: absolute errors are smallest at the median,
and a log-scale model's mean sits above it) and quantile forecasts ``Q(tau)``:

- MASE = mean|x - f| / s, with ``s`` the in-sample mean absolute error of the
  **weekly (168 h)** seasonal naive over the trailing 8 weeks before the origin
  (one scale for model and baselines alike, so their MASE are directly comparable;
  the daily naive's when no weekly pair was observed, and 1 when it is 0);
- sMAPE = mean 200 |x - f| / (|x| + |f|)  (in percent; 0 where both are 0);
- pinball loss at tau: mean of max(tau (x - Q), (tau - 1)(x - Q)), in the
  measure's units; ``pinball_scaled`` divides by ``s`` so series can be averaged;
- coverage80 = share of hours with Q(0.10) <= x <= Q(0.90);
  coverage90 = share with Q(0.05) <= x <= Q(0.95);
- below, per quantile level tau: share of hours with x <= Q(tau) (near tau when
  calibrated; the report flags a q99 well under 99 %).

Per series, each metric pools the scored hours of all windows. Overall, MASE,
sMAPE and scaled pinball are the mean over series (every series weighs the same);
coverage pools every scored hour of every series.

The metrics are these few lines of numpy rather than a metrics library: the library we
measured defines the MASE scale differently and is far slower per series
(``docs/decisions/0008-forecast-metrics.md``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.contracts import quantile_column
from planner.forecast import baselines
from planner.forecast.fallback import forecast_series
from planner.forecast.forecaster import Forecaster, SeriesHistory

N_WINDOWS = 3
SCALE_PERIOD = 168
SCALE_WINDOW_HOURS = 8 * 168
INTERVAL_LEVELS = (0.05, 0.10, 0.90, 0.95)
POINT_LEVEL = 0.5
"""MASE and sMAPE score the median: the point forecast that minimises absolute error (a log-scale model's
mean sits above it)."""
METHODS = ("model", "naive24", "naive168")
BASELINES: dict[str, Forecaster] = {"naive24": baselines.SeasonalNaive(24), "naive168": baselines.SeasonalNaive(168)}


def window_plan(n_hours: int, horizon: int, min_train_hours: int,
                n_windows: int = N_WINDOWS) -> tuple[int, list[int], str | None]:
    """Window length, origins, and a skip reason (None when the backtest runs)."""
    if n_hours >= min_train_hours + n_windows * horizon:
        length = horizon
    else:
        length = min(horizon, (n_hours - min_train_hours) // n_windows // 24 * 24)
        if length < min(24, horizon):
            return 0, [], (f"history of {n_hours} h is too short for {n_windows} windows of at least "
                           f"{min(24, horizon)} h after {min_train_hours} h of training")
    origins = [n_hours - (n_windows - i) * length for i in range(n_windows)]
    return length, origins, None


def in_sample_scale(filled: np.ndarray, observed: np.ndarray) -> float:
    """Mean absolute weekly-naive error over the trailing 8 weeks (the MASE scale)."""
    err = baselines.naive_errors(filled, observed, SCALE_PERIOD, SCALE_WINDOW_HOURS)
    if err.size == 0:
        err = baselines.naive_errors(filled, observed, 24, SCALE_WINDOW_HOURS)
    scale = float(np.mean(np.abs(err))) if err.size else 0.0
    return scale if scale > 0 else 1.0


def pinball(x: np.ndarray, q: np.ndarray, tau: float) -> np.ndarray:
    diff = x - q
    loss: np.ndarray = np.maximum(tau * diff, (tau - 1.0) * diff)
    return loss


def _smape_terms(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    denom = np.abs(x) + np.abs(f)
    return np.where(denom > 0, 200.0 * np.abs(x - f) / np.where(denom > 0, denom, 1.0), 0.0)


class _Accumulator:
    """Pools the scored hours of all windows for one method of one series."""

    def __init__(self, levels: list[float]):
        self.levels = levels
        self.abs_scaled: list[np.ndarray] = []
        self.smape: list[np.ndarray] = []
        self.pin: dict[float, list[np.ndarray]] = {lvl: [] for lvl in levels}
        self.pin_scaled: dict[float, list[np.ndarray]] = {lvl: [] for lvl in levels}
        self.in80: list[np.ndarray] = []
        self.in90: list[np.ndarray] = []
        self.below: dict[float, list[np.ndarray]] = {lvl: [] for lvl in levels}

    def add(self, x: np.ndarray, mean: np.ndarray, quants: dict[float, np.ndarray], scale: float) -> None:
        self.abs_scaled.append(np.abs(x - mean) / scale)
        self.smape.append(_smape_terms(x, mean))
        for lvl in self.levels:
            loss = pinball(x, quants[lvl], lvl)
            self.pin[lvl].append(loss)
            self.pin_scaled[lvl].append(loss / scale)
            self.below[lvl].append(x <= quants[lvl])
        self.in80.append((quants[0.10] <= x) & (x <= quants[0.90]))
        self.in90.append((quants[0.05] <= x) & (x <= quants[0.95]))

    def result(self) -> dict[str, Any]:
        cat = np.concatenate
        return {
            "mase": float(np.mean(cat(self.abs_scaled))),
            "smape": float(np.mean(cat(self.smape))),
            "pinball": {quantile_column(lvl): float(np.mean(cat(self.pin[lvl]))) for lvl in self.levels},
            "pinball_scaled": {quantile_column(lvl): float(np.mean(cat(self.pin_scaled[lvl]))) for lvl in self.levels},
            "coverage80": float(np.mean(cat(self.in80))),
            "coverage90": float(np.mean(cat(self.in90))),
            "below": {quantile_column(lvl): float(np.mean(cat(self.below[lvl]))) for lvl in self.levels},
            "hours_scored": int(cat(self.in80).size),
        }


def backtest_series(forecaster: Forecaster, history: SeriesHistory, horizon: int, levels: list[float],
                    min_history_hours: int, n_windows: int = N_WINDOWS,
                    max_growth: float | None = None) -> dict[str, Any]:
    """Backtest ``forecaster`` (with its fallbacks) and the baselines on one cleaned series.

    ``min_history_hours`` is the fallback threshold of :func:`forecast_series`, so that
    every window has enough training history for the forecaster itself; ``max_growth`` its
    growth limit, as deployed. Returns the per-series metadata block.
    """
    all_levels = sorted(set(levels) | set(INTERVAL_LEVELS) | {POINT_LEVEL})
    length, origins, skip = window_plan(history.n_hours, horizon, min_history_hours, n_windows)
    if skip:
        return {"skipped": skip}
    acc = {m: _Accumulator(all_levels) for m in METHODS}
    windows: list[dict[str, Any]] = []
    for origin in origins:
        scored = history.observed[origin:origin + length]
        if not scored.any():
            windows.append({"origin_index": origin, "hours_scored": 0})
            continue
        x = history.values[origin:origin + length][scored]
        past = history.head(origin)
        scale = in_sample_scale(past.filled, past.observed)
        model = forecast_series(forecaster, past, length, all_levels, min_history_hours, max_growth)
        runs = {"model": model}
        for name, baseline in BASELINES.items():
            runs[name] = baseline.fit(past).predict(length, all_levels)
        for name, run in runs.items():
            quantiles = {lvl: run.quantiles[lvl][scored] for lvl in all_levels}
            acc[name].add(x, quantiles[POINT_LEVEL], quantiles, scale)
        windows.append({"origin_index": origin, "hours_scored": int(scored.sum()),
                        "model_used": model.model_used, "mase_scale": scale})
    if not any(w["hours_scored"] for w in windows):
        return {"skipped": "no observed hours in any backtest window"}
    out: dict[str, Any] = {"window_hours": length, "windows": windows,
                           "window_fraction_of_horizon": round(length / horizon, 4)}
    for name in METHODS:
        out[name] = acc[name].result()
    return out


def overall(per_series: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine per-series backtests (see the module docstring for the weighting)."""
    done = [b for b in per_series if b and "skipped" not in b]
    if not done:
        return {"series_backtested": 0}
    out: dict[str, Any] = {"series_backtested": len(done)}
    for name in METHODS:
        blocks = [b[name] for b in done if name in b]  # a naive that could not run on a series is left out
        if not blocks:
            continue
        hours = np.array([blk["hours_scored"] for blk in blocks], dtype=float)
        out[name] = {
            "mase": float(np.mean([blk["mase"] for blk in blocks])),
            "smape": float(np.mean([blk["smape"] for blk in blocks])),
            "pinball_scaled": {k: float(np.mean([blk["pinball_scaled"][k] for blk in blocks]))
                               for k in blocks[0]["pinball_scaled"]},
            "coverage80": float(np.average([blk["coverage80"] for blk in blocks], weights=hours)),
            "coverage90": float(np.average([blk["coverage90"] for blk in blocks], weights=hours)),
        }
    naives = [out[name]["mase"] for name in ("naive24", "naive168") if name in out]
    best_naive = min(naives, default=0.0)
    out["mase_ratio_vs_best_naive"] = out["model"]["mase"] / best_naive if best_naive > 0 else None
    return out

"""How wrong was last month's forecast: per-series error against the demand that then happened.

For a series with actual demand a_t and last month's forecast mean f_t over the hours
t in H where both exist (and t is in last month, when the month is given, and before the
report's as-of time):

    bias %   = 100 (Σ f_t − Σ a_t) / Σ a_t              (positive: over-forecast)
    MAPE %   = 100 mean_{t in H, a_t > 0} |a_t − f_t| / a_t   (hours with a_t = 0 are left out)
    WAPE %   = 100 Σ |a_t − f_t| / Σ a_t                 (volume-weighted; used for the total)
    MASE     = mean_H |a_t − f_t| / s,  s = mean_u |y_u − y_{u−m}|

The MASE scale s is the in-sample error of the seasonal naive with period m over the
history before the forecast's first hour (at most the last 8 weeks), the same scale
``planner forecast`` backtests with: m = 168 h when at least 168 + 24 hours precede the
forecast, else m = 24 h when at least 48 do, else MASE is not computed. MASE < 1 means
the forecast beat what "same hour last week" would have scored in sample.

Interval calibration: the shares of hours with a_t ≤ q90_t and a_t ≤ q99_t, which a
calibrated forecast puts near 90 % and 99 %.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.placement.window import PlanningWindow
from planner.report.inputs import SERIES_KEY, present, utc

SCALE_WINDOW_HOURS = 8 * 168
MIN_PAIRS = 24

ACCURACY_COLUMNS = ("region", "model", "traffic_class", "hours_compared", "actual", "forecast", "bias_pct",
                    "mape_pct", "mase", "mase_scale", "below_q90_pct", "below_q99_pct")


def _hourly(history: pd.DataFrame, measure: str) -> pd.DataFrame:
    frame = history[[*SERIES_KEY, "ts", measure]].copy()
    for column in SERIES_KEY:
        frame[column] = frame[column].astype(str)
    frame["ts"] = utc(frame["ts"]).dt.floor("h")
    frame[measure] = pd.to_numeric(frame[measure], errors="coerce").astype(float)
    return frame.groupby([*SERIES_KEY, "ts"], as_index=False, sort=True)[measure].sum()


def mase_scale(values: pd.Series, first_forecast_hour: pd.Timestamp) -> tuple[float | None, str]:
    """Seasonal-naive in-sample MAE before ``first_forecast_hour`` and its label (see the module docstring)."""
    before = values[values.index < first_forecast_hour]
    if before.empty:
        return None, ""
    grid = pd.date_range(before.index.min(), first_forecast_hour - pd.Timedelta(hours=1), freq="h")
    series = before.reindex(grid).iloc[-(SCALE_WINDOW_HOURS + 168):]
    for period in (168, 24):
        if len(series) < period + MIN_PAIRS:
            continue
        errors = (series - series.shift(period)).abs().dropna()
        if len(errors) >= MIN_PAIRS and errors.mean() > 0:
            return float(errors.mean()), f"naive{period}"
    return None, ""


def _pairs(previous: pd.DataFrame | None, history: pd.DataFrame | None, as_of: pd.Timestamp, measure: str,
           window: PlanningWindow | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame] | None:
    """(forecast, actuals, both on the hours compared) or None when either input is missing."""
    if not present(previous, *SERIES_KEY, "ts", "mean") or not present(history, *SERIES_KEY, "ts", measure):
        return None
    actual = _hourly(history, measure)
    actual = actual[actual["ts"] < as_of]
    fc = previous.copy()
    for column in SERIES_KEY:
        fc[column] = fc[column].astype(str)
    fc["ts"] = utc(fc["ts"])
    merged = fc.merge(actual, on=[*SERIES_KEY, "ts"], how="inner").dropna(subset=[measure, "mean"])
    if window is not None:
        merged = merged[(merged["ts"] >= window.start) & (merged["ts"] < window.end)]
    return fc, actual, merged


def hours_compared(previous: pd.DataFrame | None, history: pd.DataFrame | None, as_of: pd.Timestamp,
                   measure: str = "requests", window: PlanningWindow | None = None) -> int:
    """How many distinct hours (of ``window``, when given) have both a forecast and an actual for some series."""
    pairs = _pairs(previous, history, as_of, measure, window)
    return 0 if pairs is None else int(pairs[2]["ts"].nunique())


def forecast_accuracy(previous: pd.DataFrame | None, history: pd.DataFrame | None, as_of: pd.Timestamp,
                      measure: str = "requests", window: PlanningWindow | None = None) -> pd.DataFrame:
    """One row per series of ``previous`` with actuals (columns ``ACCURACY_COLUMNS``); empty when none overlap.

    ``window``: compare only these hours (last month, for the monthly report).
    """
    empty = pd.DataFrame(columns=list(ACCURACY_COLUMNS))
    pairs = _pairs(previous, history, as_of, measure, window)
    if pairs is None or pairs[2].empty:
        return empty
    fc, actual, merged = pairs
    rows = []
    by_series = {key: part.set_index("ts")[measure] for key, part in actual.groupby(list(SERIES_KEY), sort=True)}
    first_hour = fc.groupby(list(SERIES_KEY), sort=True)["ts"].min().to_dict()
    for key, part in merged.groupby(list(SERIES_KEY), sort=True):
        a = part[measure].to_numpy(float)
        f = pd.to_numeric(part["mean"], errors="coerce").to_numpy(float)
        err = np.abs(a - f)
        positive = a > 0
        scale, scale_name = mase_scale(by_series[key], first_hour[key])
        row = {
            "region": key[0], "model": key[1], "traffic_class": key[2], "hours_compared": len(part),
            "actual": float(a.sum()), "forecast": float(f.sum()),
            "bias_pct": 100.0 * (f.sum() - a.sum()) / a.sum() if a.sum() > 0 else np.nan,
            "mape_pct": 100.0 * float(np.mean(err[positive] / a[positive])) if positive.any() else np.nan,
            "mase": float(err.mean()) / scale if scale else np.nan,
            "mase_scale": scale_name,
        }
        for level in ("q90", "q99"):
            quantile = pd.to_numeric(part[level], errors="coerce").to_numpy(float) if level in part else None
            ok = quantile is not None and np.isfinite(quantile).all()
            row[f"below_{level}_pct"] = 100.0 * float(np.mean(a <= quantile)) if ok else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=list(ACCURACY_COLUMNS))


def overall_accuracy(table: pd.DataFrame) -> dict[str, float | int | None]:
    """Totals over every compared series: bias and WAPE of the summed demand, median MASE, pooled coverage."""
    if table.empty:
        return {}
    actual, forecast = float(table["actual"].sum()), float(table["forecast"].sum())
    hours = table["hours_compared"].astype(float)
    mase = pd.to_numeric(table["mase"], errors="coerce").dropna()

    def pooled(column: str) -> float | None:
        values = pd.to_numeric(table[column], errors="coerce")
        keep = values.notna()
        return float((values[keep] * hours[keep]).sum() / hours[keep].sum()) if keep.any() else None

    return {
        "series_compared": len(table),
        "hours_compared": int(hours.sum()),
        "actual_total": actual,
        "forecast_total": forecast,
        "bias_pct": 100.0 * (forecast - actual) / actual if actual > 0 else None,
        "median_mase": float(mase.median()) if not mase.empty else None,
        "series_mase_below_1": int((mase < 1).sum()),
        "below_q90_pct": pooled("below_q90_pct"),
        "below_q99_pct": pooled("below_q99_pct"),
    }


def wape_pct(previous: pd.DataFrame, history: pd.DataFrame, as_of: pd.Timestamp,
             measure: str = "requests", window: PlanningWindow | None = None) -> float | None:
    """WAPE % of the total over all series, hour by hour (errors of opposite sign cancel across series)."""
    pairs = _pairs(previous, history, as_of, measure, window)
    if pairs is None or pairs[2].empty:
        return None
    totals = pairs[2].groupby("ts")[[measure, "mean"]].sum()
    denominator = float(totals[measure].sum())
    return 100.0 * float((totals[measure] - totals["mean"]).abs().sum()) / denominator if denominator > 0 else None

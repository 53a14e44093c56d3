"""Forecast accuracy: the model against both seasonal-naive baselines, on demo and real data.

What it does:

1. **Demo history** (``data/history/demo_history.parquet``: 13 months hourly, 24
   series, with holidays, launches, level episodes, a zero-run outage and a
   log-collection gap). ``forecast_history`` with a 14-day horizon and the default
   model; the rolling-origin backtest (3 windows of 14 days) gives the overall
   MASE of the model and of the 24 h and 168 h seasonal naives, sMAPE, scaled
   pinball losses and 80 %/90 % interval coverage. Targets: model MASE at most
   0.85x the better naive's; 90 % coverage in [0.80, 0.97].
2. **ServeGen** (``data/sources/servegen_aggregate/``, Alibaba Bailian m-large and
   m-mid, 10-minute mean rates over 14 days). Hourly requests = sum over the six
   windows of rate x 600 s, so zero windows (collection gaps) pull an hour down and
   all-zero hours become outages for the data-quality pass. Window 0 is placed at
   2025-01-06T00:00Z (the real weekday is unknown). Forecast 24 h ahead from the 3
   origins of the last 3 days (all inside the last 4 days), scoring model and
   baselines alike. Only 11-13 days precede those origins, under the default
   2-week minimum, so this run sets ``min_history_hours=240`` (10 days); with
   under two weeks in the window the model uses daily harmonics only. Target: the
   model beats the better baseline on MASE for m-large.
3. ``--windows 1344,4032,9504`` repeats step 1 for other regression windows, the
   evidence that fitting on a trailing window costs no accuracy.
4. ``--compare-mstl 1344,4032`` backtests the decomposition alternative on the same
   demo windows and scale: log1p, MSTL(24, 168) on the trailing window, ARIMA(1,1,1)
   on the seasonally adjusted series, seasonal components repeated forward,
   Gaussian intervals back-transformed. It prints both methods' MASE, coverage and
   median seconds per fit.

Usage: ``python benchmarks/forecast_accuracy.py [--workers 2] [--windows ...] [--compare-mstl ...] [--json OUT]``.
It prints figures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtri

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.engine import run_tasks  # noqa: E402
from planner.forecast import backtest as bt  # noqa: E402
from planner.forecast.fallback import forecast_series  # noqa: E402
from planner.forecast.forecaster import SeriesHistory  # noqa: E402
from planner.forecast.model import HarmonicForecaster, ModelSpec  # noqa: E402
from planner.forecast.quality import HOUR_NS  # noqa: E402
from planner.forecast.run import clean_history, forecast_history  # noqa: E402

QUANTILES = [0.5, 0.9, 0.95, 0.99]
SERVEGEN = ROOT / "data" / "sources" / "servegen_aggregate" / "rate_rps_10min_m-large_m-mid.csv"
SERVEGEN_START = pd.Timestamp("2025-01-06T00:00:00Z")


def servegen_history(path: Path = SERVEGEN) -> pd.DataFrame:
    """ServeGen 10-minute rates (req/s) -> hourly request counts in the history contract."""
    rates = pd.read_csv(path)
    rates["hour"] = rates["window_start_s"] // 3600
    hourly = rates.groupby("hour")[["m-large", "m-mid"]].sum() * 600.0
    stamps = [(SERVEGEN_START + pd.Timedelta(hours=int(h))).strftime("%Y-%m-%dT%H:%M:%SZ") for h in hourly.index]
    return pd.concat([pd.DataFrame({"ts": stamps, "region": "bailian", "model": name, "traffic_class": "all",
                                    "requests": hourly[name].to_numpy()}) for name in ("m-large", "m-mid")],
                     ignore_index=True)


def _fmt(block: dict) -> str:
    return (f"MASE {block['mase']:.3f}  sMAPE {block['smape']:6.2f}%  cov80 {block['coverage80']:.3f}  "
            f"cov90 {block['coverage90']:.3f}  pinball/scale q50 {block['pinball_scaled']['q50']:.3f} "
            f"q90 {block['pinball_scaled']['q90']:.3f} q99 {block['pinball_scaled']['q99']:.3f}")


def demo(spec: ModelSpec, workers: int | None) -> dict:
    history = pd.read_parquet(ROOT / "data" / "history" / "demo_history.parquet")
    began = time.perf_counter()
    result = forecast_history(history, horizon_hours=336, quantiles=QUANTILES, engine="auto", workers=workers,
                              spec=spec)
    seconds = time.perf_counter() - began
    overall = result.metadata["backtest_overall"]
    print(f"\n== demo history: {result.metadata['n_series']} series, 14-day horizon, 3 windows of 14 days, "
          f"window_hours={spec.window_hours} ({seconds:.1f} s) ==")
    for method in ("model", "naive24", "naive168"):
        print(f"  {method:9s} {_fmt(overall[method])}")
    ratio = overall["mase_ratio_vs_best_naive"]
    cov90 = overall["model"]["coverage90"]
    print(f"  MASE ratio vs better naive: {ratio:.3f} (target <= 0.85: {'met' if ratio <= 0.85 else 'MISSED'}); "
          f"90% coverage {cov90:.3f} (target 0.80-0.97: {'met' if 0.80 <= cov90 <= 0.97 else 'MISSED'})")
    print(f"  fallbacks: {result.metadata['n_fallbacks']}; data-quality findings: "
          f"{result.metadata['n_data_quality_findings']}")
    return {"window_hours": spec.window_hours, "seconds": round(seconds, 1), "overall": overall,
            "series": result.summary_rows()}


def servegen(spec: ModelSpec) -> dict:
    history = servegen_history()
    result = forecast_history(history, horizon_hours=24, quantiles=QUANTILES, engine="local",
                              spec=replace(spec, min_history_hours=240))
    print("\n== ServeGen (Alibaba Bailian), hourly, 24 h ahead from 3 origins in the last 3 days ==")
    out = {}
    for entry in result.metadata["series"]:
        bt = entry["backtest"]
        best = min(bt["naive24"]["mase"], bt["naive168"]["mase"])
        print(f"  {entry['model']}: final model {entry['model_used']}")
        for method in ("model", "naive24", "naive168"):
            print(f"    {method:9s} {_fmt(bt[method])}")
        verdict = "beats" if bt["model"]["mase"] < best else "does NOT beat"
        print(f"    model {verdict} the better baseline on MASE ({bt['model']['mase']:.3f} vs {best:.3f}); "
              f"window models: {sorted({w['model_used'] for w in bt['windows']})}")
        for finding in entry["data_quality"]:
            print(f"    data quality: {finding['kind']} {finding.get('hours', '')} h -> {finding['action']}")
        out[entry["model"]] = {"backtest": bt, "data_quality": entry["data_quality"], "model_used": entry["model_used"]}
    return out


def mstl_forecast(filled: np.ndarray, horizon: int, window: int, levels: list[float]):
    """The decomposition alternative (step 4 of the module docstring)."""
    from statsmodels.tsa.arima.model import ARIMA
    from statsmodels.tsa.seasonal import MSTL

    y = np.log1p(filled[-window:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seasonal = MSTL(y, periods=(24, 168)).fit().seasonal
        fitted = ARIMA(y - seasonal.sum(axis=1), order=(1, 1, 1)).fit()
    fc = fitted.get_forecast(horizon)
    h = np.arange(horizon)
    m = np.asarray(fc.predicted_mean) + seasonal[-24:, 0][h % 24] + seasonal[-168:, 1][h % 168]
    v = np.asarray(fc.var_pred_mean)
    quants = {lvl: np.maximum(np.expm1(m + float(ndtri(lvl)) * np.sqrt(v)), 0.0) for lvl in levels}
    return np.maximum(np.expm1(m + v / 2), 0.0), quants


def _mstl_vs_model(task: tuple) -> dict:
    values, filled, observed, t0, window, horizon = task
    levels = sorted(set(QUANTILES) | set(bt.INTERVAL_LEVELS))
    length, origins, _ = bt.window_plan(values.size, horizon, ModelSpec().min_history_hours)
    acc = {"mstl": bt._Accumulator(levels), "model": bt._Accumulator(levels)}
    seconds: dict[str, list[float]] = {"mstl": [], "model": []}
    for origin in origins:
        scored = observed[origin:origin + length]
        x = values[origin:origin + length][scored]
        scale = bt.in_sample_scale(filled[:origin], observed[:origin])
        began = time.perf_counter()
        mean, quants = mstl_forecast(filled[:origin], length, window, levels)
        seconds["mstl"].append(time.perf_counter() - began)
        acc["mstl"].add(x, mean[scored], {lvl: quants[lvl][scored] for lvl in levels}, scale)
        began = time.perf_counter()
        run = forecast_series(HarmonicForecaster(), SeriesHistory(values, filled, observed, t0).head(origin), length,
                              levels, ModelSpec().min_history_hours)
        seconds["model"].append(time.perf_counter() - began)
        acc["model"].add(x, run.mean[scored], {lvl: run.quantiles[lvl][scored] for lvl in levels}, scale)
    return {name: {**acc[name].result(), "seconds": statistics.median(seconds[name])} for name in acc}


def mstl_comparison(window: int, workers: int | None) -> dict:
    series = clean_history(pd.read_parquet(ROOT / "data" / "history" / "demo_history.parquet"), "requests")
    tasks = [(clean.values, clean.filled, clean.observed, int(clean.start.value // HOUR_NS), window, 336)
             for _, clean in series]
    results = run_tasks(_mstl_vs_model, tasks, engine="auto", workers=workers)
    print(f"\n== demo history: MSTL(24,168)+ARIMA(1,1,1) on a {window} h window vs the shipped model ==")
    out = {}
    for name in ("mstl", "model"):
        out[name] = {key: float(np.mean([r[name][key] for r in results]))
                     for key in ("mase", "coverage80", "coverage90")}
        out[name]["seconds_per_fit_median"] = float(np.median([r[name]["seconds"] for r in results]))
        print(f"  {name:6s} MASE {out[name]['mase']:.3f}  cov80 {out[name]['coverage80']:.3f}  "
              f"cov90 {out[name]['coverage90']:.3f}  median {out[name]['seconds_per_fit_median']:.2f} s per fit")
    return {"window_hours": window, **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--windows", default="", help="extra regression windows (hours) to compare, e.g. 1344,9504")
    parser.add_argument("--compare-mstl", default="", help="MSTL+ARIMA windows (hours) to compare, e.g. 1344,4032")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    spec = ModelSpec()
    figures = {"demo": demo(spec, args.workers), "servegen": servegen(spec)}
    extra = [int(w) for w in args.windows.split(",") if w.strip()]
    figures["demo_windows"] = [demo(replace(spec, window_hours=w), args.workers) for w in extra]
    mstl = [int(w) for w in args.compare_mstl.split(",") if w.strip()]
    figures["mstl_comparison"] = [mstl_comparison(w, args.workers) for w in mstl]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

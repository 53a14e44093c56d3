"""Forecast speed: one series on one core, and a fleet of series over the process pool.

What it does:

1. **One series, one core.** A 1-year hourly series (8,760 hours, Poisson counts
   around a daily cycle, a weekend drop, 50 %/yr growth and AR(1) noise in logs;
   ``planner.forecast.synthetic``) per seed. Times ``forecast_series`` (order
   selection, fit, 14-day forecast with the q5..q99 quantiles), the data-quality
   pass separately, for ``--repeats`` different seeds, single-threaded BLAS, and
   prints the median and the spread. Target: median at most 1.0 s.
2. **A fleet.** ``--series`` (default 200) such series as one demand history through
   ``forecast_history`` (no backtest), once with ``engine="local"`` and once with
   ``engine="processes"`` and ``--workers`` (default 2), reporting wall time and the
   speed-up. The two outputs are checked to be identical.

Usage: ``python benchmarks/forecast_speed.py [--repeats 15] [--series 200] [--workers 2]``.
It prints figures; it does not pass or fail. Other load on the machine inflates
the figures, so the script also prints the load average it ran under and, per
engine, the CPU seconds used against the wall time (cores actually obtained).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.forecast.fallback import forecast_series  # noqa: E402
from planner.forecast.forecaster import SeriesHistory  # noqa: E402
from planner.forecast.model import HarmonicForecaster, ModelSpec  # noqa: E402
from planner.forecast.quality import HOUR_NS, clean_series  # noqa: E402
from planner.forecast.run import forecast_history  # noqa: E402
from planner.forecast.synthetic import START, synthetic_history, synthetic_series  # noqa: E402

YEAR_HOURS = 8760
HORIZON = 14 * 24
LEVELS = [0.05, 0.1, 0.5, 0.9, 0.95, 0.99]


def one_series(repeats: int) -> None:
    from threadpoolctl import threadpool_limits

    t0 = int(START.value // HOUR_NS)
    ts_ns = int(START.value) + np.arange(YEAR_HOURS, dtype=np.int64) * HOUR_NS
    fit_s, clean_s, models = [], [], []
    with threadpool_limits(limits=1):
        for seed in range(repeats):
            values, _ = synthetic_series(YEAR_HOURS, np.random.default_rng(seed), poisson=True)
            began = time.perf_counter()
            clean = clean_series("bench", ts_ns, values)
            clean_s.append(time.perf_counter() - began)
            began = time.perf_counter()
            history = SeriesHistory(clean.values, clean.filled, clean.observed, t0)
            out = forecast_series(HarmonicForecaster(), history, HORIZON, LEVELS, ModelSpec().min_history_hours)
            fit_s.append(time.perf_counter() - began)
            models.append(out.model_used)
    median = statistics.median(fit_s)
    print(f"== one 1-year hourly series, one core, {repeats} seeds ==")
    print(f"  fit + 14-day forecast: median {median:.3f} s, min {min(fit_s):.3f} s, max {max(fit_s):.3f} s "
          f"(target <= 1.0 s: {'met' if median <= 1.0 else 'MISSED'})")
    print(f"  data-quality pass: median {statistics.median(clean_s) * 1000:.1f} ms")
    print(f"  models chosen: {sorted(set(models))}")


def _cpu_seconds() -> float:
    """CPU time of this process plus its finished children (pool workers are joined)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def fleet(n_series: int, workers: int) -> None:
    history = synthetic_history(n_series, YEAR_HOURS, seed=1)
    print(f"\n== {n_series} series x {YEAR_HOURS} h, 14-day forecast, no backtest ==")
    timings, frames = {}, {}
    for engine, n in (("local", 1), ("processes", workers)):
        began, cpu = time.perf_counter(), _cpu_seconds()
        result = forecast_history(history, horizon_hours=HORIZON, quantiles=[0.5, 0.9, 0.95, 0.99], backtest=False,
                                  engine=engine, workers=n)
        timings[engine] = time.perf_counter() - began
        cpu = _cpu_seconds() - cpu
        frames[engine] = result.forecast.to_csv(index=False)
        print(f"  {engine:9s} workers={n}: {timings[engine]:.1f} s wall ({timings[engine] / n_series * 1000:.0f} ms "
              f"per series), {cpu:.1f} CPU-s, i.e. {cpu / timings[engine]:.2f} cores busy on average")
    print(f"  speed-up processes({workers}) vs local: {timings['local'] / timings['processes']:.2f}x; "
          f"outputs identical: {frames['local'] == frames['processes']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    one_series(args.repeats)
    fleet(args.series, args.workers)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

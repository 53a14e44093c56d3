"""Scale-out: forecast and simulation on the local, processes and dask engines, and a cluster estimate.

What it does:

1. **forecast.** ``--series`` (default 1,000) hourly series built deterministically from
   the bundled demo history (``data/history/demo_history.parquet``, 24 series x 13
   months): copy c of base series b is ``round(requests_b x s_c x exp(e_t))`` with a
   per-copy scale s_c in [0.5, 2) and e_t ~ N(0, 0.05^2), all drawn from one
   ``SeedSequence(--seed)``. ``forecast_history`` (14-day horizon, no backtest unless
   ``--backtest``) runs on ``local``, ``processes`` (``--workers``) and ``dask`` (an
   embedded LocalCluster of ``--workers`` processes, started inside the timing).
2. **simulate.** ``simulate_plan`` of 8 serving regions x 16 replicas of llama-3.1-70b on
   H100 (TP4), each at 41.1 req/s (70 % of the 58.75 req/s saturation measured by
   ``sim_replica_speed.py``) in the demo scenario's class mix and policy, for
   ``--sim-duration`` seconds x ``--replications``, on the same three engines.
3. **estimate.** The wall time of ``--target-series`` (10,000) series on a
   ``--target-workers`` (64) worker cluster, from measured terms::

       T(N, W) = T_start + N * (t_parent + o_client) + ceil(N / W) * (t_fit + o_worker)

   All but T_start are CPU seconds: waiting for a core that other work holds does not
   count in them (it does in wall seconds), and they are what a worker with a core of
   its own spends.
   t_fit: one series' fit + forecast, the CPU time between progress calls of the local
   run; t_parent: the serial work in the calling process per series (validation, the
   data-quality pass, building tasks, assembling the frame), the local run's CPU less
   N x t_fit, over N; o_client and o_worker: the CPU per task of the Dask path in the
   calling process (client and the embedded scheduler: serial) and in the workers
   (unpickling, running, replying: parallel), measured with N tasks that carry a real
   series' payload and do nothing with it; T_start (wall): starting a LocalCluster plus
   importing the forecaster in a fresh worker (workers start in parallel, so it does
   not grow with W). Pod scheduling and image pulls on Kubernetes are not measured.

Every table prints wall seconds, the speed-up against ``local`` measured in the same
run, CPU seconds of this process and its children, the CPU seconds other processes used
meanwhile (from ``/proc/stat``) and so the cores left to this run on average, so a busy
machine shows. Outputs of the three
engines are compared byte for byte.

Usage: ``python benchmarks/scale_out.py [--series 1000] [--workers 2]
[--sections forecast,simulate,estimate]``. It prints figures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import math
import operator
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.engine import run_tasks  # noqa: E402
from planner.engine.cluster import local_cluster  # noqa: E402

HORIZON_HOURS = 14 * 24
QUANTILES = [0.5, 0.9, 0.95, 0.99]
SIM_REGIONS = ("aws:us-east-1", "aws:us-west-2", "aws:eu-west-2", "aws:ap-northeast-1", "gcp:us-central1",
               "gcp:europe-west4", "gcp:asia-northeast1", "nebius:eu-north1")
SIM_RATE_RPS = 0.7 * 58.75
SIM_REPLICAS = 16


# --------------------------------------------------------------------------- measuring
def _cpu_seconds() -> float:
    """CPU time of this process plus its finished children (pool and cluster workers are joined)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _machine_busy_seconds() -> float:
    """CPU seconds all processes of the machine have used since boot (/proc/stat, less idle and iowait)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


@dataclass
class Timing:
    engine: str
    wall_s: float
    cpu_s: float
    others_cpu_s: float
    output: Any = None
    progress_cpu_s: list[float] | None = None


ALL_TIMINGS: list[Timing] = []


def timed(engine: str, run: Callable[[Callable[[int, int], None]], Any]) -> Timing:
    stamps: list[float] = []
    cpu, busy, began = _cpu_seconds(), _machine_busy_seconds(), time.perf_counter()
    output = run(lambda done, total: stamps.append(time.process_time()))
    wall = time.perf_counter() - began
    cpu = _cpu_seconds() - cpu
    others = max(0.0, _machine_busy_seconds() - busy - cpu)
    ALL_TIMINGS.append(Timing(engine, wall, cpu, others, output, stamps))
    return ALL_TIMINGS[-1]


def print_table(title: str, timings: list[Timing]) -> None:
    base = timings[0].wall_s
    print(f"\n== {title} ==")
    print(f"  {'engine':22s} {'wall s':>8s} {'speed-up':>9s} {'CPU-s':>8s} {'cores busy':>10s} "
          f"{'other procs CPU-s':>18s} {'cores left to us':>17s}")
    for t in timings:
        left = (os.cpu_count() or 1) - t.others_cpu_s / t.wall_s
        print(f"  {t.engine:22s} {t.wall_s:8.1f} {base / t.wall_s:8.2f}x {t.cpu_s:8.1f} {t.cpu_s / t.wall_s:10.2f} "
              f"{t.others_cpu_s:18.1f} {left:17.2f}")
    same = all(t.output == timings[0].output for t in timings)
    print(f"  outputs byte-identical across engines: {same}")


def engines(workers: int) -> list[tuple[str, dict[str, Any]]]:
    return [("local", {"engine": "local"}),
            (f"processes ({workers})", {"engine": "processes", "workers": workers}),
            (f"dask LocalCluster ({workers})", {"engine": "dask", "workers": workers})]


# --------------------------------------------------------------------------- forecast
def scaled_history(n_series: int, seed: int) -> pd.DataFrame:
    """``n_series`` series: scaled, noisy copies of the demo history's 24 (module docstring)."""
    demo = pd.read_parquet(ROOT / "data" / "history" / "demo_history.parquet",
                           columns=["ts", "region", "model", "traffic_class", "requests"])
    demo["ts"] = pd.to_datetime(demo["ts"], utc=True)
    bases = [group.reset_index(drop=True) for _, group in demo.groupby(["region", "model", "traffic_class"],
                                                                      sort=True)]
    parts = []
    for i, child in enumerate(np.random.SeedSequence(seed).spawn(n_series)):
        rng = np.random.default_rng(child)
        base = bases[i % len(bases)]
        copy = i // len(bases)
        scale = 0.5 + 1.5 * rng.random()
        noise = np.exp(rng.normal(0.0, 0.05, len(base)))
        parts.append(base.assign(region=f"{base['region'].iloc[0]}-c{copy:03d}",
                                 requests=np.round(base["requests"].to_numpy() * scale * noise).astype(np.int64)))
    return pd.concat(parts, ignore_index=True)


def forecast_section(history: pd.DataFrame, workers: int, backtest: bool) -> Timing:
    from planner.forecast.run import forecast_history

    n = history.groupby(["region", "model", "traffic_class"]).ngroups
    timings = []
    for name, kwargs in engines(workers):
        def run(progress, kwargs=kwargs):
            result = forecast_history(history, horizon_hours=HORIZON_HOURS, quantiles=QUANTILES,
                                      backtest=backtest, progress=progress, **kwargs)
            return result.forecast.to_csv(index=False)
        timings.append(timed(name, run))
        print(f"  ... {name}: {timings[-1].wall_s:.1f} s", flush=True)
    print_table(f"forecast: {n} series x {len(history) // n} h, {HORIZON_HOURS} h ahead, "
                f"backtest {'on' if backtest else 'off'}", timings)
    speed = timings[0].wall_s / timings[1].wall_s
    print(f"  goal >= 1.7x on 2 cores for processes/dask: processes {speed:.2f}x, "
          f"dask {timings[0].wall_s / timings[2].wall_s:.2f}x")
    return timings[0]


# --------------------------------------------------------------------------- simulate
def simulate_section(workers: int, duration_s: float, replications: int) -> None:
    from planner.catalog import load_catalog
    from planner.profiles import load_profiles
    from planner.scenario import load_scenario
    from planner.sim.simulate import simulate_plan
    from planner.workflows.files import write_simulation_outputs

    scenario = load_scenario(ROOT / "scenarios" / "demo.toml")
    period = "2026-11-02T18:00:00Z"
    plan = pd.DataFrame([{"period": period, "region": r, "sku": "H100", "model": "llama-3.1-70b", "tier": "on_demand",
                          "replicas": SIM_REPLICAS, "gpus": 4 * SIM_REPLICAS, "usd": 0.0} for r in SIM_REGIONS])
    demand = pd.DataFrame([{"region": r, "model": "llama-3.1-70b", "traffic_class": k.name,
                            "rps": SIM_RATE_RPS * k.share}
                           for r in SIM_REGIONS for k in scenario.classes])
    profiles, catalog = load_profiles(), load_catalog()
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"scale_out_sim_{os.getpid()}"
    out.mkdir(exist_ok=True)
    began = time.perf_counter()
    simulate_plan(scenario, plan.iloc[:1], demand, profiles, catalog, duration_s=60.0, replications=1, seed=7)
    print(f"\n  (engine compiled or loaded from the numba cache in this process: {time.perf_counter() - began:.1f} s)")
    timings = []
    for name, kwargs in engines(workers):
        def run(progress, kwargs=kwargs, name=name):
            result = simulate_plan(scenario, plan, demand, profiles, catalog, duration_s=duration_s,
                                   replications=replications, seed=7, progress=progress, **kwargs)
            paths = write_simulation_outputs(result, out / f"{name.split()[0]}.csv")
            return [p.read_bytes() for p in paths]
        timings.append(timed(name, run))
        print(f"  ... {name}: {timings[-1].wall_s:.1f} s", flush=True)
    print_table(f"simulate: {len(SIM_REGIONS)} regions x {SIM_REPLICAS} replicas llama-3.1-70b H100, "
                f"{SIM_RATE_RPS:.1f} req/s each, {duration_s:g} s x {replications} replications "
                f"= {len(SIM_REGIONS) * replications} tasks", timings)
    for path in out.iterdir():
        path.unlink()
    out.rmdir()


# --------------------------------------------------------------------------- estimate
def _import_seconds(module: str) -> float:
    """Seconds to import ``module`` in this (fresh) process."""
    import importlib

    began = time.perf_counter()
    importlib.import_module(module)
    return time.perf_counter() - began


def _process_cpu_s() -> float:
    """CPU seconds of the process it runs in (called on every worker)."""
    return time.process_time()


def estimate_section(history: pd.DataFrame, local: Timing | None, workers: int, target_series: int,
                     target_workers: int) -> None:
    import cloudpickle
    from distributed import Client

    from planner.forecast.forecaster import SeriesHistory
    from planner.forecast.model import HarmonicForecaster, ModelSpec
    from planner.forecast.run import SeriesTask, clean_history, forecast_history

    n = history.groupby(["region", "model", "traffic_class"]).ngroups
    if local is None:
        print("\n  (no forecast section in this run: timing the local forecast for the estimate)")
        local = timed("local", lambda progress: forecast_history(
            history, horizon_hours=HORIZON_HOURS, quantiles=QUANTILES, backtest=False, engine="local",
            progress=progress).forecast.to_csv(index=False))
    stamps = local.progress_cpu_s or []
    t_fit = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    t_parent = max(0.0, local.cpu_s - n * t_fit) / n

    series = clean_history(history)
    tasks = [SeriesTask(key, SeriesHistory(c.values, c.filled, c.observed, 0), HORIZON_HOURS, HORIZON_HOURS,
                        tuple(QUANTILES), HarmonicForecaster(), ModelSpec().min_history_hours, False)
             for key, c in series]
    payload_kib = np.mean([len(cloudpickle.dumps(t, protocol=5)) for t in tasks[:50]]) / 1024
    noop = operator.attrgetter("horizon")
    began = time.perf_counter()
    with local_cluster(workers) as cluster:
        cluster_s = time.perf_counter() - began
        address = cluster.scheduler_address
        with Client(address, set_as_default=False) as client:
            t_import = max(client.run(_import_seconds, "planner.forecast.run").values())
            run_tasks(noop, tasks[:workers * 4], engine="dask", scheduler=address)  # warm the unpickling path
            workers_cpu = sum(client.run(_process_cpu_s).values())
            own_cpu, began = time.process_time(), time.perf_counter()
            run_tasks(noop, tasks, engine="dask", scheduler=address)
            wall = time.perf_counter() - began
            o_client = (time.process_time() - own_cpu) / len(tasks)
            o_worker = (sum(client.run(_process_cpu_s).values()) - workers_cpu) / len(tasks)
    t_start = cluster_s + t_import

    big_n, big_w = target_series, target_workers
    rounds = math.ceil(big_n / big_w)
    parts = {"T_start": t_start, "N*(t_parent+o_client)": big_n * (t_parent + o_client),
             "ceil(N/W)*(t_fit+o_worker)": rounds * (t_fit + o_worker)}
    total = sum(parts.values())
    print(f"\n== estimate: {big_n:,} series on a {big_w}-worker Dask cluster ==")
    print(f"  measured here ({workers} workers, {n} series); CPU seconds, so waiting for a busy core is not counted:")
    print(f"    t_fit    = {t_fit * 1000:8.1f} ms   one series' fit + forecast (mean over the local run)")
    print(f"    t_parent = {t_parent * 1000:8.2f} ms   serial work in the calling process per series "
          "(validation, data-quality pass, tasks, assembly)")
    print(f"    o_client = {o_client * 1000:8.2f} ms   client + scheduler per task, serial "
          f"({payload_kib:.0f} KiB series payload)")
    print(f"    o_worker = {o_worker * 1000:8.2f} ms   worker side per task (unpickle, run, reply), parallel")
    print(f"    T_start  = {t_start:8.2f} s    wall: LocalCluster start {cluster_s:.2f} s + forecaster import in a "
          f"fresh worker {t_import:.2f} s")
    print(f"    (wall per no-op task through the {workers}-worker cluster: {wall / len(tasks) * 1000:.2f} ms)")
    print("  T(N, W) = T_start + N*(t_parent + o_client) + ceil(N/W)*(t_fit + o_worker)")
    print(f"  T({big_n}, {big_w}) = {t_start:.2f} + {big_n}*({t_parent:.5f} + {o_client:.5f}) + "
          f"{rounds}*({t_fit:.4f} + {o_worker:.5f})")
    print("            = " + " + ".join(f"{v:.1f}" for v in parts.values()) + f" = {total:.1f} s "
          f"({total / 60:.1f} min)")
    print(f"  one core for comparison: {big_n * (t_fit + t_parent):.0f} s. Largest term: {max(parts, key=parts.get)}. "
          "The serial terms are an upper bound (client and scheduler overlap on a real cluster); "
          "pod scheduling and image pulls are not included.")


# --------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sections", default="forecast,simulate,estimate")
    parser.add_argument("--backtest", action="store_true", help="also backtest every series (about 4x the work)")
    parser.add_argument("--sim-duration", type=float, default=3600.0, help="simulated seconds per replication")
    parser.add_argument("--replications", type=int, default=4)
    parser.add_argument("--target-series", type=int, default=10_000)
    parser.add_argument("--target-workers", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    unknown = sections - {"forecast", "simulate", "estimate"}
    if unknown:
        parser.error(f"unknown section(s) {', '.join(sorted(unknown))}")
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} "
          f"on {os.cpu_count()} cores")
    history = scaled_history(args.series, args.seed) if sections & {"forecast", "estimate"} else None
    local = forecast_section(history, args.workers, args.backtest) if "forecast" in sections else None
    if "simulate" in sections:
        simulate_section(args.workers, args.sim_duration, args.replications)
    if "estimate" in sections:
        estimate_section(history, local, args.workers, args.target_series, args.target_workers)
    load_after = os.getloadavg()
    print(f"\nload average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if ALL_TIMINGS:
        others = sum(t.others_cpu_s for t in ALL_TIMINGS) / sum(t.wall_s for t in ALL_TIMINGS)
        busy = others > 0.1
        print(f"other processes used {others:.2f} cores on average during the timed runs: the machine was "
              + ("BUSY, so these figures are depressed; rerun on an idle machine" if busy else "idle"))


if __name__ == "__main__":
    main()

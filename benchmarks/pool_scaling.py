"""Capacity per replica as the pool grows, and the GPUs a lone-replica table buys against a pool-aware one.

The question (a fleet simulator's, e.g. vLLM Semantic Router's ``vllm-sr-sim``): llama-3.1-70b on H100 at TP 8,
one class ``chat`` with TTFT p99 500 ms (no other SLO), FCFS, JSQ routing, token lengths from the bundled Azure
2023 conversation and code traces (``data/samples/azure_llm_2023/``, ingested with ``planner ingest --format
azure`` into two histograms, read as one).

1. **Calibration** (``planner calibrate --pool-sizes``): the unit's engine setting and λ* at one replica, then
   λ*(N) at each larger pool size with that setting; per size the measured rate, the tabulated one (the running
   minimum from the right: non-decreasing, never above a measured answer), its share of the replica's analytic
   throughput ceiling, and the replications each size cost and their CPU seconds.
2. **Replicas for a demand** of 20, 50 and 200 req/s (``--demands``): lone-replica, ⌈λ / c(1)⌉ (what a table
   calibrated on one replica buys); pool-aware, the fewest N with N · c(N) ≥ λ, c(N) the tabulated rate of the
   largest calibrated size ≤ N. GPUs = 8 N. Both without the utilisation cap, which is a separate margin.
3. **Each plan simulated at its planned load**: the pool of N replicas at λ / N per replica, on the same
   predicate, replications and seeds as calibration: the TTFT p99 (mean over replications, and the upper end of
   the 95 % interval, which calibration holds at the SLO), and whether it holds.

4. **``planner plan`` on the question** (``--sections plan``): 14 days of flat history at the largest demand
   (200 req/s) in one region, the scenario above with utilisation cap 1 and the median forecast (so that the
   plan's margins are the ones the table above has none of), planned by the loop as ``planner plan`` does, once
   calibrated on one replica only and once at the pool sizes the forecast can need: replicas and GPUs bought,
   against the counts of section 2, and every simulated window's TTFT p99 against its SLO.
5. **The demo** (``--sections demo``): November 2026 planned as ``make run``'s report plans it (the scenario's
   own policy, no policy comparison), with the loop's capacity calibrated on one replica only and at the pool
   sizes the forecast can need: GPUs at the fleet peak and USD, convergence, the worst p99 / SLO of any
   simulated class, and what the calibration cost (units, replications, CPU seconds).

It prints figures; it does not pass or fail. Usage: ``python benchmarks/pool_scaling.py [--sizes 1,2,4,8,16,32]
[--demands 20,50,200] [--sim-duration 600] [--replications 8] [--sections question,plan,demo]``.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.calibrate import calibrate  # noqa: E402
from planner.calibrate.pools import parse_pool_sizes, tabulated_rates  # noqa: E402
from planner.calibrate.probe import probe  # noqa: E402
from planner.calibrate.table import chosen_replica  # noqa: E402
from planner.profiles import load_profiles  # noqa: E402
from planner.scenario import load_scenario, parse_scenario  # noqa: E402
from planner.workflows.common import read_histograms  # noqa: E402

AZURE = ROOT / "data/samples/azure_llm_2023"
MODEL, SKU, TP = "llama-3.1-70b", "H100", 8


def scenario():
    """The demo cut to one region, the 70B on 8 x H100, one class with TTFT p99 500 ms, FCFS and JSQ."""
    raw = load_scenario(ROOT / "scenarios/demo.toml").model_dump(exclude_none=True)
    raw["name"] = "pool-scaling"
    raw["regions"]["serving"] = [r for r in raw["regions"]["serving"] if r["key"] == "aws:us-east-1"]
    raw["regions"]["origins"] = [o for o in raw["regions"]["origins"] if o["name"] == "us-east"]
    raw["regions"]["latency_ms"] = {"us-east": {"aws:us-east-1": 8}}
    raw["models"] = [{"name": MODEL, "skus": [SKU], "tp": [TP], "engine": "vllm"}]
    chat = {k: v for k, v in raw["classes"][0].items() if k not in ("reuse", "e2e_p99_ms", "tpot_p99_ms",
                                                                      "prompt_tokens", "output_tokens")}
    raw["classes"] = [{**chat, "name": "chat", "share": 1.0, "ttft_p99_ms": 500.0, "max_queue_wait_ms": 600000.0}]
    raw["policy"]["name"] = "fcfs"
    raw["policy"]["routing"] = {"router": "jsq"}
    return parse_scenario(raw, source="pool-scaling")


def histograms(folder: Path):
    paths = []
    for name in ("conv", "code"):
        out = folder / f"{name}.parquet"
        subprocess.run([sys.executable, "-m", "planner", "ingest", str(AZURE / f"AzureLLMInferenceTrace_{name}.csv"),
                        "--format", "azure", "--region", "us-east", "--model", MODEL, "--traffic-class", "chat",
                        "-o", str(out)], check=True, capture_output=True, cwd=ROOT)
        paths.append(out.with_suffix(".histogram.csv"))
    return read_histograms(paths)


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def pool_aware(demand: float, rates: list[tuple[int, float]]) -> int:
    """The fewest N with N · c(N) >= demand, c the step law over the tabulated sizes."""
    n = 1
    while True:
        c = max(rate for size, rate in rates if size <= n)
        if n * c >= demand:
            return n
        n += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,8,16,32")
    parser.add_argument("--demands", default="20,50,200")
    parser.add_argument("--sim-duration", type=float, default=600.0)
    parser.add_argument("--replications", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sections", default="question,plan,demo")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    print(f"load average before: {os.getloadavg()}")
    rates: list[tuple[int, float]] = []
    if "question" in sections:
        rates = question(args)
    if "plan" in sections:
        plan_question(args, rates)
    if "demo" in sections:
        demo()
    print(f"load average after: {os.getloadavg()}")


def question(args: argparse.Namespace) -> list[tuple[int, float]]:
    """Sections 1 to 3; the tabulated rates."""
    sizes = parse_pool_sizes(args.sizes)
    demands = [float(x) for x in args.demands.split(",")]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        histogram = histograms(Path(folder))
    setup = scenario()
    profiles = load_profiles()
    common = {"histogram": histogram, "duration_s": args.sim_duration, "replications": args.replications,
              "seed": args.seed, "engine": "local"}
    cpu0, wall0 = cpu_s(), time.perf_counter()
    lone = calibrate(setup, profiles, pool_replicas=sizes[0], **common)
    lone_cpu, lone_wall = cpu_s() - cpu0, time.perf_counter() - wall0
    cpu0, wall0 = cpu_s(), time.perf_counter()
    pooled = calibrate(setup, profiles, pool_replicas=sizes[0], larger_pools=sizes[1:], **common)
    pooled_cpu, pooled_wall = cpu_s() - cpu0, time.perf_counter() - wall0
    (unit,) = pooled.meta["units"]
    (task,) = pooled.tasks
    replica = chosen_replica(task, {"max_num_seqs": unit["max_num_seqs"],
                                    "max_num_batched_tokens": unit["max_num_batched_tokens"],
                                    "long_prefill_token_threshold": unit["long_prefill_token_threshold"]})
    ceiling = unit["ceiling_rps_per_replica"]
    rates = tabulated_rates(sizes[0], unit["mix_rps_per_replica"], unit.get("pools", []))
    measured = [unit["mix_rps_per_replica"]] + [p["rate_rps_per_replica"] for p in unit.get("pools", [])]
    spent = [unit["simulations"]] + [p["simulations"] for p in unit.get("pools", [])]
    print(f"\n{MODEL} on {TP} x {SKU}, one class (TTFT p99 <= 500 ms), FCFS, JSQ, Azure 2023 conv + code lengths; "
          f"setting max_num_seqs {replica.max_batch}, max_num_batched_tokens {replica.token_budget}; analytic "
          f"ceiling {ceiling:.2f} req/s per replica; {args.replications} replications of >= {args.sim_duration:g} s")
    print("| replicas in the pool | req/s per replica, measured | tabulated | share of the ceiling | "
          "replications run |")
    print("|---|---|---|---|---|")
    for (size, rate), m, sims in zip(rates, measured, spent, strict=True):
        print(f"| {size} | {m:.2f} | {rate:.2f} | {rate / ceiling:.0%} | {sims} |")
    print(f"\ncalibration cost: lone replica {lone.meta['units'][0]['simulations']} replications, {lone_cpu:.0f} CPU s "
          f"({lone_wall:.0f} s wall); with pools {', '.join(map(str, sizes[1:]))}: "
          f"{sum(spent)} replications, {pooled_cpu:.0f} CPU s ({pooled_wall:.0f} s wall), "
          f"{pooled_cpu / max(lone_cpu, 1e-9):.1f}x")
    print("\n| demand (req/s) | plan | replicas | GPUs | TTFT p99 mean (ms) | upper 95 % (ms) | SLO holds |")
    print("|---|---|---|---|---|---|---|")
    c1 = rates[0][1]
    for demand in demands:
        for label, n in (("lone-replica", math.ceil(demand / c1)), ("pool-aware", pool_aware(demand, rates))):
            verdict = probe(task, replace(replica, count=n), demand / n)
            (bound,) = [b for b in verdict.bounds if b.metric == "ttft"]
            print(f"| {demand:g} | {label} | {n} | {TP * n} | {bound.mean_ms:,.0f} | {bound.upper_ms:,.0f} | "
                  f"{'yes' if verdict.ok else 'no'} |")
    print(f"\ntotal {time.perf_counter() - began:.0f} s")
    return rates


def flat_history(demand_rps: float, days: int = 14) -> pd.DataFrame:
    """``days`` of hourly history at ``demand_rps`` in us-east for the question's class (Poisson counts, seed 1),
    token sums at the Azure conversation trace's means."""
    hours = pd.date_range("2026-10-18", periods=24 * days, freq="h", tz="UTC")
    requests = np.random.default_rng(1).poisson(demand_rps * 3600, size=len(hours))
    return pd.DataFrame({"ts": hours.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-east", "model": MODEL,
                         "traffic_class": "chat", "requests": requests, "prompt_tokens_sum": requests * 1155,
                         "output_tokens_sum": requests * 211})


def loop_figures(result) -> dict[str, object]:
    """GPUs, USD, convergence, the worst p99 / SLO and the calibration's cost of one pipeline run."""
    from planner.loop.derate import slo_ratio

    loop = result.loop
    units = loop.calibration.meta["units"] if loop.calibration is not None else []
    sims = sum(u["simulations"] + sum(p["simulations"] for p in u.get("pools", [])) for u in units)
    sizes = sorted({p["replicas"] for u in units for p in u.get("pools", [])})
    worst = max((slo_ratio(row) for row in loop.slo.to_dict("records")), default=float("nan"))
    return {"gpus": loop.gpus_peak, "usd": loop.cost_usd, "converged": loop.converged, "rounds": len(loop.rounds),
            "worst_p99_over_slo": worst, "calibrated_units": len(units), "replications": sims,
            "pool_sizes": sizes}


def run_plan(setup, history, pools: bool, window=None, histogram=None, as_of=None):
    from planner.catalog import load_catalog
    from planner.loop import LoopSettings
    from planner.loop.pipeline import run_pipeline

    settings = LoopSettings(seed=setup.seeds.base, pools=pools)
    cpu0, wall0 = cpu_s(), time.perf_counter()
    result = run_pipeline(setup, history, load_catalog(), load_profiles(), settings, as_of=as_of, window=window,
                          histogram=histogram)
    return result, cpu_s() - cpu0, time.perf_counter() - wall0


def plan_question(args: argparse.Namespace, rates: list[tuple[int, float]]) -> None:
    """Section 4."""
    demand = max(float(x) for x in args.demands.split(","))
    raw = scenario().model_dump(exclude_none=True)
    raw["capacity"].update(utilisation_cap=1.0, forecast_quantile=0.5, tiers=["on_demand"], quotas={SKU: 1024})
    setup = parse_scenario(raw, source="pool-scaling-plan")
    with tempfile.TemporaryDirectory() as folder:
        histogram = histograms(Path(folder))
    history = flat_history(demand)
    print(f"\n`planner plan` on {demand:g} req/s of {MODEL} on {TP} x {SKU} in one region (14 days of flat "
          "history, median forecast, utilisation cap 1, on-demand only, a quota of 1,024 GPUs):")
    print("| calibrated at | replicas at the peak | GPUs | USD | rounds | converged | worst TTFT p99 / SLO | "
          "replications | CPU s (whole run) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for pools in (False, True):
        result, cpu, _ = run_plan(setup, history, pools, histogram=histogram)
        f = loop_figures(result)
        replicas = int(result.loop.placement.plan.groupby("period")["replicas"].sum().max())
        label = "pool sizes " + ", ".join(map(str, [1, *f["pool_sizes"]])) if pools else "one replica"
        print(f"| {label} | {replicas} | {f['gpus']} | {f['usd']:,.0f} | {f['rounds']} | {f['converged']} | "
              f"{f['worst_p99_over_slo']:.2f} | {f['replications']} | {cpu:.0f} |")
    if rates:
        print(f"section 2's counts for {demand:g} req/s: lone-replica {math.ceil(demand / rates[0][1])}, "
              f"pool-aware {pool_aware(demand, rates)} (the plan's forecast median sits a little above the history)")


def demo() -> None:
    """Section 5."""
    from planner.loop.pipeline import parse_as_of
    from planner.report.period import month_window

    setup = load_scenario(ROOT / "scenarios/demo.toml")
    history = pd.read_parquet(ROOT / "data/history/demo_history.parquet")
    window = month_window("2026-11")
    print("\nThe demo, November 2026, the scenario's policy (as `make run`'s report, without the comparison):")
    print("| calibrated at | GPUs at the peak | USD | rounds | converged | worst p99 / SLO | units | replications | "
          "CPU s (whole run) | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for pools in (False, True):
        result, cpu, wall = run_plan(setup, history, pools, window=window, as_of=parse_as_of("2026-11-01"))
        f = loop_figures(result)
        label = "pool sizes up to " + str(max(f["pool_sizes"], default=1)) if pools else "one replica"
        print(f"| {label} | {f['gpus']} | {f['usd']:,.0f} | {f['rounds']} | {f['converged']} | "
              f"{f['worst_p99_over_slo']:.2f} | {f['calibrated_units']} | {f['replications']} | {cpu:.0f} | "
              f"{wall:.0f} |")


if __name__ == "__main__":
    main()

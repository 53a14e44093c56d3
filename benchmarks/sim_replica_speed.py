"""Replica-model speed: one hour of a 16-replica llama-3.1-70b H100 region at 70 % of saturation.

What it does:

1. **Saturation.** The pool is 16 replicas of the llama-3.1-70b H100 profile (TP4), with the
   demo scenario's classes, policy and admission control, and the trace-default token
   lengths. Saturation is found by bisection on the total arrival rate λ: a 15-minute run
   with the wait-time rejection switched off keeps up when the requests completed inside
   the measurement window are at least 99 % of the requests that arrived in it (past
   saturation the completion rate stays at the pool's capacity while arrivals grow).
2. **The goal run.** One hour at 0.7 × saturation. Wall time of the compiled engine after
   warm-up (best of ``--repeats``), and the whole replication (sampling + engine +
   metrics). Goal: at most 2 s on one core.
3. **Against pure Python.** The pure-Python reference loop (``tests/sim_replica_reference.py``,
   which the tests check agrees exactly with the compiled engine) and the compiled engine
   on the same sample of ``--python-minutes`` minutes; the ratio of their wall times.
   Goal: at least 30×.
4. **Growth.** Wall time for one hour with 4..64 replicas at 70 % load, and with 16
   replicas from 30 % to 110 % of saturation.

Compile time is reported separately (cold: numba compiles; warm: loaded from the cache).
Usage: ``python benchmarks/sim_replica_speed.py [--repeats 3] [--python-minutes 10]``.
It prints figures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from planner.profiles import load_profiles, profile_for  # noqa: E402
from planner.scenario import load_scenario  # noqa: E402
from planner.sim.policies import get_policy, policy_values  # noqa: E402
from planner.sim.replica.engine import run_pool  # noqa: E402
from planner.sim.replica.metrics import replication_metrics  # noqa: E402
from planner.sim.replica.pool import (  # noqa: E402
    ClassSpec,
    PoolConfig,
    ReplicaSpec,
    draw_sample,
    engine_state,
    run_replication,
)
from planner.sim.replica.state import DONE, F_EXIT, I_STATUS, P_STEPS  # noqa: E402
from planner.sim.workload import workloads_for  # noqa: E402

HOUR = 3600.0


def make_pool(rate: float, replicas: int = 16, duration: float = HOUR, no_reject: bool = False) -> PoolConfig:
    scenario = load_scenario(ROOT / "scenarios" / "demo.toml")
    spec = ReplicaSpec.of(profile_for(load_profiles(), "llama-3.1-70b", "H100", 4, "vllm"), replicas)
    laws = workloads_for("llama-3.1-70b", scenario.class_names)
    classes = tuple(ClassSpec(k.name, rate * k.share, k.weight, k.priority_jump, float(k.drr_quantum_tokens),
                              1e12 if no_reject else k.max_queue_wait_ms, scenario.slo("llama-3.1-70b", k.name),
                              laws[k.name])
                    for k in scenario.classes)
    adm, par = scenario.policy.admission, scenario.policy.params
    return PoolConfig((spec,), classes, get_policy(scenario.policy.name), duration_s=duration,
                      warmup_s=duration / 10, kv_fraction=adm.kv_fraction,
                      output_quantile_reserve=adm.output_quantile_reserve,
                      policy_params=policy_values(par.model_dump()), prediction_sigma=par.prediction_noise_sigma,
                      router="jsq")


def keeps_up(rate: float, replicas: int = 16) -> bool:
    config = make_pool(rate, replicas, duration=900.0, no_reject=True)
    st = run_replication(config, np.random.SeedSequence(1)).state
    exit_ = st.req_f[:, F_EXIT]
    w0, w1 = config.warmup_s, config.duration_s
    arrived = int(((st.arrival >= w0) & (st.arrival < w1)).sum())
    completed = int(((st.req_i[:, I_STATUS] == DONE) & (exit_ >= w0) & (exit_ < w1)).sum())
    return completed >= 0.99 * arrived


def saturation(replicas: int = 16) -> float:
    lo, hi = 1.0, 2.0
    while keeps_up(hi, replicas):
        lo, hi = hi, 2.0 * hi
    for _ in range(7):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if keeps_up(mid, replicas) else (lo, mid)
    return lo


def time_engine(config: PoolConfig, repeats: int, seed: int = 2) -> tuple[float, int, int]:
    """(best wall seconds of the engine alone, steps, requests) on one sample."""
    sample = draw_sample(config, np.random.SeedSequence(seed))
    best = np.inf
    for _ in range(repeats):
        state, hkey, hid = engine_state(config, sample)
        began = time.perf_counter()
        run_pool(state, hkey, hid)
        best = min(best, time.perf_counter() - began)
    return best, int(state.rep_i[:, P_STEPS].sum()), sample.n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python-minutes", type=float, default=10.0)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")

    began = time.perf_counter()
    small = make_pool(2.0, 2, duration=20.0)
    state, hkey, hid = engine_state(small, draw_sample(small, np.random.SeedSequence(0)))
    run_pool(state, hkey, hid)
    print(f"compile or cache load of the engine: {time.perf_counter() - began:.2f} s")

    began = time.perf_counter()
    sat = saturation()
    print(f"saturation of 16 x llama-3.1-70b H100 (TP4): {sat:.2f} req/s "
          f"({sat / 16:.3f} per replica), found in {time.perf_counter() - began:.1f} s")
    rate = 0.7 * sat
    config = make_pool(rate)
    wall, steps, n = time_engine(config, args.repeats)
    began = time.perf_counter()
    rep = run_replication(config, np.random.SeedSequence(2))
    rows, pool = replication_metrics(rep)
    total = time.perf_counter() - began
    print(f"\n1 h at 70% ({rate:.2f} req/s): {n:,} requests, {steps:,} steps, mean batch {pool['mean_batch']:.1f}")
    print(f"  engine wall (best of {args.repeats}): {wall:.3f} s  ({steps / wall / 1e6:.2f} M steps/s)   goal <= 2 s")
    print(f"  whole replication (sampling + engine + metrics): {total:.3f} s")
    print("  p99 TTFT / e2e (ms) per class: "
          + ", ".join(f"{k.name} {r['ttft_p99_ms']:.0f}/{r['e2e_p99_ms']:.0f}"
                      for k, r in zip(config.classes, rows, strict=True)))

    from sim_replica_reference import Reference

    short = replace(config, duration_s=60.0 * args.python_minutes, warmup_s=6.0 * args.python_minutes)
    sample = draw_sample(short, np.random.SeedSequence(3))
    fresh, _, _ = engine_state(short, sample)
    began = time.perf_counter()
    ref = Reference(fresh).run()
    py_wall = time.perf_counter() - began
    nb_wall, nb_steps, _ = time_engine(short, args.repeats, seed=3)
    assert sum(r.steps for r in ref.reps) == nb_steps
    print(f"\npure Python vs compiled, same {args.python_minutes:g}-minute sample ({nb_steps:,} steps):")
    print(f"  pure Python {py_wall:.2f} s ({nb_steps / py_wall / 1e3:.1f} k steps/s), compiled {nb_wall:.4f} s "
          f"-> {py_wall / nb_wall:.0f}x   goal >= 30x")

    print("\nwall time for 1 h vs replicas (70% of saturation, rate scaled with replicas):")
    for replicas in (4, 8, 16, 32, 64):
        w, s, n = time_engine(make_pool(rate * replicas / 16, replicas), 1)
        print(f"  {replicas:3d} replicas: {w:6.3f} s, {n:8,} requests, {s:10,} steps")
    print("\nwall time for 1 h vs load (16 replicas):")
    for load in (0.3, 0.5, 0.7, 0.9, 1.1):
        w, s, n = time_engine(make_pool(load * sat), 1)
        print(f"  {load:4.0%} of saturation: {w:6.3f} s, {n:8,} requests, {s:10,} steps")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

"""Prefix reuse on a real trace: the ideal share, the simulated hit rate, the capacity it buys, and its cost in speed.

What it does, on the bundled Mooncake slice (``data/samples/mooncake/conversation_trace_6001_7000.jsonl``,
1,000 requests of Kimi's conversation trace with their 512-token hash lists) or on any Mooncake-format
JSONL trace given as an argument:

1. **Ideal share.** The prompt tokens a cache that forgets nothing would serve
   (:func:`planner.sim.prefix_workload.ideal_cached_tokens`: each request, in arrival order, its
   longest leading run of blocks seen before, leaving one token to compute) over all prompt tokens.
2. **The pool.** 4 replicas of llama-3.1-8b on H100 at TP 1 (the bundled vLLM profile: its KV
   capacity, batch cap and token budget), one class, FCFS, no wait-time rejection; the trace replayed
   once with its own arrival times, time-scaled to each rate tried. Block = the trace's 512 tokens.
3. **Hit rate** (tokens served from the cache at first admission / prompt tokens) at the trace's own
   rate, caching on, under random, JSQ and cache-aware routing (Dynamo's cost, overlap weight 2).
4. **Capacity per replica**: the highest rate / 4 at which TTFT p99 (rejections at +inf) stays at most
   the SLO, by bisection on the replay rate (doubling up, then ``--steps`` halvings), with caching off
   and on under each router. The SLO is ``--ttft-ms``, default 10 s: the trace's prompts average
   11k tokens and reach 125k, and alone on an idle replica the slice's TTFT p99 is already about
   7.5 s (its longest prompts' prefill). A 1,000-request replay is a short run, so these capacities carry its noise;
   compare them with each other, not with a steady-state calibration.
5. **Sessions**: the hit rate of one hour of synthetic 5-turn conversations on the same pool under each
   router, session affinity included.
6. **Speed**: the compiled engine's wall time on the same requests with and without the cache (best of
   ``--repeats``, the two interleaved), on the trace at its own rate, once and looped for an hour
   (:class:`~planner.sim.prefix_workload.TraceReplay`), and on one hour of multi-turn sessions
   (16-token blocks) on the same pool. Goal: at most 1.3x slower with the cache. Last, a 64-replica
   pool whose distinct blocks would not fit a slot per block: the hash-table layout's wall time and memory.

Usage: ``python benchmarks/prefix_reuse.py [TRACE.jsonl] [--ttft-ms 10000] [--steps 6] [--repeats 15]``.
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
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.profiles import load_profiles, profile_for  # noqa: E402
from planner.sim.class_reuse import ClassReuse, session_sample  # noqa: E402
from planner.sim.policies import get_policy  # noqa: E402
from planner.sim.prefix_workload import TraceReplay, ideal_cached_tokens, trace_sample  # noqa: E402
from planner.sim.replica.engine import run_pool  # noqa: E402
from planner.sim.replica.metrics import replication_metrics  # noqa: E402
from planner.sim.replica.pool import ClassSpec, PoolConfig, ReplicaSpec, engine_state, run_sample  # noqa: E402
from planner.sim.workload import RequestSample, default_workload  # noqa: E402
from planner.slo import ClassSlo  # noqa: E402

TRACE = ROOT / "data/samples/mooncake/conversation_trace_6001_7000.jsonl"
REPLICAS = 4
ROUTERS = ("random", "jsq", "cache-aware")


def load_trace(path: Path, rate_rps: float | None = None) -> RequestSample:
    frame = pd.read_json(path, lines=True)
    return trace_sample(frame["timestamp"].to_numpy(), frame["input_length"].to_numpy(),
                        frame["output_length"].to_numpy(), frame["hash_ids"].tolist(), np.random.SeedSequence(0),
                        rate_rps=rate_rps)


def make_pool(router: str, caching: bool, duration_s: float, ttft_ms: float) -> PoolConfig:
    spec = ReplicaSpec.of(profile_for(load_profiles(), "llama-3.1-8b", "H100", 1, "vllm"), REPLICAS)
    klass = ClassSpec("conversation", 1.0, 1.0, 0.0, 8192.0, 1e12, ClassSlo(ttft_p99_ms=ttft_ms),
                      default_workload("interactive", "llama-3.1-8b"))
    return PoolConfig((spec,), (klass,), get_policy("fcfs"), duration_s=duration_s, warmup_s=0.0, router=router,
                      prefix_caching=caching)


def replay(path: Path, rate: float, router: str, caching: bool, ttft_ms: float) -> tuple[float, float]:
    """(TTFT p99 in ms with rejections at +inf, hit rate) of one time-scaled replay."""
    sample = load_trace(path, rate)
    rep = run_sample(make_pool(router, caching, float(sample.arrival_s[-1]) + 1e-6, ttft_ms), sample)
    rows, pool = replication_metrics(rep)
    return rows[0]["slo_ttft_p99_ms"], pool["prefix_hit_rate"]


def capacity(path: Path, router: str, caching: bool, ttft_ms: float, steps: int) -> float:
    """Highest total req/s whose replay keeps TTFT p99 within the SLO (module docstring)."""
    lo, hi = 0.0, 1.0
    while replay(path, hi, router, caching, ttft_ms)[0] <= ttft_ms:
        lo, hi = hi, 2.0 * hi
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if replay(path, mid, router, caching, ttft_ms)[0] <= ttft_ms else (lo, mid)
    return lo


def engine_walls(config: PoolConfig, samples: tuple[RequestSample, RequestSample], repeats: int) -> list[float]:
    """Best wall time of the engine alone on each sample, the runs interleaved so a change in the machine's
    other load falls on both alike."""
    best = [np.inf, np.inf]
    for _ in range(repeats):
        for i, sample in enumerate(samples):
            state, hkey, hid = engine_state(config, sample)
            began = time.perf_counter()
            run_pool(state, hkey, hid)
            best[i] = min(best[i], time.perf_counter() - began)
    return best


def speed(sample: RequestSample, repeats: int, ttft_ms: float, label: str) -> None:
    config = make_pool("jsq", True, float(sample.arrival_s[-1]) + 1e-6, ttft_ms)
    plain = replace(sample, block_ptr=None, block_ids=None, block_tokens=0, session=None)
    on, off = engine_walls(config, (sample, plain), repeats)
    print(f"  {label}: {sample.n:,} requests, with cache {on:.3f} s, without {off:.3f} s -> {on / off:.2f}x"
          "   goal <= 1.3x")


def large_pool(ttft_ms: float) -> None:
    """A pool too large for a slot per distinct block: 64 replicas, 30 min of sessions at 9.6 sessions/s."""
    big = session_sample(48.0, 1800.0, default_workload("interactive", "llama-3.1-8b"),
                         ClassReuse(130_048, turns=5, think_s=30.0), 16, np.random.SeedSequence(1))
    spec = ReplicaSpec.of(profile_for(load_profiles(), "llama-3.1-8b", "H100", 1, "vllm"), 64)
    config = replace(make_pool("cache-aware", True, 1800.0, ttft_ms), replicas=(spec,))
    state, hkey, hid = engine_state(config, big)
    began = time.perf_counter()
    run_pool(state, hkey, hid)
    assert big.block_ids is not None
    direct_gb = 64 * np.unique(big.block_ids).size * 16 / 1e9
    print(f"  64 replicas, cache-aware, {big.n:,} session requests: {time.perf_counter() - began:.2f} s with a "
          f"{state.cache.nbytes / 1e6:,.0f} MB hash table per pool (a slot per distinct block: {direct_gb:.1f} GB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path, default=TRACE)
    parser.add_argument("--ttft-ms", type=float, default=10000.0)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    began = time.perf_counter()
    sample = load_trace(args.trace)
    native = sample.n / (float(sample.arrival_s[-1]) * sample.n / (sample.n - 1))
    ideal = ideal_cached_tokens(sample).sum() / sample.prompt_tokens.sum()
    print(f"trace {args.trace.name}: {sample.n:,} requests at {native:.2f} req/s, mean prompt "
          f"{sample.prompt_tokens.mean():,.0f} tokens, blocks of {sample.block_tokens}")
    print(f"ideal share (a cache that forgets nothing): {ideal:.1%} of prompt tokens")
    kv = make_pool("jsq", True, 1.0, args.ttft_ms).replicas[0].kv_capacity_tokens
    assert sample.block_ids is not None
    distinct = np.unique(sample.block_ids).size * sample.block_tokens
    print(f"KV capacity per replica {kv:,} tokens; the trace's distinct full blocks hold {distinct:,} tokens")
    print(f"\n{REPLICAS} x llama-3.1-8b H100 TP1, FCFS; hit rate at the trace's rate; capacity per replica at "
          f"TTFT p99 <= {args.ttft_ms:,.0f} ms:")
    print("| router | hit rate | capacity, cache off (req/s) | capacity, cache on (req/s) | on / off |")
    print("|---|---|---|---|---|")
    for router in ROUTERS:
        _, hit = replay(args.trace, native, router, True, args.ttft_ms)
        off = capacity(args.trace, router, False, args.ttft_ms, args.steps) / REPLICAS
        on = capacity(args.trace, router, True, args.ttft_ms, args.steps) / REPLICAS
        print(f"| {router} | {hit:.1%} | {off:.3f} | {on:.3f} | {on / off:.2f} |")
    sessions = session_sample(3.0, 3600.0, default_workload("interactive", "llama-3.1-8b"),
                              ClassReuse(130_048, turns=5, think_s=30.0), 16, np.random.SeedSequence(1))
    print(f"\nhit rate on 1 h of 5-turn sessions (0.6 sessions/s, think time 30 s, 16-token blocks; ideal "
          f"{ideal_cached_tokens(sessions).sum() / sessions.prompt_tokens.sum():.1%}), same pool:")
    for router in (*ROUTERS, "session-affinity"):
        rep = run_sample(make_pool(router, True, 3600.0, args.ttft_ms), sessions)
        rows, pool = replication_metrics(rep)
        print(f"  {router:16s} hit rate {pool['prefix_hit_rate']:.1%}, TTFT p99 {rows[0]['ttft_p99_ms']:,.0f} ms")
    print("\nengine wall time with the prefix cache against without, same requests (JSQ):")
    speed(sample, args.repeats, args.ttft_ms, f"the trace once at {native:.2f} req/s")
    frame = pd.read_json(args.trace, lines=True)
    source = TraceReplay.from_records(frame["timestamp"], frame["input_length"], frame["output_length"],
                                      frame["hash_ids"])
    hour = source.draw(np.array([native]), [], 3600.0, np.random.SeedSequence(2))
    speed(hour, max(1, args.repeats // 3), args.ttft_ms, f"1 h of the trace looped at {native:.2f} req/s")
    speed(sessions, args.repeats, args.ttft_ms, "1 h of 5-turn sessions at 0.6 sessions/s")
    large_pool(args.ttft_ms)
    print(f"\ntotal {time.perf_counter() - began:.0f} s; load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

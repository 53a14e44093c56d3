"""The simulator's one-time compile: cold (empty numba cache) against warm (cache loaded), same run.

Each repetition makes an empty cache folder, points ``NUMBA_CACHE_DIR`` at it and starts
two fresh interpreters one after the other. Each imports the replica engine and runs one
replication of a tiny pool, which compiles everything ``planner simulate`` and ``planner
calibrate`` run (the engine has one signature whatever the pool):

* **cold**: the first interpreter finds the folder empty and compiles;
* **warm**: the second loads the first one's cached code. It is the baseline.

For each it prints the wall time of the import and of the first call, and the CPU time
(user + sys) of the whole interpreter. The machine may be shared and busy, so what to
compare across runs is the ratio cold / warm measured in the same repetition, and the
CPU time, which waiting for a core does not inflate. The compile itself is single-threaded.

Usage: ``python benchmarks/compile_time.py [--repeats 3]``. It prints figures; it does not
pass or fail.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import numpy as np
from planner.sim.policies import get_policy
from planner.profiles.step_model import StepModel
from planner.sim.replica.pool import ClassSpec, PoolConfig, ReplicaSpec, run_replication
from planner.sim.workload import default_workload
from planner.slo import ClassSlo
t1 = time.perf_counter()
replica = ReplicaSpec("H100", 2, StepModel.linear(10.0, 1e-4, 0.05), 50_000, 8)
klass = ClassSpec("interactive", 2.0, 1.0, 0.0, 1024.0, 1e4, ClassSlo(ttft_p99_ms=1e4, e2e_p99_ms=1e5),
                  default_workload("interactive", "llama-3.1-8b"))
run_replication(PoolConfig((replica,), (klass,), get_policy("fcfs"), duration_s=20.0, warmup_s=2.0),
                np.random.SeedSequence(0))
t2 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "first_call_s": t2 - t1}}))
"""


def run_child(cache: str) -> dict[str, float]:
    """Wall times reported by one fresh interpreter, and its CPU time (user + sys) and wall time from outside."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT))], env=env, capture_output=True,
                          text=True, check=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    figures["process_wall_s"] = wall
    figures["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    opts = parser.parse_args()
    print(f"load average before: {os.getloadavg()}  (cores: {os.cpu_count()})")
    rows = []
    for i in range(opts.repeats):
        with tempfile.TemporaryDirectory() as cache:
            cold = run_child(cache)
            warm = run_child(cache)
        rows.append((cold, warm))
        print(f"  repeat {i + 1}: cold first call {cold['first_call_s']:6.2f} s wall, "
              f"process {cold['process_cpu_s']:6.2f} s CPU | warm first call {warm['first_call_s']:5.2f} s, "
              f"process {warm['process_cpu_s']:5.2f} s CPU"
              f" | ratio {cold['first_call_s'] / warm['first_call_s']:5.1f}x")

    def median(key: str, which: int) -> float:
        return statistics.median(row[which][key] for row in rows)

    print("\nmedian over repeats                     cold      warm   cold/warm")
    for key, label in (("first_call_s", "first call (compile or load), wall"), ("import_s", "import, wall"),
                       ("process_wall_s", "whole process, wall"), ("process_cpu_s", "whole process, CPU user+sys")):
        cold, warm = median(key, 0), median(key, 1)
        print(f"  {label:<37s} {cold:6.2f} s  {warm:6.2f} s  {cold / warm:6.1f}x")
    compile_s = median("process_cpu_s", 0) - median("process_cpu_s", 1)
    print(f"  one-time compile (cold - warm process CPU): {compile_s:.2f} s   goal < 10 s on 2 cores")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

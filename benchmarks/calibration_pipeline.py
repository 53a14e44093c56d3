"""A calibration with larger pools, its two stages run as one stream against one after the other, in one run.

The loop calibrates every unit alone and then at its larger pool sizes (``planner/calibrate/run.py``). A unit's pool
task needs only that unit's answer, so it starts as the answer arrives, beside the units still searching
(``planner.engine.run_tasks``'s ``follow``). ``staged`` is the order this replaced: every unit's search, then every
pool task, each stage waiting for its slowest task while the other cores have nothing to do.

Both runs calibrate the same grid cold (no cache: nothing is read from an earlier run or from the other mode), with
the same seed, on the same engine and workers, and must give the same table to the byte. The larger pool sizes are
the same for every unit (``--pool-sizes``, default 2, 4, 8), where the loop takes each unit's own up to the largest
pool its plan can need (``planner/loop/pool_sizes.py``). The script prints each mode's wall and CPU seconds, the
ratio, and the 1-minute load average before and after, since the machine may be shared. Usage::

    python benchmarks/calibration_pipeline.py [--scenario scenarios/demo.toml] [--pool-sizes 2,4,8]
        [--policy drr-wspt] [--first staged]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner.calibrate.run as calibrate_run  # noqa: E402
from planner.calibrate import calibrate  # noqa: E402
from planner.calibrate.pools import parse_pool_sizes  # noqa: E402
from planner.engine import run_tasks  # noqa: E402
from planner.profiles import load_profiles  # noqa: E402
from planner.scenario import load_scenario  # noqa: E402


def staged(fn: Callable[[Any], Any], tasks: Sequence[Any], *, follow: Callable[[int, Any], Sequence[Any]],
           **engine: Any) -> list[Any]:
    """``run_tasks`` with its follow-ups run as a second stage, after every first task has finished."""
    first = run_tasks(fn, tasks, **engine)
    then = [task for i, result in enumerate(first) for task in follow(i, result)]
    second = run_tasks(fn, then, **engine)
    for j, result in enumerate(second):
        follow(len(first) + j, result)
    return first + second


def cpu_seconds() -> float:
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def calibrated(mode: str, args: argparse.Namespace) -> tuple[bytes, float, float]:
    """The table's CSV, wall and CPU seconds of one cold calibration in ``mode``."""
    scenario, profiles = load_scenario(args.scenario), load_profiles()
    original = calibrate_run.run_tasks
    calibrate_run.run_tasks = staged if mode == "staged" else original  # type: ignore[assignment]
    try:
        began, cpu = time.perf_counter(), cpu_seconds()
        result = calibrate(scenario, profiles, policy=args.policy, seed=scenario.seeds.base,
                           larger_pools=args.pool_sizes)
        wall, cpu = time.perf_counter() - began, cpu_seconds() - cpu
    finally:
        calibrate_run.run_tasks = original
    return result.table.to_csv(index=False).encode(), wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "demo.toml")
    parser.add_argument("--pool-sizes", type=parse_pool_sizes, default=(2, 4, 8))
    parser.add_argument("--policy", default=None, help="default: the scenario's")
    parser.add_argument("--first", choices=("staged", "pipelined"), default="staged")
    args = parser.parse_args()
    order = [args.first, "pipelined" if args.first == "staged" else "staged"]
    print(f"{args.scenario.name}, pools of {', '.join(map(str, args.pool_sizes))}, cold, "
          f"load {os.getloadavg()[0]:.1f} before")
    runs = {mode: calibrated(mode, args) for mode in order}
    for mode in order:
        _, wall, cpu = runs[mode]
        print(f"  {mode:<9} wall {wall:7.1f} s   CPU {cpu:7.1f} s")
    staged_wall, pipelined_wall = runs["staged"][1], runs["pipelined"][1]
    print(f"  staged / pipelined wall: x{staged_wall / pipelined_wall:.2f}; "
          f"tables identical: {runs['staged'][0] == runs['pipelined'][0]}; load {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()

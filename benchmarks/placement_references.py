"""The placement's references beside its search: as before against today, in one run.

``planner place`` puts a plan in context with two references that need only the instance: the single-SKU
baseline (the cheapest plan on one SKU, whose plan replaces the searched one when cheaper) and the perfectly
elastic bound. On a program too large for one block they run beside the search (``planner/placement/place.py``,
``_solved``). Before, they ran one after the other in one worker process, and the baseline solved each SKU's
program as one block of every model (``solve_instance``'s ``auto`` on a program that small), which stops at its node
limit. Today each reference has a process of its own, so the bound no longer waits for the baseline, and the
baseline's programs are solved block by block, as the search's are. This script places the same instance both ways,
alternating which goes first, and prints per way the wall seconds of the whole step, the plan, the baseline and the
bound (the plan and the bound must be the same; the baseline may differ within its gap), then the ratio. It also
times each reference alone, so that what bounds the step is visible.

The instance is the demo at the default periods on the stand-in forecast (``warm_start_moves.build``), on the
analytic capacity or on a table from ``planner calibrate`` (``--capacity``). Every figure comes from this machine and
this run, with the 1-minute load average before and after. Usage::

    python benchmarks/placement_references.py [--capacity CAPACITY.csv] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from warm_start_moves import build

from planner.engine.processes import in_background
from planner.placement import place as place_module
from planner.placement.limits import DEFAULT_NODE_LIMIT, DEFAULT_TIME_LIMIT_S, SafetyNet
from planner.placement.place import DEFAULT_GAP, DEFAULT_SOLVER, ReferenceTask, references


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def one_process(task: ReferenceTask) -> tuple[Any, Any, dict[str, Any]]:
    """Before: the search here, both references after each other in one worker process."""
    net = SafetyNet.starting_now(task.time_limit_s)
    with in_background(references, task) as pending:
        summary = place_module.solve_instance(task.inst, backend=task.solver, node_limit=task.node_limit,
                                              gap=task.gap, net=net)
        single, elastic = pending.result()
    return summary, single, elastic


def process_each(task: ReferenceTask) -> tuple[Any, Any, dict[str, Any]]:
    """Today: the search here, each reference in a worker process of its own, the baseline block by block."""
    task = replace(task, strategy="decomposed")
    net = SafetyNet.starting_now(task.time_limit_s)
    with in_background(place_module._baseline, task) as single, \
            in_background(place_module._elastic, task) as bound:
        summary = place_module.solve_instance(task.inst, backend=task.solver, node_limit=task.node_limit,
                                              gap=task.gap, net=net)
        return summary, single.result(), bound.result()


def _timed(fn, *args):
    began = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacity", type=Path, default=None, help="a capacity table from `planner calibrate`")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    inst = build(1.0, args.capacity)
    task = ReferenceTask(inst, DEFAULT_SOLVER, DEFAULT_GAP, DEFAULT_NODE_LIMIT, DEFAULT_TIME_LIMIT_S)
    print(f"demo at the default periods, capacity {args.capacity or 'analytic'}; {_load()}")
    ways = [("one process for both (before)", one_process), ("a process each (today)", process_each)]
    totals = {name: 0.0 for name, _ in ways}
    figures: dict[str, Any] = {}
    for n in range(args.repeats):
        for name, fn in ways if n % 2 == 0 else ways[::-1]:
            (summary, single, elastic), seconds = _timed(fn, task)
            totals[name] += seconds
            seen = (round(summary.objective, 2), single.figures.get("usd"), elastic.get("usd"))
            figures.setdefault(name, seen)
            print(f"{name:32} {seconds:7.1f} s  plan ${seen[0]:,.2f}  single-SKU {seen[1]}  elastic {seen[2]}")
    alone = {}
    for name, fn in (("search alone", lambda: place_module.solve_instance(
            inst, backend=task.solver, node_limit=task.node_limit, gap=task.gap)),
                     ("single-SKU baseline alone, before", lambda: place_module._baseline(task)),
                     ("single-SKU baseline alone, today",
                      lambda: place_module._baseline(replace(task, strategy="decomposed"))),
                     ("elastic bound alone", lambda: place_module._elastic(task))):
        _, alone[name] = _timed(fn)
        print(f"{name:32} {alone[name]:7.1f} s")
    before, today = (totals[name] for name, _ in ways)
    same = len({(plan, bound) for plan, _, bound in figures.values()}) == 1
    print(f"total over {args.repeats} repeat(s): before {before:.1f} s, today {today:.1f} s, x{before / today:.2f}; "
          f"the same plan and elastic bound: {same}; {_load()}")


if __name__ == "__main__":
    main()

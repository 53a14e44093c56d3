"""The warm start's descent with and without moving a replica between two units of a region.

The warm start (``planner/placement/heuristics.py``) fixes the reserved replicas R by a
steepest descent on the cut LP's value. Its moves were ±1 replica on one unit; it now also
moves one replica between two units of a region. This script places the same instances
both ways in one run, alternating which goes first, and prints per block the warm start,
the plan, the proven bound, the gap and the seconds, with the totals' ratios.

The instances are the demo (``scenarios/demo.toml``) at the default periods (``how:4``) on
the stand-in forecast of ``placement_speed.py`` (the last 168 hours of the demo history,
moved ahead) at each ``--scale``. The capacity is the analytic estimate, or the table
``planner calibrate`` wrote when ``--capacity CSV`` is given: the placements a report
makes are on calibrated capacity, where pools of mixed units are common.

Every search stops on its gap or its node limit, so the plans are the same on any
machine; only the seconds vary with the machine and its load (printed before and after).
Usage::

    python benchmarks/warm_start_moves.py [--capacity capacity.csv] [--scale 0.8,1.0,1.2]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from placement_speed import analytic_table, stand_in_forecast

from planner.catalog import load_catalog
from planner.paths import PROJECT_ROOT
from planner.placement import heuristics
from planner.placement.instance import build_instance
from planner.placement.limits import DEFAULT_NODE_LIMIT
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.placement.place import DEFAULT_GAP, DEFAULT_PERIODS
from planner.placement.solve import solve_instance
from planner.profiles import load_profiles
from planner.scenario import load_scenario, usable_profiles

HOURS = 744
"""A month, as the monthly report plans."""
WITH_SWAPS = heuristics._moves


MOVES_ENV = "WARM_START_MOVES"
"""``single`` while this script places with the moves of before. Blocks are placed in worker processes made with
``spawn``; each imports this script again, so the choice reaches them through the environment they inherit."""


def single_steps(milp, movable: np.ndarray, swaps: bool = True) -> list[np.ndarray]:
    """The descent's moves before: ±1 replica on one movable unit, whatever it is asked."""
    return WITH_SWAPS(milp, movable, False)


def _apply_moves() -> None:
    heuristics._moves = single_steps if os.environ.get(MOVES_ENV) == "single" else WITH_SWAPS


_apply_moves()  # in this process, and in every worker process as it imports this script


def build(scale: float, capacity: Path | None):
    scenario = load_scenario(PROJECT_ROOT / "scenarios" / "demo.toml")
    scenario = scenario.model_copy(update={"horizon": f"{HOURS}h"})
    forecast = stand_in_forecast(HOURS, scale)
    forecast = forecast[forecast["traffic_class"].isin(scenario.class_names)
                        & forecast["model"].isin([m.name for m in scenario.models])]
    profiles = usable_profiles(scenario, load_profiles())
    table = analytic_table(scenario, profiles) if capacity is None else pd.read_csv(capacity)
    demand = demand_from_forecast(forecast, scenario, scenario.capacity.forecast_quantile,
                                  parse_periods(DEFAULT_PERIODS))
    return build_instance(scenario, demand, load_catalog(), profiles, table)


def place(inst, single: bool) -> dict:
    """The placement with the moves of before (``single``) or with swaps, in this process and its workers."""
    os.environ[MOVES_ENV] = "single" if single else "swaps"
    _apply_moves()
    try:
        began = time.perf_counter()
        summary = solve_instance(inst, node_limit=DEFAULT_NODE_LIMIT, gap=DEFAULT_GAP)
        return {"seconds": time.perf_counter() - began, "objective": summary.objective, "blocks": summary.blocks}
    finally:
        os.environ.pop(MOVES_ENV)
        _apply_moves()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capacity", type=Path, default=None, help="a capacity table from `planner calibrate`")
    parser.add_argument("--scale", default="0.8,1.0,1.2", help="demand scales, comma-separated")
    args = parser.parse_args()
    totals = {"single steps": 0.0, "with swaps": 0.0}
    costs = {"single steps": 0.0, "with swaps": 0.0}
    print(f"load {os.getloadavg()[0]:.1f}; capacity: {args.capacity or 'analytic'}")
    for n, scale in enumerate(float(s) for s in args.scale.split(",")):
        inst = build(scale, args.capacity)
        runs = [("single steps", True), ("with swaps", False)]
        for label, single in runs if n % 2 == 0 else runs[::-1]:
            out = place(inst, single)
            totals[label] += out["seconds"]
            costs[label] += out["objective"]
            print(f"scale {scale:.2f} {label:>12}: {out['seconds']:6.1f} s  plan ${out['objective']:,.2f}")
            for block in out["blocks"]:
                gap = (block.objective - block.bound) / block.objective
                print(f"    {'+'.join(block.models):<32} warm ${block.heuristic_objective:>11,.2f}  plan "
                      f"${block.objective:>11,.2f}  bound ${block.bound:>11,.2f}  gap {100 * gap:5.2f} %  "
                      f"{block.seconds:6.1f} s")
    base, new = totals["single steps"], totals["with swaps"]
    print(f"total: single steps {base:.1f} s, with swaps {new:.1f} s, x{base / new:.2f}; "
          f"plans ${costs['single steps']:,.2f} against ${costs['with swaps']:,.2f}; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""Placement speed: time and gap on ``scenarios/global.toml`` and the demo with hourly periods.

Sections (``--sections``, default all):

* ``curve``: gap against time on both instances (the demo, ``scenarios/demo.toml`` on 336
  hourly periods, and global on 168), with HiGHS, CBC and OR-Tools side by side, each at
  node limits 1, 100 and the default: the deterministic settings, so the gaps are the same
  on any machine; wall and CPU seconds (this process and its workers) are this run's;
* ``target``: the default backend on 168 hourly periods with gap targets 1 % and 0.5 %
  under the node limit: the time each search takes, and the gap it ends at;
* ``backends``: HiGHS, CBC (PuLP) and OR-Tools (SCIP) side by side on the same instance,
  same node limit, gap target 1 %;
* ``periods``: the default backend on 24, 168 and 720 hourly periods;
* ``regions``: the default backend with the first 4, 7 and 10 serving regions of the
  scenario (origins whose traffic has no region left are dropped);
* ``direct``: the undecomposed joint model handed to HiGHS as it is, for comparison.

The forecast. It is a deterministic stand-in, not ``planner forecast`` output: the last N
hours of ``data/history/demo_history.parquet`` (requests per hour, per origin, model and
class) moved N hours ahead, with mean = q50 = the count, q90 = 1.15×, q95 = 1.25× and
q99 = 1.45× it. The history has no qwen3-235b-a22b, so its series are llama-3.1-70b's at half
the rate. ``--scale`` multiplies every rate. The capacity coefficients are the analytic
estimate (no calibration yet). Both instances are built as ``planner place`` builds them:
the profile rows of each model's engine only (``usable_profiles``) and the scenario's policy.

Every figure comes from this machine and this run; the script prints a table (with one
line per block under each run: models, serving regions, integers, objective, bound, LP
bound, warm start, gap, seconds, and the 1-minute load average before and after the run,
since the machine may be shared) and writes nothing unless ``--json PATH`` is given.
Usage::

    python benchmarks/placement_speed.py [--node-limit 2000] [--time-limit 900] [--sections target,backends]

Every search stops on its gap or its node limit, so the plans and gaps are the same on
any machine; only the seconds vary with the machine and its load. ``--time-limit`` is
the safety net; a run it stops is marked ``time_limit_hits`` (and then does not
reproduce).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import pandas as pd

from planner.catalog import load_catalog
from planner.engine import available_cores
from planner.paths import PROJECT_ROOT, data_dir
from planner.placement import highs_backend
from planner.placement.capacity import analytic_capacity
from planner.placement.instance import build_instance
from planner.placement.limits import DEFAULT_NODE_LIMIT, DEFAULT_TIME_LIMIT_S
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.placement.place import analytic_lengths
from planner.placement.problem import formulate
from planner.placement.solve import solve_instance
from planner.profiles import load_profiles
from planner.scenario import load_scenario, usable_profiles

QUANTILE_FACTORS = {"q50": 1.0, "q90": 1.15, "q95": 1.25, "q99": 1.45}
MIXTRAL_SHARE = 0.5
SECTIONS = ("curve", "target", "backends", "periods", "regions", "direct")
CURVE_NODE_LIMITS = (1, 100, DEFAULT_NODE_LIMIT)
CURVE_BACKENDS = ("highs", "cbc", "ortools")


def stand_in_forecast(hours: int, scale: float = 1.0) -> pd.DataFrame:
    """The deterministic stand-in forecast described in the module docstring."""
    history = pd.read_parquet(data_dir() / "history" / "demo_history.parquet")
    stamps = pd.to_datetime(history["ts"], utc=True)
    last = stamps.max()
    window = history[stamps > last - pd.Timedelta(hours=hours)].copy()
    window["ts"] = (pd.to_datetime(window["ts"], utc=True) + pd.Timedelta(hours=hours)).dt.strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    wide = window.pivot_table(index=["region", "model", "traffic_class"], columns="ts", values="requests",
                              fill_value=0, aggfunc="sum")
    frame = wide.stack().rename("mean").reset_index()
    mixtral = frame[frame["model"] == "llama-3.1-70b"].assign(model="qwen3-235b-a22b")
    mixtral["mean"] = mixtral["mean"] * MIXTRAL_SHARE
    frame = pd.concat([frame, mixtral], ignore_index=True)
    frame["mean"] = frame["mean"].astype(float) * scale
    for column, factor in QUANTILE_FACTORS.items():
        frame[column] = frame["mean"] * factor
    frame["model_used"] = "stand-in: demo history"
    return frame


def build(hours: int, scale: float, n_regions: int | None = None, name: str = "global"):
    scenario = load_scenario(PROJECT_ROOT / "scenarios" / f"{name}.toml")
    scenario = scenario.model_copy(update={"horizon": f"{hours}h"})  # the stand-in covers exactly these hours
    forecast = stand_in_forecast(hours, scale)
    forecast = forecast[forecast["traffic_class"].isin(scenario.class_names)  # the demo has classes global lacks
                        & forecast["model"].isin([m.name for m in scenario.models])]
    if n_regions is not None:
        scenario, forecast = _fewer_regions(scenario, forecast, n_regions)
    # as `planner place` builds it: the profiles of each model's engine, the scenario's policy
    profiles = usable_profiles(scenario, load_profiles())
    demand = demand_from_forecast(forecast, scenario, scenario.capacity.forecast_quantile, parse_periods("hourly"))
    return build_instance(scenario, demand, load_catalog(), profiles, analytic_table(scenario, profiles))


def analytic_table(scenario, profiles: pd.DataFrame) -> pd.DataFrame:
    """The analytic capacity table as `planner place` makes it without a calibrated table: each (model, class)'s
    lengths from the scenario's workloads."""
    lengths, _ = analytic_lengths(scenario)
    return analytic_capacity(profiles, lengths, kv_fraction=scenario.policy.admission.kv_fraction,
                             policy=scenario.policy.name)


def _fewer_regions(scenario, forecast: pd.DataFrame, n_regions: int):
    """The scenario with its first ``n_regions`` serving regions; origins left with no region go."""
    from planner.scenario import parse_scenario

    data = scenario.model_dump(mode="python")
    kept = [r for r in data["regions"]["serving"]][:n_regions]
    keys = {r["key"] for r in kept}
    zones = {r["zone"] for r in kept}
    origins = [o for o in data["regions"]["origins"] if zones & set(o["residency"])]
    data["regions"] = {"serving": kept, "origins": origins,
                       "latency_ms": {o["name"]: {k: v for k, v in data["regions"]["latency_ms"][o["name"]].items()
                                                  if k in keys} for o in origins}}
    for klass in data["classes"]:  # keep every (origin, class) reachable within its budget
        for origin in origins:
            allowed = [k for k in keys if next(r for r in kept if r["key"] == k)["zone"] in origin["residency"]]
            nearest = min(data["regions"]["latency_ms"][origin["name"]][k] for k in allowed)
            klass["latency_budget_ms"] = max(klass["latency_budget_ms"], nearest)
    reduced = parse_scenario(data, source=f"global.toml (first {n_regions} regions)")
    return reduced, forecast[forecast["region"].isin(reduced.origin_names)]


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished worker processes."""
    return sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))


def run(inst, backend: str, limits: tuple[int, float], gap: float, strategy: str = "auto") -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    cpu_before = _cpu_seconds()
    began = time.perf_counter()
    node_limit, time_limit = limits
    summary = solve_instance(inst, backend=backend, node_limit=node_limit, time_limit_s=time_limit, gap=gap,
                             strategy=strategy)
    wall = time.perf_counter() - began
    blocks = [{key: block.to_dict()[key] for key in ("models", "regions", "integers", "status", "objective", "bound",
                                                     "lp_bound", "warm_start_objective", "gap", "seconds")}
              for block in summary.blocks]
    return {"backend": backend, "strategy": summary.strategy, "status": summary.status.value,
            "objective_usd": round(summary.objective, 2) if summary.status.has_solution else None,
            "bound_usd": round(summary.bound, 2), "gap_pct": round(100 * summary.gap, 3)
            if summary.status.has_solution else None, "wall_s": round(wall, 1),
            "cpu_s": round(_cpu_seconds() - cpu_before, 1),
            "reached_target": summary.status.value in ("optimal", "feasible_within_gap"),
            "time_limit_hits": len(summary.time_limit_hits),
            "load_avg_1min": f"{load_before:.1f}->{os.getloadavg()[0]:.1f}", "blocks": blocks}


def _size(inst) -> dict[str, int]:
    milp = formulate(inst, budget=False, cuts=False)
    return {"periods": inst.n_periods, "regions": len(inst.regions), "units": inst.n_units,
            "columns": milp.n_cols, "rows": milp.n_rows, "integers": milp.n_integer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--node-limit", type=int, default=DEFAULT_NODE_LIMIT)
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--curve-instances", default="demo,global", help="instances of the curve section")
    args = parser.parse_args()
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    highs_backend.new_highs()  # mute HiGHS's banner before any solve
    limits = (args.node_limit, args.time_limit)
    print(f"placement speed on {available_cores()} cores, node limit {args.node_limit}, safety net "
          f"{args.time_limit:g} s, demand scale "
          f"{args.scale:g}; forecast: deterministic stand-in from the demo history (not planner forecast output)")
    results: dict[str, Any] = {"node_limit": args.node_limit, "time_limit_s": args.time_limit, "scale": args.scale,
                               "cores": available_cores(),
                               "forecast": "stand-in: last N hours of the demo history, mixtral = 0.5 x llama-3.1-70b"}
    base = build(168, args.scale)
    results["size_168h"] = _size(base)
    print(f"global, 168 hourly periods: {results['size_168h']}")
    if "curve" in sections:
        demo = build(336, args.scale, name="demo")
        print(f"demo, 336 hourly periods: {_size(demo)}")
        rows = [{"instance": label, "node_limit": nodes, **run(inst, backend, (nodes, args.time_limit), 0.01)}
                for label, inst in (("demo 336 h", demo), ("global 168 h", base))
                if label.split()[0] in args.curve_instances.split(",")
                for backend in CURVE_BACKENDS for nodes in CURVE_NODE_LIMITS]
        results["curve"] = rows
        _table("gap against time, gap target 1 %: each row stops on its gap or node limit", rows)
    if "target" in sections:
        rows = [{"target_gap_pct": 100 * g, **run(base, "highs", limits, g)} for g in (0.01, 0.005)]
        results["target"] = rows
        _table("default backend (highs), 168 hourly periods", rows)
    if "backends" in sections:
        rows = [run(base, backend, limits, 0.01) for backend in ("highs", "cbc", "ortools")]
        results["backends"] = rows
        _table("backends side by side, 168 hourly periods, gap target 1 %", rows)
    if "direct" in sections:
        rows = [run(base, "highs", limits, 0.01, strategy="direct")]
        results["direct"] = rows
        _table("undecomposed joint model, HiGHS, 168 hourly periods", rows)
    if "periods" in sections:
        rows = []
        for hours in (24, 168, 720):
            inst = base if hours == 168 else build(hours, args.scale)
            rows.append({**_size(inst), **run(inst, "highs", limits, 0.01)})
        results["periods"] = rows
        _table("growth with periods (highs, gap target 1 %)", rows)
    if "regions" in sections:
        rows = []
        for n in (4, 7, 10):
            inst = build(168, args.scale, n)
            rows.append({**_size(inst), **run(inst, "highs", limits, 0.01)})
        results["regions"] = rows
        _table("growth with serving regions (highs, 168 periods, gap target 1 %)", rows)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def _table(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    columns = [c for c in rows[0] if c != "blocks"]
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(str(row[c]) for c in columns))
        for block in row.get("blocks", []):
            where = ",".join(block["regions"]) if block["regions"] else "all regions"
            print(f"    {'+'.join(block['models'])} [{where}]: {block['integers']} integers, {block['status']}, "
                  f"{block['objective']} vs bound {block['bound']} (LP {block['lp_bound']}, warm start "
                  f"{block['warm_start_objective']}), gap {block['gap']}, {block['seconds']} s")


if __name__ == "__main__":
    main()

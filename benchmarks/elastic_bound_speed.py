"""The perfectly elastic bound's time: one period after another with HiGHS's defaults (the
baseline, measured in this run) against the shipped way, periods side by side with
``bounds.ELASTIC_OPTIONS``.

The bound is the sum of one small MILP per period (``planner/placement/bounds.py``); on the
demo at the default periods it is the longest step of ``planner place``. Instances: the
demo (``scenarios/demo.toml``) on the stand-in forecast of ``placement_speed.py`` (the
demo history's last 14 days moved ahead), folded into day-long blocks (``how:24``), the
default four-hour blocks (``how:4``) and hours. Printed per row: periods, seconds, the
ratio to the baseline's seconds in the same run, the bound and its status (the bound is
deterministic; only the seconds depend on the machine and its load, so read the ratio).
Usage::

    python benchmarks/elastic_bound_speed.py [--periods how:24,how:4,hourly]
"""

from __future__ import annotations

import argparse
import os
import time

from placement_speed import analytic_table, stand_in_forecast

from planner.catalog import load_catalog
from planner.engine import available_cores
from planner.paths import PROJECT_ROOT
from planner.placement import bounds, highs_backend
from planner.placement.instance import build_instance
from planner.placement.limits import SafetyNet
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.profiles import load_profiles
from planner.scenario import load_scenario, usable_profiles

WAYS = (("one after another, HiGHS defaults (baseline)", 1, {}),
        ("side by side, HiGHS defaults", None, {}),
        ("side by side, ELASTIC_OPTIONS (shipped)", None, dict(bounds.ELASTIC_OPTIONS)))


def demo_instance(periods: str):
    scenario = load_scenario(PROJECT_ROOT / "scenarios" / "demo.toml")
    forecast = stand_in_forecast(14 * 24)
    forecast = forecast[forecast["traffic_class"].isin(scenario.class_names)
                        & forecast["model"].isin([m.name for m in scenario.models])]
    profiles = usable_profiles(scenario, load_profiles())
    demand = demand_from_forecast(forecast, scenario, scenario.capacity.forecast_quantile, parse_periods(periods))
    return build_instance(scenario, demand, load_catalog(), profiles, analytic_table(scenario, profiles))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--periods", default="how:24,how:4,hourly")
    args = parser.parse_args()
    highs_backend.new_highs()  # mute HiGHS's banner before any solve
    shipped = dict(bounds.ELASTIC_OPTIONS)
    print(f"elastic bound on {available_cores()} cores, 1-minute load {os.getloadavg()[0]:.1f}")
    print("periods | way | seconds | ratio to baseline | bound USD | status")
    try:
        for spec in (s.strip() for s in args.periods.split(",") if s.strip()):
            inst = demo_instance(spec)
            baseline = None
            for label, threads, options in WAYS:
                bounds.ELASTIC_OPTIONS = options
                began = time.perf_counter()
                figures = bounds.elastic_bound(inst, SafetyNet.starting_now(3600), threads=threads)
                seconds = time.perf_counter() - began
                baseline = baseline or seconds
                print(f"{spec} ({inst.n_periods}) | {label} | {seconds:.1f} | {seconds / baseline:.2f} | "
                      f"{figures['usd']} | {figures['status']}", flush=True)
    finally:
        bounds.ELASTIC_OPTIONS = shipped


if __name__ == "__main__":
    main()

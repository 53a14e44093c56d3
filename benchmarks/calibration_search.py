"""Calibration's engine-setting search: pruned against unpruned, and the global grid cold and warm.

Sections (``--sections``, default all):

* ``agreement``: a small grid of ``scenarios/global.toml``, llama-3.1-8b on H100 at TP 1 and
  2 and llama-3.1-70b on H200 at TP 2 and 4, calibrated twice on the same seed: with
  every engine setting searched in full (``--no-prune``) and with pruning (the step-time
  model's ceiling, then one probe above the best rate; ``planner/calibrate/unit.py``). It
  prints, per unit, the setting each run chose, its rate, their ratio, and the simulations
  and seconds of each run; the pruned run must land within the search tolerance.
* ``order``: the demo's grid (15 units, 12 engine settings each) calibrated cold twice on the same seed: the
  settings searched in order of decreasing analytic ceiling (the order before the screen), and screened first
  (replication 0 of each at one common rate, the best screen searched first; ``planner/calibrate/unit.py``).
  Per unit it prints the setting and rate each order chose, their ratio and the replications of each, then the
  totals with the seconds. The two runs differ only in the order; each must land within the tolerance of the
  other. The ceiling order is set in the spawned workers too, through the environment they inherit and read as
  they import this script.
* ``global``: the whole candidate grid of ``scenarios/global.toml`` (every model x SKU x TP
  the scenario allows, each over the engine-setting grid), cold (empty cache) and then warm
  (every unit answered from the cache), with the ratio of the two.

Every figure comes from this machine and this run, with the 1-minute load average before and
after (the machine may be shared). Nothing is written but the temporary cache. Usage::

    python benchmarks/calibration_search.py [--sections agreement,order,global] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner.calibrate.unit as unit_module  # noqa: E402
from planner.compile_ahead import prepare  # noqa: E402
from planner.profiles import load_profiles  # noqa: E402
from planner.scenario import load_scenario  # noqa: E402
from planner.workflows.calibrate import calibrate_with_cache as calibrate  # noqa: E402

ORDER_VARIABLE = "CALIBRATION_SEARCH_ORDER"
CEILING_ORDER = "ceiling"
SCREEN = unit_module.screen


def _unscreened(task, ceilings, memo=None):
    """No screen: every setting unscored, so the search takes them in order of decreasing ceiling."""
    return 0.0, {}


def _set_order(order: str) -> None:
    """The settings' order for this process and the workers it spawns from now on (they read the environment as
    they import this script)."""
    os.environ[ORDER_VARIABLE] = order
    unit_module.screen = _unscreened if order == CEILING_ORDER else SCREEN


if os.environ.get(ORDER_VARIABLE) == CEILING_ORDER:
    _set_order(CEILING_ORDER)

AGREEMENT_UNITS = (("llama-3.1-8b", "H100", (1, 2)), ("llama-3.1-70b", "H200", (2, 4)))


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _timed(**kwargs):
    start = time.perf_counter()
    result = calibrate(**kwargs)
    return result, time.perf_counter() - start


def _setting(unit: dict) -> str:
    return f"{unit['max_num_seqs']}/{unit['max_num_batched_tokens']}/{unit['long_prefill_token_threshold']}"


def agreement(workers: int) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "global.toml")
    profiles = load_profiles()
    print(f"agreement: global scenario, {', '.join(f'{m} on {s} TP {t}' for m, s, t in AGREEMENT_UNITS)}; {_load()}")
    runs = {}
    for prune in (False, True):
        units, seconds, sims = [], 0.0, 0
        for model, sku, tps in AGREEMENT_UNITS:
            chosen = profiles[~((profiles["model"] == model) & (profiles["sku"] == sku)
                                & ~profiles["tp_degree"].isin(tps))]
            with tempfile.TemporaryDirectory() as cache:
                result, took = _timed(scenario=scenario, profiles=chosen, models=[model], skus=[sku], prune=prune,
                                      use_cache=False, cache_dir=Path(cache), engine="processes", workers=workers)
            units += result.meta["units"]
            seconds += took
            sims += sum(u["simulations"] for u in result.meta["units"])
        runs[prune] = ({(u["model"], u["sku"], u["tp_degree"]): u for u in units}, seconds, sims)
    full, pruned = runs[False][0], runs[True][0]
    print("setting: max_num_seqs/max_num_batched_tokens/long_prefill_token_threshold")
    print(f"{'unit':30} {'unpruned setting':>16} {'rate':>8} {'pruned setting':>16} {'rate':>8} {'ratio':>6}")
    worst = 0.0
    for key in sorted(full):
        a, b = full[key], pruned[key]
        ra, rb = a["mix_rps_per_replica"], b["mix_rps_per_replica"]
        ratio = rb / ra if ra > 0 else float("nan") if rb > 0 else 1.0
        if ra > 0:
            worst = max(worst, abs(1.0 - ratio))
        print(f"{key[0] + ' on ' + str(key[2]) + ' x ' + key[1]:30} {_setting(a):>16} {ra:>8.3f} {_setting(b):>16} "
              f"{rb:>8.3f} {ratio:>6.3f}")
    print(f"unpruned: {runs[False][2]} replications in {runs[False][1]:.1f} s; pruned: {runs[True][2]} replications "
          f"in {runs[True][1]:.1f} s; pruned / unpruned time {runs[True][1] / runs[False][1]:.2f}, "
          f"largest rate difference {100 * worst:.2f} % (tolerance 2 % per search); {_load()}")


def _in_order(order: str, workers: int):
    _set_order(order)
    with tempfile.TemporaryDirectory() as cache:
        result, took = _timed(scenario=load_scenario(ROOT / "scenarios" / "demo.toml"), profiles=load_profiles(),
                              use_cache=False, cache_dir=Path(cache), engine="processes", workers=workers)
    return {(u["model"], u["sku"], u["tp_degree"]): u for u in result.meta["units"]}, took


def order(workers: int) -> None:
    print(f"order: the demo's grid, cold, {workers} workers; {_load()}")
    runs = {name: _in_order(name, workers) for name in (CEILING_ORDER, "screened")}
    os.environ.pop(ORDER_VARIABLE)
    (before, before_s), (after, after_s) = runs[CEILING_ORDER], runs["screened"]
    print("setting: max_num_seqs/max_num_batched_tokens/long_prefill_token_threshold")
    print(f"{'unit':30} {'ceiling order':>15} {'rate':>8} {'reps':>5} {'screened':>15} {'rate':>8} {'reps':>5} "
          f"{'ratio':>6}")
    worst, same = 0.0, 0
    for key in sorted(before):
        a, b = before[key], after[key]
        ra, rb = a["mix_rps_per_replica"], b["mix_rps_per_replica"]
        ratio = rb / ra if ra > 0 else float("nan") if rb > 0 else 1.0
        worst = max(worst, abs(1.0 - ratio)) if ra > 0 else worst
        same += _setting(a) == _setting(b)
        print(f"{key[0] + ' on ' + str(key[2]) + ' x ' + key[1]:30} {_setting(a):>15} {ra:>8.3f} "
              f"{a['simulations']:>5} {_setting(b):>15} {rb:>8.3f} {b['simulations']:>5} {ratio:>6.3f}")
    sims = [sum(u["simulations"] for u in run.values()) for run in (before, after)]
    print(f"ceiling order: {sims[0]} replications in {before_s:.1f} s; screened: {sims[1]} replications in "
          f"{after_s:.1f} s; time x{before_s / after_s:.2f}, replications x{sims[0] / sims[1]:.2f}; the same setting "
          f"in {same} of {len(before)} units, largest rate difference {100 * worst:.2f} % (tolerance 2 % per "
          f"search); {_load()}")


def global_grid(workers: int) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "global.toml")
    profiles = load_profiles()
    with tempfile.TemporaryDirectory() as cache:
        print(f"global: {_load()}")
        cold, cold_s = _timed(scenario=scenario, profiles=profiles, cache_dir=Path(cache), engine="processes",
                              workers=workers)
        warm, warm_s = _timed(scenario=scenario, profiles=profiles, cache_dir=Path(cache), engine="processes",
                              workers=workers)
    units = len(cold.meta["units"])
    settings = sum(len(u["settings_tried"]) for u in cold.meta["units"])
    searched = sum(1 for u in cold.meta["units"] for s in u["settings_tried"] if s["status"] != "pruned")
    sims = sum(u["simulations"] for u in cold.meta["units"])
    print(f"global cold: {units} units x engine settings = {settings} candidates, {searched} searched, "
          f"{settings - searched} pruned, {sims} replications, {cold_s:.1f} s wall ({workers} workers)")
    identical = cold.table.drop(columns="cached").equals(warm.table.drop(columns="cached"))
    print(f"global warm: {warm.n_cached} of {units} units from the cache, {warm_s:.2f} s wall; "
          f"cold / warm {cold_s / warm_s:.0f}x; tables identical: {identical}; {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="agreement,order,global")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    prepare()
    sections = {s.strip() for s in args.sections.split(",")}
    if "agreement" in sections:
        agreement(args.workers)
    if "order" in sections:
        order(args.workers)
    if "global" in sections:
        global_grid(args.workers)


if __name__ == "__main__":
    main()

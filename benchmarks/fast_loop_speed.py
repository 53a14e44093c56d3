"""The fast loop's calibration across SLO values: every value searched from scratch, against the same searches
reading the probes the values before them simulated (``planner/calibrate/probe_memo.py``).

A sweep such as ``planner sweep --vary classes.interactive.ttft_p99_ms=300,500,800,1200`` calibrates every unit
once per value. A probe's replications do not depend on the SLO, so a search that visits a rate another value's
search visited can read them. This benchmark calibrates the same units for each value in turn, twice in one run:

* ``scratch``: no store, every probe simulated (what every value cost before probes were kept);
* ``reuse``: one probe store shared by the values (a temporary folder, as the calibration cache keeps it), no
  unit answers cached, so every search runs and only replications are read.

Per value it prints both runs' rate per replica of every unit (they must be equal to the last bit: reading a
replication gives what simulating it gives), the replications each used, how many the ``reuse`` run simulated
(the rest it read), and the seconds of each, with the ratios; then the totals. Every figure comes from this machine
and this run, with the 1-minute load average before and after (the machine may be shared). Nothing is written but
the temporary store. Usage::

    python benchmarks/fast_loop_speed.py [--models llama-3.1-8b] [--skus H100] [--values 300,500,800,1200]
        [--field classes.interactive.ttft_p99_ms] [--policy drr-wspt] [--workers 2]

``--models all --skus all`` is the demo's whole grid (several minutes per value and run on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.calibrate import calibrate  # noqa: E402
from planner.compile_ahead import prepare  # noqa: E402
from planner.profiles import load_profiles  # noqa: E402
from planner.scenario import Scenario, load_scenario  # noqa: E402
from planner.scenario.overrides import parse_override  # noqa: E402
from planner.workflows.calibration_cache import FolderProbeStore  # noqa: E402

DEMO = ROOT / "scenarios" / "demo.toml"


class ProbesOnly:
    """A calibration store that keeps probes in a folder and no unit answers, so that every search runs."""

    def __init__(self, directory: Path) -> None:
        self.probes = FolderProbeStore(directory)

    def get(self, key: str) -> None:
        return None

    def put(self, task: Any, result: dict[str, Any]) -> str:
        return ""

    def replications_kept(self) -> int:
        return sum(len(json.loads(path.read_text())["rows"]) for path in self.probes.directory.glob("*.json"))


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def scenario_with(field: str, value: str) -> Scenario:
    return load_scenario(DEMO, [parse_override(f"{field}={value}", option="--values")])


def _names(text: str) -> list[str] | None:
    return None if text == "all" else [part for part in text.split(",") if part]


def run(args: argparse.Namespace) -> None:
    profiles = load_profiles()
    prepare()  # compile the simulator before any timing
    store = ProbesOnly(Path(tempfile.mkdtemp(prefix="fast-loop-probes-")))
    print(f"{args.field} = {args.values}; models {args.models}, SKUs {args.skus}, policy {args.policy}, "
          f"workers {args.workers}; {_load()}")
    header = f"{'value':>8s} {'unit':34s} {'rate scratch':>13s} {'rate reuse':>11s} {'same':>5s} " \
             f"{'used':>6s} {'simulated':>10s}"
    totals = {"scratch_s": 0.0, "reuse_s": 0.0, "used": 0, "simulated": 0}
    for value in args.values.split(","):
        scenario = scenario_with(args.field, value)
        common = {"policy": args.policy, "models": _names(args.models), "skus": _names(args.skus),
                  "seed": scenario.seeds.base, "engine": "auto", "workers": args.workers}
        began = time.perf_counter()
        scratch = calibrate(scenario, profiles, **common)
        scratch_s = time.perf_counter() - began
        kept = store.replications_kept()
        began = time.perf_counter()
        reuse = calibrate(scenario, profiles, store=store, **common)
        reuse_s = time.perf_counter() - began
        simulated = store.replications_kept() - kept
        used = sum(unit["simulations"] for unit in reuse.meta["units"])
        print(header)
        for a, b in zip(scratch.meta["units"], reuse.meta["units"], strict=True):
            label = f"{a['model']} {a['sku']} TP {a['tp_degree']}"
            ra, rb = a["mix_rps_per_replica"], b["mix_rps_per_replica"]
            print(f"{value:>8s} {label:34s} {ra:13.5g} {rb:11.5g} {'yes' if repr(ra) == repr(rb) else 'NO':>5s} "
                  f"{b['simulations']:6d}")
        print(f"{value:>8s} {'all units':34s} {'':13s} {'':11s} {'':5s} {used:6d} {simulated:10d}   "
              f"scratch {scratch_s:.1f} s, reuse {reuse_s:.1f} s: x{scratch_s / reuse_s:.2f}; "
              f"{simulated / used:.0%} of the replications simulated")
        totals["scratch_s"] += scratch_s
        totals["reuse_s"] += reuse_s
        totals["used"] += used
        totals["simulated"] += simulated
    print(f"\nall values: scratch {totals['scratch_s']:.1f} s, reuse {totals['reuse_s']:.1f} s "
          f"(x{totals['scratch_s'] / totals['reuse_s']:.2f}); replications used {totals['used']}, simulated "
          f"{totals['simulated']} ({totals['simulated'] / totals['used']:.0%}); {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--field", default="classes.interactive.ttft_p99_ms")
    parser.add_argument("--values", default="300,500,800,1200")
    parser.add_argument("--models", default="llama-3.1-8b", help="comma-separated, or all")
    parser.add_argument("--skus", default="H100", help="comma-separated, or all")
    parser.add_argument("--policy", default="drr-wspt")
    parser.add_argument("--workers", type=int, default=2)
    run(parser.parse_args())


if __name__ == "__main__":
    main()

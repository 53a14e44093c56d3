"""What stopping a probe early when it clearly holds would save, and which verdicts it would change.

A probe (``planner/calibrate/probe.py``) already stops at the first replication after which some class's interval
lies wholly above its SLO: the miss is then as clear as the confidence level asks. A probe that holds runs every
replication. This measures the symmetric rule for holds, before anyone builds it: stop after replication n (n at
least ``--first-look``) once every class's upper bound U_n at the confidence ``c`` is within its SLO, and call
the probe a hold.

It calibrates the scenario's grid under its policy (one process, no cache: every replication is simulated and
timed) and records each probe's per-replication p99s. Then, per rule (``c`` and the first look), it replays every
probe:

* **saved**: the simulated seconds after the replication where the rule would stop, over all probes;
* **changed verdicts**: probes the rule would call a hold although all replications miss. Each one sends the
  search to a different rate, so the answers then differ (the replay cannot say by how much).

Usage::

    python benchmarks/early_holds.py [--scenario scenarios/demo.toml] [--levels 0.95,0.99,0.995,0.999]
        [--first-looks 2,3,4]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner.calibrate.pools as pools_module  # noqa: E402
import planner.calibrate.probe as probe_module  # noqa: E402
import planner.calibrate.unit as unit_module  # noqa: E402
from planner.calibrate import calibrate  # noqa: E402
from planner.profiles import load_profiles  # noqa: E402
from planner.scenario import load_scenario  # noqa: E402
from planner.sim.stats import replication_ci  # noqa: E402

Record = dict[str, Any]


def recorded_probes(scenario_path: Path) -> list[Record]:
    """Every probe of the scenario's calibration: its SLOs, verdict, replication rows and their seconds."""
    probes: list[Record] = []
    original_probe, original_row = probe_module.probe, probe_module._replication_row
    current: Record = {}

    def row(task: Any, config: Any, i: int) -> Any:
        began = time.perf_counter()
        out = original_row(task, config, i)
        current["rows"].append(out)
        current["seconds"].append(time.perf_counter() - began)
        return out

    def probe(task: Any, replica: Any, rate: float, store: Any = None) -> Any:
        current.clear()
        current.update(rows=[], seconds=[])
        outcome = original_probe(task, replica, rate, store)
        checked = {c.name: dict(c.spec.slo.targets()) for c in task.classes if c.share > 0}
        probes.append({"checked": checked, "ok": outcome.ok, "rows": list(current["rows"]),
                       "seconds": list(current["seconds"])})
        return outcome

    probe_module._replication_row = row
    unit_module.probe = pools_module.probe = probe  # type: ignore[assignment]
    try:
        scenario = load_scenario(scenario_path)
        calibrate(scenario, load_profiles(), seed=scenario.seeds.base, engine="local")
    finally:
        probe_module._replication_row = original_row
        unit_module.probe = pools_module.probe = original_probe
    return probes


def upper(values: list[float], level: float) -> float:
    x = np.asarray(values, dtype=np.float64)
    if np.isposinf(x).any() or x.size < 2:
        return math.inf
    return float(replication_ci(x, level=level).high)


def replay(probes: list[Record], level: float, first_look: int) -> tuple[float, int, int]:
    """(seconds saved, probes stopped early, verdicts changed) of the rule at ``level`` from ``first_look``."""
    saved, early, changed = 0.0, 0, 0
    for p in probes:
        rows = p["rows"]
        for n in range(first_look, len(rows)):
            if all(upper([r[name][m] for r in rows[:n]], level) <= slo
                   for name, slos in p["checked"].items() for m, slo in slos.items()):
                early += 1
                saved += sum(p["seconds"][n:])
                changed += not p["ok"]
                break
    return saved, early, changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "demo.toml")
    parser.add_argument("--levels", default="0.95,0.99,0.995,0.999")
    parser.add_argument("--first-looks", default="2,3,4")
    args = parser.parse_args()
    print(f"{args.scenario.name}: calibrating its grid in one process, load {os.getloadavg()[0]:.1f} before")
    probes = recorded_probes(args.scenario)
    total = sum(sum(p["seconds"]) for p in probes)
    full = [p for p in probes if len(p["rows"]) == max(len(q["rows"]) for q in probes)]
    print(f"{len(probes)} probes, {sum(len(p['rows']) for p in probes)} replications, {total:.0f} s simulated; "
          f"{len(full)} ran every replication, of which {sum(not p['ok'] for p in full)} missed")
    print(f"{'level':>6} {'first look':>10} {'stopped early':>13} {'saved':>14} {'changed verdicts':>16}")
    for level in (float(x) for x in args.levels.split(",")):
        for first_look in (int(x) for x in args.first_looks.split(",")):
            saved, early, changed = replay(probes, level, first_look)
            print(f"{level:>6g} {first_look:>10} {early:>13} {saved:>7.0f} s {100 * saved / total:>3.0f} % "
                  f"{changed:>16}")
    print(f"load {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()

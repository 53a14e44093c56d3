"""The figures the README quotes from commands, from recorded runs of those commands.

Two parts of the README quote what a command printed or how long it took: the demo's SLO sweep
(costs, peak GPUs, the binding SLO, its run time) and the first ``make run`` (its run times). They
are not typed in: this script records a run and writes the README's text between the markers
``<!-- figures:NAME -->`` and ``<!-- /figures -->`` from the record in ``docs/figures/NAME.json``,
so the two cannot drift apart (``tests/test_readme_figures.py`` checks that the README is what the
records render).

* ``measure-sweep``: runs the README's sweep command in this checkout (``planner`` from
  ``.venv/bin``) under GNU ``time -v``, with the calibration cache in an empty temporary folder
  (cold, as on a fresh machine), and records it.
* ``record-sweep DIR --time-log FILE [--commit C] [--shared-with TEXT]``: records a run of that
  command already made: its folder (``sweep.csv``, ``sweep.png``), its ``time -v`` report (wall
  and CPU time), the commit it ran at and what else ran on the machine meanwhile.
* ``measure-make-run``: clones this repository's HEAD into an empty temporary folder, runs
  ``make run`` there under ``time -v`` and records it (hours on 2 cores).
* ``record-make-run CLONE --time-log FILE | --wall-s S [--shared-with TEXT]``: records a ``make run`` already made in
  the fresh clone ``CLONE``: the whole run's ``time -v`` report (or only its wall time) and each
  command's duration from the clone's run history (``planner history --json``).
* ``render`` (the default): rewrites the README from the records and prints the sections.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.report.inputs import money  # noqa: E402

README = ROOT / "README.md"
FIGURES = ROOT / "docs/figures"
CHART = ROOT / "docs/images/sweep-interactive-ttft.png"
SWEEP = "sweep-interactive-ttft"
MAKE_RUN = "make-run"
SWEEP_COMMAND = ["planner", "sweep", "--scenario", "scenarios/demo.toml", "--history",
                 "data/history/demo_history.parquet", "--vary", "classes.interactive.ttft_p99_ms=300,500,800,1200",
                 "--out", "sweep-demo"]
DEMO_VALUE = 800.0
"""The demo scenario's own interactive TTFT p99 SLO, in ms."""


def read_time_log(text: str) -> dict[str, float]:
    """Wall and CPU seconds from GNU ``time -v``'s report (the command's own output may surround it)."""
    def field(name: str) -> str:
        found = re.search(rf"^\s*{re.escape(name)}: (.+)$", text, re.MULTILINE)
        if found is None:
            raise ValueError(f"time log: no '{name}' line (run the command under /usr/bin/time -v)")
        return found.group(1).strip()

    clock = [float(part) for part in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    wall = sum(value * 60 ** power for power, value in enumerate(reversed(clock)))
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def git_commit(where: Path = ROOT) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                          check=True).stdout.strip()


def save(name: str, entry: dict[str, Any]) -> None:
    FIGURES.mkdir(parents=True, exist_ok=True)
    (FIGURES / f"{name}.json").write_text(json.dumps(entry, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------- the sweep

def sweep_rows(folder: Path) -> list[dict[str, Any]]:
    """The sweep's rows as the README quotes them."""
    table = pd.read_csv(folder / "sweep.csv")
    return [{"value": float(row.value), "feasible": bool(row.feasible),
             "cost_usd": None if pd.isna(row.cost_usd) else round(float(row.cost_usd), 2),
             "gpus_peak": None if pd.isna(row.gpus_peak) else int(row.gpus_peak),
             "slo_status": str(row.slo_status), "binding": "" if pd.isna(row.binding) else str(row.binding),
             "diagnosis": "" if pd.isna(row.diagnosis) else str(row.diagnosis)}
            for row in table.itertuples()]


def record_sweep(folder: Path, time_log: Path, commit: str | None = None, shared: str = "") -> dict[str, Any]:
    entry = {"command": " ".join(SWEEP_COMMAND), "commit": commit or git_commit(), "cores": os.cpu_count(),
             "calibration_cache": "cold", **read_time_log(time_log.read_text()), "shared_with": shared,
             "rows": sweep_rows(folder)}
    save(SWEEP, entry)
    shutil.copyfile(folder / "sweep.png", CHART)
    return entry


def measure_sweep() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        env = {**os.environ, "PLANNER_CACHE_DIR": str(work / "cache"),
               "PATH": f"{ROOT / '.venv/bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        command = ["/usr/bin/time", "-v", "-o", str(work / "time.log"), *SWEEP_COMMAND[:-1], str(work / "sweep-demo")]
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        return record_sweep(work / "sweep-demo", work / "time.log")


def render_sweep(entry: dict[str, Any]) -> str:
    """The sweep's table, its run time and what tightening or loosening the SLO costs."""
    lines = ["| interactive TTFT p99 | plan cost | peak GPUs | SLOs | binding |", "|---|---|---|---|---|"]
    costs = {}
    for row in entry["rows"]:
        value = f"{row['value']:,.0f} ms" + (" (the demo's)" if row["value"] == DEMO_VALUE else "")
        status = row["slo_status"] if row["feasible"] else f"infeasible: {row['diagnosis']}"
        gpus = "—" if row["gpus_peak"] is None else str(row["gpus_peak"])
        cost = "—" if row["cost_usd"] is None else money(row["cost_usd"])
        lines.append(f"| {value} | {cost} | {gpus} | {status} | {row['binding']} |")
        if row["cost_usd"] is not None:
            costs[row["value"]] = row["cost_usd"]
    lines.append("")
    if "wall_s" in entry:
        shared = f"; the cores shared with {entry['shared_with']}" if entry.get("shared_with") else ""
        lines.append(f"It took {entry['wall_s'] / 60:.0f} minutes on {entry['cores']} cores with a cold calibration "
                     f"cache ({entry['cpu_s'] / 60:.0f} CPU minutes; commit {entry['commit'][:7]}{shared}).")
    tight, loose = min(costs, default=None), max(costs, default=None)
    if DEMO_VALUE in costs and tight is not None and loose is not None:
        base = costs[DEMO_VALUE]
        lines.append(f"Going from {DEMO_VALUE:,.0f} to {tight:,.0f} ms costs {100 * (costs[tight] / base - 1):.0f} % "
                     f"more; loosening to {loose:,.0f} ms saves {100 * (1 - costs[loose] / base):.0f} %.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- make run

def command_times(clone: Path) -> list[dict[str, Any]]:
    """Each command ``make run`` ran in ``clone``, oldest first, with its duration (its run history)."""
    shown = subprocess.run([str(clone / ".venv/bin/planner"), "--history-file", "out/demo/history.duckdb", "history",
                            "--json"], cwd=clone, capture_output=True, text=True, check=True)
    rows = json.loads(shown.stdout)["rows"]
    return [{"command": r["command"], "month": r["month"], "duration_s": r["duration_s"], "exit_code": r["exit_code"]}
            for r in reversed(rows)]


def record_make_run(clone: Path, time_log: Path | None, wall_s: float | None = None,
                    shared: str = "") -> dict[str, Any]:
    """The run's times from its ``time -v`` report, or only its wall time when it was timed otherwise."""
    times = read_time_log(time_log.read_text()) if time_log is not None else {"wall_s": wall_s}
    entry = {"commit": git_commit(clone), "cores": os.cpu_count(), "calibration_cache": "cold", **times,
             "shared_with": shared, "commands": command_times(clone)}
    save(MAKE_RUN, entry)
    return entry


def measure_make_run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / "planner"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        log = Path(scratch) / "time.log"
        subprocess.run(["/usr/bin/time", "-v", "-o", str(log), "make", "run"], cwd=clone, check=True)
        return record_make_run(clone, log)


INSTALLED_S = 30.0
"""Below this many seconds outside the commands, the run found its venv made (by ``make test`` before it)."""


def render_make_run(entry: dict[str, Any]) -> str:
    """The first ``make run``'s time, the install's and each month's."""
    months = {c["month"]: c["duration_s"] for c in entry["commands"] if c["command"] == "report"}
    commands = sum(c["duration_s"] or 0.0 for c in entry["commands"])
    install = entry["wall_s"] - commands
    parts = ", ".join(f"{month} {seconds / 60:.0f} min" for month, seconds in months.items())
    cpu = f"{entry['cpu_s'] / 60:.0f} CPU minutes; " if "cpu_s" in entry else ""
    shared = f"; the cores shared with {entry['shared_with']}" if entry.get("shared_with") else ""
    setup = f"{install / 60:.0f} to create the venv and install, then" if install >= INSTALLED_S else \
        "the venv already made by `make test`, then"
    return (f"On {entry['cores']} cores the first `make run` in a fresh clone took {entry['wall_s'] / 60:.0f} min "
            f"({cpu}commit {entry['commit'][:7]}{shared}): {setup} {parts}.")


# ------------------------------------------------------------------------------------------- the README

RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {SWEEP: render_sweep, MAKE_RUN: render_make_run}


def render_readme(text: str, entries: dict[str, dict[str, Any]]) -> str:
    """``text`` with each ``<!-- figures:NAME -->`` section replaced by its record's rendering."""
    for name, entry in entries.items():
        begin, end = f"<!-- figures:{name} -->", "<!-- /figures -->"
        start = text.find(begin)
        stop = text.find(end, start)
        if start < 0 or stop < 0:
            raise ValueError(f"README.md: no {begin} ... {end} section")
        text = text[:start + len(begin)] + "\n" + RENDERERS[name](entry) + "\n" + text[stop:]
    return text


def recorded() -> dict[str, dict[str, Any]]:
    """The records there are, by name."""
    return {name: json.loads((FIGURES / f"{name}.json").read_text()) for name in RENDERERS
            if (FIGURES / f"{name}.json").exists()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action")
    sub.add_parser("measure-sweep")
    sweep = sub.add_parser("record-sweep")
    sweep.add_argument("folder", type=Path)
    sweep.add_argument("--time-log", type=Path, required=True)
    sweep.add_argument("--commit", help="the commit the sweep ran at (default: HEAD)")
    sweep.add_argument("--shared-with", default="", help="what else ran on the machine meanwhile, said in the README")
    sub.add_parser("measure-make-run")
    make_run = sub.add_parser("record-make-run")
    make_run.add_argument("clone", type=Path)
    timed = make_run.add_mutually_exclusive_group(required=True)
    timed.add_argument("--time-log", type=Path)
    timed.add_argument("--wall-s", type=float, help="the run's wall time, when it was not run under time -v")
    make_run.add_argument("--shared-with", default="", help="what else ran on the machine meanwhile")
    sub.add_parser("render")
    args = parser.parse_args()
    if args.action == "measure-sweep":
        measure_sweep()
    elif args.action == "record-sweep":
        record_sweep(args.folder, args.time_log, args.commit, args.shared_with)
    elif args.action == "measure-make-run":
        measure_make_run()
    elif args.action == "record-make-run":
        record_make_run(args.clone, args.time_log, args.wall_s, args.shared_with)
    entries = recorded()
    README.write_text(render_readme(README.read_text(), entries))
    for name, entry in entries.items():
        print(f"{name}:\n{RENDERERS[name](entry)}\n")


if __name__ == "__main__":
    sys.exit(main())

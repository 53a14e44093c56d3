"""A catalogue of bad inputs across every command: each gives exit 3 (or 4), names what is wrong,
writes nothing and leaves earlier outputs intact (``bad_inputs_harness``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bad_inputs_harness import BadInput, check_outcome, run_case
from conftest import REPO_ROOT

DEMO_SCENARIO = REPO_ROOT / "scenarios" / "demo.toml"


def _scenario_with(folder: Path, old: str, new: str) -> Path:
    text = DEMO_SCENARIO.read_text(encoding="utf-8")
    assert old in text, old
    path = folder / "scenario.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


# --- files, outputs, exit codes and signals: helpers
def _file(folder: Path, name: str, text: str = "a\n1\n") -> str:
    """An input file whose content does not matter: the case is refused before anything reads it."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return name


def _fifo(folder: Path, name: str) -> str:
    """A named pipe that nothing writes to: opening it for reading would block forever."""
    os.mkfifo(folder / name)
    return name


def _demo() -> str:
    return str(DEMO_SCENARIO)


def _deep_toml(folder: Path) -> str:
    (folder / "deep.toml").write_text("a = " + "[" * 100_000 + "\n")
    return "deep.toml"


PLAN_OUTPUTS = ("plan.csv", "plan.flows.csv", "plan.json")


CASES = [
    BadInput(
        "validate: a scenario that is not TOML",
        lambda d: (d.joinpath("s.toml").write_text("name = [unclosed\n"), ["validate", "s.toml"])[1],
        mentions=("s.toml",),
    ),
    BadInput(
        "validate: a negative SLO",
        lambda d: ["validate", _scenario_with(d, "ttft_p99_ms = ", "ttft_p99_ms = -").name],
        mentions=("scenario.toml", "ttft_p99_ms"),
    ),
    # --- files, outputs, exit codes and signals
    BadInput("place: the --forecast file is missing",
             lambda d: ["place", "--scenario", _demo(), "--forecast", "missing.csv", "--out", "plan.csv"],
             mentions=("--forecast", "missing.csv", "file not found"), earlier=PLAN_OUTPUTS),
    BadInput("place: the --capacity file is missing",
             lambda d: ["place", "--scenario", _demo(), "--forecast", _file(d, "f.csv"), "--capacity", "cap.csv",
                        "--out", "plan.csv"],
             mentions=("--capacity", "cap.csv", "file not found"), earlier=PLAN_OUTPUTS),
    BadInput("place: the --scenario is a folder",
             lambda d: (d.joinpath("s.toml").mkdir(),
                        ["place", "--scenario", "s.toml", "--forecast", _file(d, "f.csv"), "--out", "plan.csv"])[1],
             mentions=("--scenario", "s.toml", "is a folder")),
    BadInput("place: the --forecast is a named pipe",
             lambda d: ["place", "--scenario", _demo(), "--forecast", _fifo(d, "f.csv"), "--out", "plan.csv"],
             mentions=("--forecast", "f.csv", "named pipe"), timeout_s=60),
    BadInput("place: --out is the --forecast file",
             lambda d: ["place", "--scenario", _demo(), "--forecast", _file(d, "f.csv"), "--out", "f.csv"],
             mentions=("--out f.csv", "overwrite", "--forecast"), earlier=("f.csv",)),
    BadInput("place: --debug inside a file",
             lambda d: ["place", "--scenario", _demo(), "--forecast", _file(d, "f.csv"), "--out", "plan.csv",
                        "--debug", _file(d, "blocker") + "/lp"],
             mentions=("--debug", "blocker", "is a file")),
    BadInput("plan: the --history file is missing",
             lambda d: ["plan", "--scenario", _demo(), "--history", "missing.parquet", "--out", "out"],
             mentions=("--history", "missing.parquet", "file not found"), earlier=("out/plan.csv",)),
    BadInput("plan: --out is a file",
             lambda d: ["plan", "--scenario", _demo(), "--history", _file(d, "h.csv"), "--out", _file(d, "out")],
             mentions=("--out", "is a file")),
    BadInput("plan: --out holds files that are not a plan's",
             lambda d: ["plan", "--scenario", _demo(), "--history", _file(d, "h.csv"), "--out", "out"],
             mentions=("--out out", "notes.txt"), earlier=("out/notes.txt", "out/plan.csv")),
    BadInput("report: the --history file is missing",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", "missing.parquet",
                        "--reports", "reports"],
             mentions=("--history", "missing.parquet", "file not found"), earlier=("reports/2026-10/report.md",)),
    BadInput("report: the --history is a named pipe",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", _fifo(d, "h.csv"),
                        "--reports", "reports"],
             mentions=("--history", "h.csv", "named pipe"), timeout_s=60),
    BadInput("report: --reports is a file",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", _file(d, "h.csv"),
                        "--reports", _file(d, "reports")],
             mentions=("--reports", "is a file")),
    BadInput("forecast: the HISTORY file is missing",
             lambda d: ["forecast", "missing.csv", "--out", "f.csv"],
             mentions=("missing.csv", "file not found"), earlier=("f.csv", "f.meta.json")),
    BadInput("forecast: the HISTORY is a named pipe",
             lambda d: ["forecast", _fifo(d, "h.csv"), "--out", "f.csv"],
             mentions=("h.csv", "named pipe"), timeout_s=60),
    BadInput("forecast: --out is the HISTORY file",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "h.csv"],
             mentions=("--out h.csv", "overwrite"), earlier=("h.csv",)),
    BadInput("forecast: --metadata is the --out file",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "f.csv", "--metadata", "f.csv"],
             mentions=("--metadata", "--out")),
    BadInput("forecast: --out inside a file",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", _file(d, "blocker") + "/f.csv"],
             mentions=("--out", "blocker", "is a file")),
    BadInput("forecast: --plots is a file",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "f.csv", "--plots", _file(d, "png")],
             mentions=("--plots", "png", "is a file")),
    BadInput("simulate: the --plan file is missing",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", "missing.csv", "--out", "slo.csv"],
             mentions=("--plan", "missing.csv", "file not found"), earlier=("slo.csv", "slo.json")),
    BadInput("simulate: the --flows file is missing",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", _file(d, "plan.csv"), "--flows", "nope.csv",
                        "--out", "slo.csv"],
             mentions=("--flows", "nope.csv", "file not found")),
    BadInput("simulate: the --histogram file is missing",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", _file(d, "plan.csv"),
                        "--flows", _file(d, "plan.flows.csv"), "--histogram", "hist.csv", "--out", "slo.csv"],
             mentions=("--histogram", "hist.csv", "file not found")),
    BadInput("simulate: --out inside a file",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", _file(d, "plan.csv"),
                        "--flows", _file(d, "plan.flows.csv"), "--out", _file(d, "blocker") + "/slo.csv"],
             mentions=("--out", "blocker", "is a file")),
    BadInput("calibrate: the --histogram is a folder",
             lambda d: (d.joinpath("hist.csv").mkdir(),
                        ["calibrate", "--scenario", _demo(), "--histogram", "hist.csv", "--out", "cap.csv"])[1],
             mentions=("--histogram", "hist.csv", "is a folder"), earlier=("cap.csv", "cap.json")),
    BadInput("calibrate: --out inside a file",
             lambda d: ["calibrate", "--scenario", _demo(), "--out", _file(d, "blocker") + "/cap.csv"],
             mentions=("--out", "blocker", "is a file")),
    BadInput("ingest: a log file is missing",
             lambda d: ["ingest", "missing.csv", "--out", "h.csv"],
             mentions=("missing.csv", "file not found"), earlier=("h.csv", "h.histogram.csv")),
    BadInput("ingest: a log is a named pipe",
             lambda d: ["ingest", _fifo(d, "log.csv"), "--out", "h.csv"],
             mentions=("log.csv", "named pipe"), timeout_s=60),
    BadInput("ingest: --histogram-out is one of the logs",
             lambda d: ["ingest", _file(d, "log.csv"), "--out", "h.csv", "--histogram-out", "log.csv"],
             mentions=("--histogram-out", "overwrite"), earlier=("log.csv",)),
    BadInput("ingest: --out inside a file",
             lambda d: ["ingest", _file(d, "log.csv"), "--out", _file(d, "blocker") + "/h.csv"],
             mentions=("--out", "blocker", "is a file")),
    BadInput("experiment: --out is a file",
             lambda d: ["experiment", "e1", "--out", _file(d, "e1")],
             mentions=("--out", "e1", "is a file")),
    BadInput("validate: the scenario is a folder",
             lambda d: (d.joinpath("s.toml").mkdir(), ["validate", "s.toml"])[1],
             mentions=("s.toml", "is a folder")),
    BadInput("validate: the scenario is a named pipe",
             lambda d: ["validate", _fifo(d, "s.toml")],
             mentions=("s.toml", "named pipe"), timeout_s=60),
    BadInput("validate: a deeply nested TOML",
             lambda d: ["validate", _deep_toml(d)],
             mentions=("deep.toml", "too deeply")),
    BadInput("simulate: --seed -1",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", _file(d, "plan.csv"),
                        "--flows", _file(d, "plan.flows.csv"), "--out", "slo.csv", "--seed", "-1"],
             mentions=("--seed", "-1")),
    BadInput("experiment: --seed -1",
             lambda d: ["experiment", "e1", "--out", "exp", "--seed", "-1"], mentions=("--seed", "-1")),
    BadInput("forecast: --seed -1",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "f.csv", "--seed", "-1"], mentions=("--seed",)),
    BadInput("calibrate: --seed -1",
             lambda d: ["calibrate", "--scenario", _demo(), "--out", "cap.csv", "--seed", "-1"],
             mentions=("--seed",)),
    BadInput("plan: --seed -1",
             lambda d: ["plan", "--scenario", _demo(), "--history", _file(d, "h.csv"), "--out", "out",
                        "--seed", "-1"], mentions=("--seed",)),
    BadInput("report: --seed -1",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", _file(d, "h.csv"),
                        "--reports", "reports", "--seed", "-1"], mentions=("--seed",)),
    BadInput("history: --limit 99999999999999999999",
             lambda d: ["history", "--limit", "99999999999999999999"], mentions=("--limit",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_cleanly(case: BadInput, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path)
    assert check_outcome(case, outcome) == [], outcome.stderr

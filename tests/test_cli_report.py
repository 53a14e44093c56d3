"""``planner report`` and ``planner history`` end to end: files, idempotence, month over month, crash safety.

Golden file: tests/golden/report_demo.json is the report JSON of the bundled demo history for
2026-11, on the demo scenario narrowed to two deployment choices per model (``demo_narrowed``:
calibrating every SKU and TP degree of the demo, twice for the two policies, would take the
test suite's whole budget), with the settings in ``DEMO_ARGS``. Regenerate it on purpose with

    PLANNER_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_cli_report.py -k golden

and review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import tomli_w
from loop_fixtures import write_small_inputs
from process_helpers import dead_pid
from typer.testing import CliRunner

from planner import cli
from planner.runs import RunHistory
from planner.workflows.report_lock import HOLDER_NAME, LockHolder, read_holder

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "report_demo.json"
GENERATED = re.compile(rb"^.*[Gg]enerated[ _]at.*$", re.MULTILINE)
# Periods: the report's default, how:4. A month of hourly periods (744) leaves the per-period elastic bound to its
# wall-clock budget, so its figure would vary between runs.
FAST = ["--sim-duration", "20min", "--replications", "2", "--engine", "local"]
# The golden report calibrates each unit at the engine's default setting (--default-settings): the setting search has
# its own tests, and searching it here for two policies would take a third of the suite's budget.
# one replica per unit: this checks the report's content and format; the loop's pools are checked in test_loop_pools.py
DEMO_ARGS = ["--periods", "how:24", "--compare-policies", "fcfs,drr-wspt", "--gap", "0.05", "--sim-duration", "10min",
             "--replications", "2", "--default-settings", "--lone-replica", "--engine", "local"]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): GENERATED.sub(b"", p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def small_inputs(tmp_path_factory):
    return write_small_inputs(tmp_path_factory.mktemp("inputs"))


def _arguments(month: str, scenario: Path, history: Path, reports: Path, *extra: str) -> list[str]:
    return ["report", "--month", month, "--scenario", str(scenario), "--history", str(history),
            "--reports", str(reports), *FAST, *extra]


def _report(month: str, scenario: Path, history: Path, reports: Path, *extra: str):
    return runner.invoke(cli.app, _arguments(month, scenario, history, reports, *extra))


def _wait_for_holder(reports: Path, process: subprocess.Popen, timeout_s: float = 180.0) -> LockHolder:
    """The lock's holder record once ``process`` has taken the lock (it then starts its work)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        holder = read_holder(reports)
        if holder is not None and holder.pid == process.pid:
            return holder
        assert process.poll() is None, f"the run ended before taking the lock: {process.communicate()}"
        time.sleep(0.05)
    pytest.fail(f"process {process.pid} did not take the lock within {timeout_s} s")


@pytest.mark.slow
def test_report_writes_every_file_is_idempotent_and_compares_with_last_month(small_inputs, tmp_path):
    scenario, history = small_inputs
    reports = tmp_path / "reports"
    first = _report("2026-10", scenario, history, reports, "--compare-policies", "fcfs,drr-wspt")
    assert first.exit_code == 0, first.output
    october = reports / "2026-10"
    names = set(_files(october))
    assert {"report.md", "report.html", "report.json", "tables/policy_comparison.csv", "tables/slo_evidence.csv",
            "tables/plan_loop_rounds.csv", "tables/cost_vs_bounds.csv", "charts/forecast.png"} <= names
    before = _files(october)
    document = json.loads((october / "report.json").read_text())
    assert document["period"] == {"first_hour": "2026-10-01T00:00:00Z", "last_hour": "2026-10-31T23:00:00Z",
                                  "hours": 744}, "the report plans its whole month, not the scenario's 24-hour horizon"
    assert document["facts"]["horizon_hours"] == 744
    forecast = next(s for s in document["sections"] if s["key"] == "forecast")["facts"]
    assert (forecast["forecast_start"], forecast["forecast_end"]) == ("2026-10-01T00:00:00Z", "2026-10-31T23:00:00Z")
    # A run killed after taking the lock leaves its holder record; the next run takes the lock over and says so.
    dead = dead_pid()
    (reports / HOLDER_NAME).write_text(json.dumps({"pid": dead, "started_at": "2026-10-01T02:00:00Z",
                                                   "host": socket.gethostname(), "command": "planner report"}))
    again = _report("2026-10", scenario, history, reports, "--compare-policies", "fcfs,drr-wspt")
    assert again.exit_code == 0, again.output
    assert "took over the stale lock" in again.output and f"process {dead}" in again.output, again.output
    assert _files(october) == before, "the same inputs must give the same report apart from the generated-at line"

    november = _report("2026-11", scenario, history, reports, "--compare-policies", "none", "--json")
    assert november.exit_code == 0, november.output
    assert json.loads(november.stdout)["previous_month_found"] is True
    document = json.loads((reports / "2026-11" / "report.json").read_text())
    sections = {s["key"]: s for s in document["sections"]}
    assert sections["accuracy"]["status"] == "ok", "October's forecast is in the run history: accuracy must show"
    accuracy = sections["accuracy"]["facts"]
    assert (accuracy["month_compared"], accuracy["hours_covered"], accuracy["hours_in_month"]) == ("2026-10", 744, 744)
    assert document["period"]["first_hour"] == "2026-11-01T00:00:00Z" and document["period"]["hours"] == 720
    assert sections["policies"]["status"] == "no_data"
    plan_columns = next(t for t in sections["plan"]["tables"] if t["name"] == "plan")["columns"]
    assert "usd_previous" in plan_columns, "the plan section shows the change from last month's plan"
    assert document["as_of"] == "2026-11-01T00:00:00Z"

    listed = runner.invoke(cli.app, ["history", "--command", "report", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["rows"]
    assert [r["month"] for r in rows] == ["2026-11", "2026-10", "2026-10"] and all(r["exit_code"] == 0 for r in rows)
    assert rows[0]["key_figure"].startswith("plan_cost_usd=")


@pytest.mark.slow
def test_a_crash_mid_write_leaves_last_report_intact(small_inputs, tmp_path, monkeypatch):
    scenario, history = small_inputs
    reports = tmp_path / "reports"
    assert _report("2026-10", scenario, history, reports, "--compare-policies", "none").exit_code == 0
    before = {p: p.read_bytes() for p in (reports / "2026-10").rglob("*") if p.is_file()}

    import planner.workflows.report_files as write

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(write, "render_html", crash)
    failed = _report("2026-10", scenario, history, reports, "--compare-policies", "none")
    assert failed.exit_code == 1 and "disk full" in failed.output
    after = {p: p.read_bytes() for p in (reports / "2026-10").rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in reports.iterdir() if p.name.startswith(".2026-10.")], "no staging folder left behind"
    runs = RunHistory().runs(command="report")
    assert runs[0]["exit_code"] == 1 and "disk full" in runs[0]["message"]


@pytest.mark.parametrize("month", ["2026-13", "2026-11\n", "2026-1", " 2026-11"])
def test_report_rejects_a_bad_month_before_any_work(small_inputs, tmp_path, month):
    scenario, history = small_inputs
    result = _report(month, scenario, history, tmp_path / "reports")
    assert result.exit_code == 3 and "YYYY-MM" in result.output
    assert not (tmp_path / "reports").exists()


def test_an_as_of_after_the_months_first_instant_is_refused(small_inputs, tmp_path):
    scenario, history = small_inputs
    result = _report("2026-10", scenario, history, tmp_path / "reports", "--as-of", "2026-10-03")
    assert result.exit_code == 3 and "after the first instant of the month" in result.output
    assert not (tmp_path / "reports").exists()


def test_history_more_than_a_week_stale_is_exit_3_with_both_dates(small_inputs, tmp_path):
    scenario, history = small_inputs  # the history ends 2026-10-31T23:00:00Z
    reports = tmp_path / "reports"
    result = _report("2027-01", scenario, history, reports)
    assert result.exit_code == 3, result.output
    output = " ".join(result.output.split())
    assert "2026-10-31T23:00:00Z" in output and "2027-01-01T00:00:00Z" in output and "--allow-stale-history" in output
    assert not reports.exists(), "nothing written: the run made the reports folder, and leaves none behind"


@pytest.mark.slow
def test_allow_stale_history_plans_the_month_across_the_gap_and_lists_a_high_risk(small_inputs, tmp_path):
    scenario, history = small_inputs
    result = _report("2026-12", scenario, history, tmp_path, "--allow-stale-history", "--compare-policies", "none")
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "2026-12" / "report.json").read_text())
    assert document["period"] == {"first_hour": "2026-12-01T00:00:00Z", "last_hour": "2026-12-31T23:00:00Z",
                                  "hours": 744}
    sections = {s["key"]: s for s in document["sections"]}
    forecast = sections["forecast"]["facts"]
    assert (forecast["forecast_start"], forecast["forecast_end"]) == ("2026-11-01T00:00:00Z", "2026-12-31T23:00:00Z")
    stale = [b for b in sections["risks"]["bullets"] if b.startswith("[high] stale history")]
    assert len(stale) == 1 and "30.0 days stale" in stale[0], sections["risks"]["bullets"]
    assert document["facts"]["horizon_hours"] == 744, "the plan covers December only, not the gap before it"


@pytest.mark.slow
def test_overlapping_runs_and_a_kill_9_with_real_processes(small_inputs, tmp_path):
    """cron's failure modes with real processes: a second run while one works exits 3 at once and names it; a run
    killed with SIGKILL mid-way leaves the previous report byte-identical; the next run takes the stale lock over."""
    scenario, history = small_inputs
    reports = tmp_path / "reports"
    assert _report("2026-10", scenario, history, reports, "--compare-policies", "none").exit_code == 0
    october = reports / "2026-10"
    before = {p.relative_to(october).as_posix(): p.read_bytes() for p in sorted(october.rglob("*")) if p.is_file()}
    planner = [sys.executable, "-m", "planner"]
    # The first run compares every policy: calibrating three more of them keeps it working for minutes.
    first = subprocess.Popen([*planner, *_arguments("2026-10", scenario, history, reports, "--compare-policies",
                                                     "fcfs,cmu,wspt,drr-wspt")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        holder = _wait_for_holder(reports, first)
        started = time.monotonic()
        second = subprocess.run([*planner, *_arguments("2026-10", scenario, history, reports, "--compare-policies",
                                                        "none")], capture_output=True, text=True, timeout=300)
        seconds = time.monotonic() - started
        assert first.poll() is None, "the first run still works: the second did not wait for it"
        message = " ".join(second.stderr.split())
        assert second.returncode == 3, second.stderr
        assert f"process {first.pid}" in message and holder.started_at in message, message
        assert str(reports / ".lock") in message and "nothing was written" in message
        assert second.stdout == "" and seconds < 60, "it stopped at start, before any work"
        time.sleep(2.0)  # let the first run get further into its work
        assert first.poll() is None
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=30)
    after = {p.relative_to(october).as_posix(): p.read_bytes() for p in sorted(october.rglob("*")) if p.is_file()}
    assert after == before, "a run killed mid-way leaves the previous report byte-identical"
    assert read_holder(reports).pid == first.pid, "the killed run could not clear its holder record"
    again = _report("2026-10", scenario, history, reports, "--compare-policies", "none")
    assert again.exit_code == 0, again.output
    output = " ".join(again.output.split())
    assert "took over the stale lock" in output and f"process {first.pid}" in output and "is gone" in output
    assert _files(october) == {name: GENERATED.sub(b"", data) for name, data in before.items()}
    assert not [p for p in reports.iterdir() if p.name not in (".lock", "2026-10")], "no leftovers"


def test_history_lists_runs_and_survives_a_corrupt_file(tmp_path, monkeypatch):
    path = tmp_path / "history.duckdb"
    path.write_bytes(b"this is not a database")
    monkeypatch.setenv("PLANNER_HISTORY", str(path))
    assert runner.invoke(cli.app, ["validate", str(REPO / "scenarios" / "demo.toml")]).exit_code == 0
    listed = runner.invoke(cli.app, ["history", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["rows"]
    assert [r["command"] for r in rows] == ["validate"]
    assert list(tmp_path.glob("history.duckdb.corrupt-*")), "the unreadable file is kept aside, not deleted"


def demo_narrowed(folder: Path) -> Path:
    """The demo scenario with llama-3.1-8b on 1 or 2 H100s and llama-3.1-70b on 4 or 8 H100s (Tokyo has no H200)."""
    data = tomllib.loads((REPO / "scenarios" / "demo.toml").read_text())
    narrow = {"llama-3.1-8b": (["H100"], [1, 2]), "llama-3.1-70b": (["H100"], [4, 8])}
    for model in data["models"]:
        model["skus"], model["tp"] = narrow[model["name"]]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "demo.toml"
    path.write_text(tomli_w.dumps(data))
    return path


@pytest.mark.slow
def test_demo_report_json_matches_the_golden_file(tmp_path):
    args = ["report", "--month", "2026-11", "--scenario", str(demo_narrowed(tmp_path / "inputs")),
            "--history", str(REPO / "data" / "history" / "demo_history.parquet"), "--reports", str(tmp_path),
            *DEMO_ARGS]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert "2026-11 ended before today" in " ".join(result.stderr.split())  # the clock is past the demo's months
    document = json.loads((tmp_path / "2026-11" / "report.json").read_text())
    document.pop("generated_at")
    if os.environ.get("PLANNER_REGEN_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    assert GOLDEN.exists(), "golden file missing: run with PLANNER_REGEN_GOLDEN=1 once and review it"
    assert document == json.loads(GOLDEN.read_text())

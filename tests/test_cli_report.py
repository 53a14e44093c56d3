"""``planner report`` and ``planner history`` end to end: files, idempotence, month over month, crash safety.

Golden file: tests/golden/report_demo.json is the report JSON of the bundled demo scenario
and history for 2026-11 (settings in ``DEMO_ARGS``). Regenerate it on purpose with

    PLANNER_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_cli_report.py -k golden

and review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from loop_fixtures import write_small_inputs
from typer.testing import CliRunner

from planner import cli
from planner.runs import RunHistory

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "report_demo.json"
GENERATED = re.compile(rb"^.*[Gg]enerated[ _]at.*$", re.MULTILINE)
FAST = ["--periods", "hourly", "--sim-duration", "20min", "--replications", "2", "--engine", "local"]
DEMO_ARGS = ["--periods", "how:24", "--compare-policies", "fcfs,drr-wspt", "--gap", "0.05", "--sim-duration", "10min",
             "--replications", "2", "--engine", "local"]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): GENERATED.sub(b"", p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def small_inputs(tmp_path_factory):
    return write_small_inputs(tmp_path_factory.mktemp("inputs"))


def _report(month: str, scenario: Path, history: Path, reports: Path, *extra: str):
    return runner.invoke(cli.app, ["report", "--month", month, "--scenario", str(scenario), "--history", str(history),
                                   "--reports", str(reports), *FAST, *extra])


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
    again = _report("2026-10", scenario, history, reports, "--compare-policies", "fcfs,drr-wspt")
    assert again.exit_code == 0, again.output
    assert _files(october) == before, "the same inputs must give the same report apart from the generated-at line"

    november = _report("2026-11", scenario, history, reports, "--compare-policies", "none", "--json")
    assert november.exit_code == 0, november.output
    assert json.loads(november.stdout)["previous_month_found"] is True
    document = json.loads((reports / "2026-11" / "report.json").read_text())
    sections = {s["key"]: s for s in document["sections"]}
    assert sections["accuracy"]["status"] == "ok", "October's forecast is in the run history: accuracy must show"
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

    import planner.report.write as write

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


def test_report_rejects_a_bad_month_before_any_work(small_inputs, tmp_path):
    scenario, history = small_inputs
    result = _report("2026-13", scenario, history, tmp_path / "reports")
    assert result.exit_code == 3 and "YYYY-MM" in result.output
    assert not (tmp_path / "reports").exists()


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


@pytest.mark.slow
def test_demo_report_json_matches_the_golden_file(tmp_path):
    args = ["report", "--month", "2026-11", "--scenario", str(REPO / "scenarios" / "demo.toml"),
            "--history", str(REPO / "data" / "history" / "demo_history.parquet"), "--reports", str(tmp_path),
            *DEMO_ARGS]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "2026-11" / "report.json").read_text())
    document.pop("generated_at")
    if os.environ.get("PLANNER_REGEN_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    assert GOLDEN.exists(), "golden file missing: run with PLANNER_REGEN_GOLDEN=1 once and review it"
    assert document == json.loads(GOLDEN.read_text())

"""The README's quoted figures are the ones their recorded runs render (benchmarks/readme_figures.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import readme_figures  # noqa: E402

TIME_LOG = """\tCommand being timed: "planner sweep ..."
\tUser time (seconds): 1000.50
\tSystem time (seconds): 20.25
\tPercent of CPU this job got: 180%
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5
"""


def test_the_readme_quotes_the_recorded_runs():
    entries = readme_figures.recorded()
    readme = readme_figures.README.read_text()
    assert readme_figures.render_readme(readme, entries) == readme, \
        "README.md's quoted figures differ from their records: run python benchmarks/readme_figures.py render"
    sweep = entries[readme_figures.SWEEP]
    assert sweep["command"] in " ".join(readme.split()).replace("\\ ", "")
    assert [row["value"] for row in sweep["rows"]] == [300.0, 500.0, 800.0, 1200.0]


def test_the_records_come_from_timed_runs():
    entries = readme_figures.recorded()
    for entry in entries.values():
        assert entry["wall_s"] > 0 and len(entry["commit"]) == 40 and entry["calibration_cache"] == "cold"
    months = [c["month"] for c in entries[readme_figures.MAKE_RUN]["commands"] if c["command"] == "report"]
    assert months == ["2026-10", "2026-11"]
    assert all(c["exit_code"] == 0 for c in entries[readme_figures.MAKE_RUN]["commands"])
    assert readme_figures.CHART.stat().st_size > 10_000


def test_a_time_log_gives_wall_and_cpu_seconds():
    assert readme_figures.read_time_log(TIME_LOG) == {"wall_s": 3723.5, "cpu_s": 1020.8}
    with pytest.raises(ValueError, match="time -v"):
        readme_figures.read_time_log("rc=0")


def test_the_sweep_table_names_the_demos_value_an_infeasible_values_cause_and_the_price_of_the_slo():
    rows = [{"value": 300.0, "feasible": True, "cost_usd": 80000.0, "gpus_peak": 90, "slo_status": "met",
             "binding": "interactive ttft p99 (82% of peak GPUs)", "diagnosis": ""},
            {"value": 800.0, "feasible": True, "cost_usd": 64000.0, "gpus_peak": 72, "slo_status": "met",
             "binding": "interactive ttft p99 (78% of peak GPUs)", "diagnosis": ""},
            {"value": 1200.0, "feasible": True, "cost_usd": 62720.0, "gpus_peak": 70, "slo_status": "met",
             "binding": "", "diagnosis": ""},
            {"value": 50.0, "feasible": False, "cost_usd": None, "gpus_peak": None, "slo_status": "infeasible",
             "binding": "", "diagnosis": "no SKU meets TTFT 50 ms"}]
    text = readme_figures.render_sweep({"rows": rows})
    assert "| 800 ms (the demo's) | $64,000 | 72 | met | interactive ttft p99 (78% of peak GPUs) |" in text
    assert "| 50 ms | — | — | infeasible: no SKU meets TTFT 50 ms |  |" in text
    assert "Going from 800 to 300 ms costs 25 % more; loosening to 1,200 ms saves 2 %." in text


def test_the_make_run_line_splits_install_and_months():
    entry = {"cores": 2, "wall_s": 1500.0, "cpu_s": 2400.0, "commit": "a" * 40,
             "commands": [{"command": "validate", "month": "", "duration_s": 1.0, "exit_code": 0},
                          {"command": "report", "month": "2026-10", "duration_s": 299.0, "exit_code": 0},
                          {"command": "report", "month": "2026-11", "duration_s": 1080.0, "exit_code": 0},
                          {"command": "history", "month": "", "duration_s": None, "exit_code": 0}]}
    assert readme_figures.render_make_run(entry) == (
        "On 2 cores the first `make run` in a fresh clone took 25 min (40 CPU minutes; commit aaaaaaa): "
        "2 to create the venv and install, then 2026-10 5 min, 2026-11 18 min.")
    made = {**entry, "wall_s": 1385.0}  # 5 s outside the commands: the venv was there already
    assert readme_figures.render_make_run(made) == (
        "On 2 cores the first `make run` in a fresh clone took 23 min (40 CPU minutes; commit aaaaaaa): "
        "the venv already made by `make test`, then 2026-10 5 min, 2026-11 18 min.")

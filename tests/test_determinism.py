"""Same inputs, same bytes, whatever the machine's load: placement stops on work limits, not the clock.

The demo placement is run twice at once (each run slows the other down, as a busy
machine would), and both must write the same plan, flows and plan JSON as each other and
as the golden plan committed in ``tests/golden/demo_place/``, whichever machine runs the
test. Only the wall-clock figures of the plan JSON (``solve_time_s``, ``seconds``) may differ.
When the inputs change on purpose (scenario, catalog, profiles, demo history, placement),
regenerate the golden plan with

    PLANNER_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_determinism.py -k golden

(it still runs the two placements and checks that they agree) and review the diff before
committing it.

The safety net is checked apart: a search that the wall clock stops must say so in the
plan JSON, on screen and in the run history.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO_ROOT

from planner.placement import highs_backend
from planner.placement.limits import SafetyNet
from planner.storage import without_run_state

GOLDEN = REPO_ROOT / "tests" / "golden"
WALL_CLOCK = frozenset({"solve_time_s", "seconds"})
QUANTILE_FACTORS = {"q50": 1.0, "q90": 1.15, "q95": 1.25, "q99": 1.45}


def demo_fortnight_forecast(path: Path) -> Path:
    """The demo history's last 14 days (the demo's horizon) moved 14 days ahead, as a forecast
    (no model: fast and exact)."""
    hours = 14 * 24
    history = pd.read_parquet(REPO_ROOT / "data" / "history" / "demo_history.parquet")
    stamps = pd.to_datetime(history["ts"], utc=True)
    last = history[stamps > stamps.max() - pd.Timedelta(hours=hours)]
    frame = last[["region", "model", "traffic_class"]].copy()
    frame["ts"] = (pd.to_datetime(last["ts"], utc=True) + pd.Timedelta(hours=hours)).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    frame["mean"] = last["requests"].astype(float)
    for column, factor in QUANTILE_FACTORS.items():
        frame[column] = frame["mean"] * factor
    frame["model_used"] = "demo history, last 14 days"
    frame.sort_values(["region", "model", "traffic_class", "ts"]).to_csv(path, index=False, lineterminator="\n")
    return path


PERIODS = "how:24"
"""Day-long hour-of-week blocks: seven periods keep the two placements to seconds each; the search, its
work limits and its decomposition are the same as at the default's 42 periods."""


def _place(folder: Path, forecast: Path, name: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "planner", "place", "--scenario", str(REPO_ROOT / "scenarios" / "demo.toml"),
               "--forecast", str(forecast), "--out", str(folder / f"{name}.csv"), "--periods", PERIODS]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})


def _plan_json(path: Path) -> dict:
    return without_run_state(json.loads(path.read_text()), WALL_CLOCK)


@pytest.mark.slow
def test_the_demo_placement_is_the_same_on_a_busy_machine_and_matches_the_golden_plan(tmp_path):
    forecast = demo_fortnight_forecast(tmp_path / "forecast.csv")
    runs = {name: _place(tmp_path, forecast, name) for name in ("a", "b")}
    for proc in runs.values():
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert a.read_bytes() == b.read_bytes()
    assert (tmp_path / "a.flows.csv").read_bytes() == (tmp_path / "b.flows.csv").read_bytes()
    meta_a, meta_b = _plan_json(tmp_path / "a.json"), _plan_json(tmp_path / "b.json")
    meta_b["files"] = meta_a["files"]
    assert meta_a == meta_b
    assert meta_a["reproducible"] is True and meta_a["time_limit_hits"] == []
    golden = GOLDEN / "demo_place"
    if os.environ.get("PLANNER_REGEN_GOLDEN") == "1":
        golden.mkdir(parents=True, exist_ok=True)
        (golden / "plan.csv").write_bytes(a.read_bytes())
        files = {"flows": "plan.flows.csv", "plan": "plan.csv"}
        (golden / "plan.json").write_text(json.dumps({**meta_a, "files": files}, indent=2, sort_keys=True) + "\n")
    assert a.read_bytes() == (golden / "plan.csv").read_bytes()
    expected = json.loads((golden / "plan.json").read_text())
    meta_a["files"] = expected["files"]
    assert meta_a == expected


def test_a_search_the_safety_net_stopped_is_flagged(monkeypatch):
    """Pretend every solver call ran into the wall clock: the plan is still returned, marked as not reproducible.

    (Every call, not only the integer ones: with a pool minimum of two replicas this case's search proves its plan
    optimal from its LPs and warm start, without an integer solve.)"""
    from placement_helpers import two_region_case

    from planner.placement import place_plan

    real = highs_backend.solve

    def stopped_by_the_clock(milp, **kwargs):
        outcome = real(milp, **kwargs)
        outcome.hit_time_limit = True
        return outcome

    monkeypatch.setattr(highs_backend, "solve", stopped_by_the_clock)
    case = two_region_case()
    result = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                        periods="hourly", gap=0.0, baselines=True)
    meta = result.meta
    assert meta["reproducible"] is False and meta["time_limit_hits"]
    assert any("safety net" in w and "may differ between runs" in w for w in meta["warnings"])
    assert meta["slo_checked"] is True


def test_the_safety_net_records_what_it_stopped_and_skips_work_once_expired():
    net = SafetyNet.starting_now(3600)
    assert not net.expired and net.left() > 3500
    assert net.skip("optional work") is False and net.hits == []
    late = SafetyNet(deadline=0.0)
    assert late.expired and late.left() == pytest.approx(0.05)
    assert late.skip("optional work") is True and late.hits == ["optional work skipped"]

"""`planner place` then `planner simulate` through the CLI, and exit 4 with a diagnosis when infeasible."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode

runner = CliRunner()
PLAN_COLUMNS = ["period", "region", "sku", "model", "tier", "replicas", "gpus", "usd"]


@pytest.fixture
def forecast_file(tmp_path):
    """Six hours of a flat forecast for the demo scenario's origins, models and classes (requests per hour)."""
    rows = []
    hours = pd.date_range("2026-11-02T16:00:00Z", periods=6, freq="h")
    rate = {"interactive": 7200.0, "standard": 3600.0, "batch": 1800.0}
    for origin in ("us-east", "eu-west"):
        for model in ("llama3-8b", "llama2-70b"):
            for cls, per_hour in rate.items():
                for i, ts in enumerate(hours):
                    level = per_hour * (1.0 + 0.1 * i)
                    rows.append({"region": origin, "model": model, "traffic_class": cls,
                                 "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "mean": level, "q50": level,
                                 "q90": 1.2 * level, "q95": 1.3 * level, "q99": 1.5 * level,
                                 "model_used": "test"})
    path = tmp_path / "forecast.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_place_writes_plan_json_and_flows_then_simulate_reads_them(repo_root, forecast_file, tmp_path):
    scenario = str(repo_root / "scenarios/demo.toml")
    plan = tmp_path / "plan.csv"
    result = runner.invoke(cli.app, ["place", "--scenario", scenario, "--forecast", str(forecast_file),
                                     "--out", str(plan), "--time-limit", "60", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["meta"]["status"] in ("optimal", "feasible_within_gap")
    frame = pd.read_csv(plan)
    assert list(frame.columns) == PLAN_COLUMNS
    assert (frame["replicas"] > 0).all() and (frame["usd"] >= 0).all()
    meta = json.loads(plan.with_suffix(".json").read_text())
    assert set(meta["inputs_sha256"]) >= {"scenario", "forecast"}
    assert (tmp_path / "plan.flows.csv").exists()

    sim = runner.invoke(cli.app, ["simulate", "--scenario", scenario, "--plan", str(plan),
                                  "--out", str(tmp_path / "sim.csv"), "--duration", "5min",
                                  "--replications", "2", "--json"])
    sim_payload = json.loads(sim.stdout)
    assert sim_payload["rows"] and (tmp_path / "sim.csv").exists()
    # The analytic capacity may leave a class short; simulate then says so with exit 5, after writing.
    assert sim.exit_code == (ExitCode.OK if sim_payload["all_met"] else ExitCode.SLO_FAILED), sim.output


def test_quota_too_small_exits_4_and_names_quota(repo_root, forecast_file, tmp_path):
    text = (repo_root / "scenarios/demo.toml").read_text()
    assert "quotas = {}" in text
    starved = tmp_path / "starved.toml"
    starved.write_text(text.replace("quotas = {}", "quotas = { L4 = 0, L40S = 0, A100-80GB = 0, H100 = 1, H200 = 0 }", 1))
    plan = tmp_path / "plan.csv"
    result = runner.invoke(cli.app, ["place", "--scenario", str(starved), "--forecast", str(forecast_file),
                                     "--out", str(plan)])
    assert result.exit_code == ExitCode.INFEASIBLE, result.output
    assert "quota" in result.output.lower()
    assert not plan.exists()

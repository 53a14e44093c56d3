"""`planner simulate` through the CLI: SLO table and JSON, outputs, and clear errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode

runner = CliRunner()
P = "2026-11-02T18:00:00Z"


@pytest.fixture
def plan_files(tmp_path):
    plan = pd.DataFrame([
        {"period": P, "region": "aws:us-east-1", "sku": "H100", "model": "llama2-70b", "tier": "on_demand",
         "replicas": 2, "gpus": 8, "usd": 0.0},
        {"period": P, "region": "gcp:europe-west4", "sku": "L4", "model": "llama3-8b", "tier": "on_demand",
         "replicas": 2, "gpus": 2, "usd": 0.0},
    ])
    flows = pd.DataFrame(
        [{"period": P, "origin": "us-east", "region": "aws:us-east-1", "model": "llama2-70b",
          "traffic_class": k, "rps": r} for k, r in (("interactive", 1.0), ("standard", 0.5), ("batch", 0.2))]
        + [{"period": P, "origin": "eu-west", "region": "gcp:europe-west4", "model": "llama3-8b",
            "traffic_class": k, "rps": r} for k, r in (("interactive", 0.5), ("standard", 0.2))])
    plan_path = tmp_path / "plan.csv"
    plan.to_csv(plan_path, index=False)
    flows.to_csv(tmp_path / "plan.flows.csv", index=False)
    return plan_path


def test_simulate_prints_slo_table_as_json_and_writes_outputs(repo_root, plan_files, tmp_path):
    out = tmp_path / "sim.csv"
    args = ["simulate", "--scenario", str(repo_root / "scenarios/demo.toml"), "--plan", str(plan_files),
            "--out", str(out), "--duration", "5min", "--replications", "2", "--seed", "3", "--json"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["period"] == P and isinstance(payload["all_met"], bool)
    assert {(row["region"], row["traffic_class"]) for row in payload["rows"]} >= {
        ("aws:us-east-1", "interactive"), ("gcp:europe-west4", "standard")}
    first = out.read_bytes()
    assert runner.invoke(cli.app, args).exit_code == 0
    assert out.read_bytes() == first  # same seed, byte-identical results


def test_missing_flows_exits_3_with_hint(repo_root, plan_files, tmp_path):
    (tmp_path / "plan.flows.csv").unlink()
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(repo_root / "scenarios/demo.toml"),
                                     "--plan", str(plan_files), "--out", str(tmp_path / "sim.csv")])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "flows" in result.output


def test_bad_duration_exits_3(repo_root, plan_files, tmp_path):
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(repo_root / "scenarios/demo.toml"),
                                     "--plan", str(plan_files), "--out", str(tmp_path / "s.csv"),
                                     "--duration", "forever"])
    assert result.exit_code == ExitCode.INVALID_INPUT

"""``planner calibrate`` from the command line: the table `planner place --capacity` reads, cached, reproducible."""

from __future__ import annotations

import json

import pandas as pd
from loop_fixtures import write_small_inputs
from typer.testing import CliRunner

from planner import cli
from planner.placement.capacity import validate_capacity
from planner.runs import RunHistory

runner = CliRunner()


def test_calibrate_writes_a_placeable_table_and_reuses_its_cache(tmp_path):
    scenario, _ = write_small_inputs(tmp_path)
    out = tmp_path / "capacity.csv"
    args = ["calibrate", "--scenario", str(scenario), "--out", str(out), "--engine", "local",
            "--cache-dir", str(tmp_path / "cache"), "--json"]
    first = runner.invoke(cli.app, args)
    assert first.exit_code == 0, first.output
    table = validate_capacity(pd.read_csv(out), where=out)
    assert set(table["traffic_class"]) == {"interactive", "standard", "batch"} and (table["sku"] == "H100").all()
    assert "cached" not in pd.read_csv(out).columns
    written = {p: p.read_bytes() for p in (out, out.with_suffix(".json"))}
    second = runner.invoke(cli.app, args)
    assert second.exit_code == 0, second.output
    assert all(row["cached"] for row in json.loads(second.stdout)["rows"]), "an unchanged profile is never re-simulated"
    assert {p: p.read_bytes() for p in written} == written, "cache or not, the same bytes"
    runs = RunHistory().runs(command="calibrate")
    assert [r["figures"]["simulated"] for r in runs] == [0, 1]


def test_calibrate_rejects_an_unknown_policy_before_simulating(tmp_path):
    scenario, _ = write_small_inputs(tmp_path)
    result = runner.invoke(cli.app, ["calibrate", "--scenario", str(scenario), "--out", str(tmp_path / "c.csv"),
                                     "--policy", "lifo", "--engine", "local"])
    assert result.exit_code == 3 and "lifo" in result.output
    assert not (tmp_path / "c.csv").exists()


def test_scheduler_without_dask_engine_is_a_usage_error_naming_the_fix(tmp_path):
    scenario, _ = write_small_inputs(tmp_path)
    result = runner.invoke(cli.app, ["calibrate", "--scenario", str(scenario), "--out", str(tmp_path / "c.csv"),
                                     "--scheduler", "tcp://localhost:8786", "--engine", "local"])
    assert result.exit_code == 3 and "--engine dask" in result.output

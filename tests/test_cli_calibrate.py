"""``planner calibrate`` from the command line: the table `planner place --capacity` reads, cached, reproducible."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import tomli_w
from loop_fixtures import small_raw
from typer.testing import CliRunner

from planner import cli
from planner.placement.capacity import validate_capacity
from planner.runs import RunHistory
from planner.scenario import load_scenario

runner = CliRunner()
QUICK = ["--sim-duration", "5m", "--replications", "2", "--engine", "local"]


def write_quick_scenario(folder: Path) -> Path:
    """The loop tests' slice of the demo (llama-3.1-8b on H100) on one GPU, without the long-context class
    (its ~14k-token prompts make simulation slow; its share goes to batch)."""
    raw = small_raw()
    raw["models"][0]["tp"] = [1]
    raw["classes"] = [k for k in raw["classes"] if k["name"] != "long-context"]
    raw["classes"][-1]["share"] = round(1.0 - sum(k["share"] for k in raw["classes"][:-1]), 6)
    path = folder / "calibrate-test.toml"
    path.write_text(tomli_w.dumps(raw), encoding="utf-8")
    return path


def test_calibrate_writes_a_placeable_table_and_reuses_its_cache(tmp_path):
    scenario = write_quick_scenario(tmp_path)
    out = tmp_path / "capacity.csv"
    args = ["calibrate", "--scenario", str(scenario), "--out", str(out), *QUICK, "--cache-dir",
            str(tmp_path / "cache"), "--json"]
    first = runner.invoke(cli.app, args)
    assert first.exit_code == 0, first.output
    written_table = pd.read_csv(out)
    table = validate_capacity(written_table, where=out)
    assert set(table["traffic_class"]) == {"interactive", "standard", "batch"} and (table["sku"] == "H100").all()
    assert (table["tp_degree"] == 1).all() and (table["engine"] == "vllm").all()
    assert table[["max_num_seqs", "max_num_batched_tokens"]].drop_duplicates().shape[0] == 1
    assert "cached" not in written_table.columns
    meta = json.loads(out.with_suffix(".json").read_text())["meta"]
    (unit,) = meta["units"]
    assert (unit["max_num_seqs"], unit["max_num_batched_tokens"]) == tuple(
        table[["max_num_seqs", "max_num_batched_tokens"]].iloc[0])
    assert len(unit["settings_tried"]) > 1 and meta["engine_settings"]["searched"]  # the CLI searches the settings
    written = {p: p.read_bytes() for p in (out, out.with_suffix(".json"))}
    second = runner.invoke(cli.app, args)
    assert second.exit_code == 0, second.output
    assert all(row["cached"] for row in json.loads(second.stdout)["rows"]), "an unchanged profile is never re-simulated"
    assert {p: p.read_bytes() for p in written} == written, "cache or not, the same bytes"
    runs = RunHistory().runs(command="calibrate")
    assert [r["figures"]["simulated"] for r in runs] == [0, 1]
    base = load_scenario(scenario).seeds.base  # no --seed given: the run records the seed it drew from
    assert [r["seeds"] for r in runs] == [{"seed": base}, {"seed": base}]


def test_calibrate_rejects_an_unknown_policy_before_simulating(tmp_path):
    scenario = write_quick_scenario(tmp_path)
    result = runner.invoke(cli.app, ["calibrate", "--scenario", str(scenario), "--out", str(tmp_path / "c.csv"),
                                     "--policy", "lifo", "--engine", "local"])
    assert result.exit_code == 3 and "lifo" in result.output
    assert not (tmp_path / "c.csv").exists()


def test_scheduler_without_dask_engine_is_a_usage_error_naming_the_fix(tmp_path):
    scenario = write_quick_scenario(tmp_path)
    result = runner.invoke(cli.app, ["calibrate", "--scenario", str(scenario), "--out", str(tmp_path / "c.csv"),
                                     "--scheduler", "tcp://localhost:8786", "--engine", "local"])
    assert result.exit_code == 3 and "--engine dask" in result.output

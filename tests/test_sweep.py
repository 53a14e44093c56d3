"""``planner sweep``: the plan loop once per value of one field, on one forecast, with infeasible values as rows."""

from __future__ import annotations

import json
import tomllib
from types import SimpleNamespace

import pandas as pd
import pytest
from loop_fixtures import small_raw, write_small_inputs
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode, InputError
from planner.loop.sweep import SWEEP_COLUMNS, binding_constraint, parse_vary, sweep_points
from planner.runs import RunHistory
from planner.scenario import ScenarioError

runner = CliRunner()


def test_vary_splits_values_at_top_level_commas_only():
    vary = parse_vary('models.llama-3.1-70b.skus=["H100","H200"],["H100"]')
    assert vary.path == "models.llama-3.1-70b.skus" and vary.values == ('["H100","H200"]', '["H100"]')
    assert parse_vary("classes.interactive.ttft_p99_ms=300, 500,800").values == ("300", "500", "800")
    assert parse_vary("demand-scale=1,region=eu-west:2").scales_demand


@pytest.mark.parametrize(("text", "message"), [
    ("classes.interactive.ttft_p99_ms", "is not PATH=V1,V2,..."),
    ("classes.interactive.ttft_p99_ms=300,,500", "is not PATH=V1,V2,..."),
    ("=1,2", "is not PATH=V1,V2,..."),
    ("capacity.redundancy=1,1", "repeats a value"),
])
def test_a_malformed_vary_is_refused_with_an_example(text, message):
    with pytest.raises(InputError) as caught:
        parse_vary(text)
    assert message in caught.value.message and caught.value.where == "--vary"


def test_every_value_is_validated_like_the_file_before_any_work():
    data = small_raw()
    points = sweep_points(parse_vary("classes.interactive.ttft_p99_ms=300,800"), data, "s.toml", ())
    assert [next(c.ttft_p99_ms for c in p.scenario.classes if c.name == "interactive") for p in points] == [300, 800]
    with pytest.raises(ScenarioError) as caught:
        sweep_points(parse_vary("classes.interactive.ttft_p99_ms=300,fast"), data, "s.toml", ())
    assert caught.value.errors[0]["file"] == "s.toml with --vary classes.interactive.ttft_p99_ms=fast"
    demand = sweep_points(parse_vary("demand-scale=1,2"), data, "s.toml", ())
    assert demand[0].scenario == demand[1].scenario and [d.demand[0].factor for d in demand] == [1.0, 2.0]


@pytest.mark.parametrize(("text", "message"), [
    ("classes.nope.weight=1,2", "has no entry named 'nope'"),
    ("classes.interactive=1,2", "names a list entry"),
    ("demand-scale=1,two", "'two' is not a number"),
    ("demand-scale=1,region=mars:2", "the scenario has no region 'mars'"),
])
def test_a_bad_vary_value_names_vary(text, message):
    with pytest.raises(InputError) as caught:
        sweep_points(parse_vary(text), small_raw(), "s.toml", ())
    assert message in caught.value.message and caught.value.where == "--vary"


def test_binding_constraint_names_the_slo_of_most_peak_gpus():
    plan = pd.DataFrame({"period": ["a", "a", "b"], "model": ["m", "m", "m"], "sku": ["H100", "L4", "H100"],
                         "tp_degree": [1, 1, 1], "gpus": [6, 2, 1]})
    capacity = pd.DataFrame({"model": ["m", "m"], "sku": ["H100", "L4"], "tp_degree": [1, 1],
                             "binding_class": ["interactive", "batch"], "binding_metric": ["ttft", "e2e"]})
    loop = SimpleNamespace(capacity=capacity, placement=SimpleNamespace(plan=plan))
    assert binding_constraint(loop) == "interactive ttft p99 (75% of peak GPUs)"
    loop.capacity = capacity.drop(columns=["binding_class"])
    assert binding_constraint(loop) == ""


@pytest.fixture(scope="module")
def small_inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep-inputs")
    scenario, history = write_small_inputs(folder)
    capacity = folder / "capacity.csv"
    pd.DataFrame({"model": ["llama-3.1-8b"] * 3, "sku": ["H100"] * 3, "tp_degree": [1] * 3,
                  "traffic_class": ["interactive", "standard", "batch"], "max_rps_per_replica": [4.0, 4.0, 4.0],
                  }).to_csv(capacity, index=False)
    return scenario, history, capacity


@pytest.mark.slow
def test_sweep_writes_a_row_per_value_and_an_infeasible_value_is_a_row(small_inputs, tmp_path):
    scenario, history, capacity = small_inputs
    with scenario.open("rb") as handle:
        quota = tomllib.load(handle)["capacity"].get("quotas")
    assert quota is None or "H100" not in quota
    out = tmp_path / "sweep"
    args = ["sweep", "--scenario", str(scenario), "--history", str(history), "--capacity", str(capacity),
            "--vary", "capacity.quotas.H100=64,1", "--out", str(out), "--periods", "hourly", "--max-rounds", "1",
            "--sim-duration", "10min", "--replications", "1", "--engine", "local", "--demand-scale", "2", "--json"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "sweep.csv")
    assert list(table.columns) == list(SWEEP_COLUMNS)
    assert table["value"].astype(str).tolist() == ["64", "1"]
    ok, infeasible = table.iloc[0], table.iloc[1]
    assert bool(ok["feasible"]) and ok["cost_usd"] > 0 and ok["gpus_peak"] > 1
    assert not bool(infeasible["feasible"]) and pd.isna(infeasible["cost_usd"])
    assert infeasible["binding"] == "quota" and "raise the GPU quota" in infeasible["diagnosis"]
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["vary"] == "capacity.quotas.H100" and meta["what_if"] == ["--demand-scale 2"]
    (run,) = RunHistory().runs(command="sweep")
    assert run["exit_code"] == 0 and run["figures"]["feasible"] == 1


def test_a_bad_value_exits_3_before_any_work(small_inputs, tmp_path):
    scenario, history, _ = small_inputs
    out = tmp_path / "sweep"
    result = runner.invoke(cli.app, ["sweep", "--scenario", str(scenario), "--history", str(history),
                                     "--vary", "classes.interactive.ttft_p99_ms=300,-5", "--out", str(out)])
    assert result.exit_code == ExitCode.INVALID_INPUT, result.output
    assert "--vary classes.interactive.ttft_p99_ms=-5" in result.output
    assert not out.exists()


def test_a_folder_of_other_files_is_refused_before_any_work(small_inputs, tmp_path):
    scenario, history, _ = small_inputs
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = runner.invoke(cli.app, ["sweep", "--scenario", str(scenario), "--history", str(history),
                                     "--vary", "demand-scale=1,2", "--out", str(out)])
    assert result.exit_code == ExitCode.INVALID_INPUT, result.output
    assert "not a sweep's (notes.txt)" in " ".join(result.output.split())
    assert (out / "notes.txt").read_text() == "keep me"

"""One workload per (model, class): declared lengths, per-model mixes, no silent default, no-traffic pairs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner import cli
from planner.calibrate.inputs import model_mixes
from planner.errors import ExitCode, InputError
from planner.scenario import load_scenario, parse_scenario
from planner.scenario.loading import read_scenario_data
from planner.workflows.common import read_histograms
from planner.workloads import forecast_mixes, no_traffic_pairs, resolve_workloads, rounded_mix

runner = CliRunner()
DEMO = REPO_ROOT / "scenarios" / "demo.toml"
# Lengths of the Azure LLM inference traces 2023 (data/README.md): conversation and code, p50 and p99 in tokens.
CHAT = {"prompt_tokens": {"median": 1020, "p99": 4142}, "output_tokens": {"median": 129, "p99": 601}}
CODE = {"prompt_tokens": {"median": 1469, "p99": 7436}, "output_tokens": {"median": 13, "p99": 251.5}}


def user_data(**chat_extra: Any) -> dict[str, Any]:
    """The demo's regions and models with the user's own classes: `chat` served only by the 70B, `code` only by
    the 8B, lengths declared from the Azure traces."""
    data = read_scenario_data(DEMO)
    template = {k: v for k, v in data["classes"][0].items() if k not in ("prompt_tokens", "output_tokens")}
    chat = {**copy.deepcopy(template), "name": "chat", "share": 0.75, **CHAT, **chat_extra}
    code = {**copy.deepcopy(template), "name": "code", "share": 0.25, "latency_budget_ms": 120, **CODE}
    data["classes"] = [chat, code]
    for model in data["models"]:
        model["classes"] = ["chat"] if model["name"] == "llama-3.1-70b" else ["code"]
        model["slos"] = {}
    return data


def lengths(scenario_data: dict[str, Any], klass: str = "chat", model: str = "llama-3.1-70b") -> Any:
    scenario = parse_scenario(scenario_data)
    return resolve_workloads(scenario, {model: {klass: 1.0}})[(model, klass)]


def test_each_model_is_mixed_over_the_classes_it_serves():
    scenario = parse_scenario(user_data())
    mixes = model_mixes(scenario)
    assert mixes["llama-3.1-70b"] == ({"chat": 1.0, "code": 0.0}, "scenario class shares of the model's classes")
    assert mixes["llama-3.1-8b"][0] == {"chat": 0.0, "code": 1.0}
    assert no_traffic_pairs(scenario, {m: mix for m, (mix, _) in mixes.items()}) == [
        ("llama-3.1-8b", "chat"), ("llama-3.1-70b", "code")]
    workloads = resolve_workloads(scenario, {m: mix for m, (mix, _) in mixes.items()})
    assert set(workloads) == {("llama-3.1-70b", "chat"), ("llama-3.1-8b", "code")}


def test_a_declared_law_is_used_and_named():
    chat = lengths(user_data())
    assert chat.lengths.prompt.quantile(0.5) in (1020, 1021)
    assert chat.prompt_source == "scenario classes[chat].prompt_tokens: lognormal median 1020, p99 4142"
    assert chat.defaulted == ()


@pytest.mark.parametrize(("declared", "mean", "p99"), [
    (512, 512.0, 512),
    ({"fixed": 300}, 300.0, 300),
    ({"points": [[100, 1], [300, 1]]}, 200.0, 300),
    ({"points": [[100, 3], [100, 1]]}, 100.0, 100),
])
def test_fixed_and_point_laws_draw_exactly_their_values(declared, mean, p99):
    chat = lengths(user_data(prompt_tokens=declared))
    assert chat.lengths.prompt.mean() == pytest.approx(mean)
    assert chat.lengths.prompt.quantile(0.99) == p99
    draws = chat.lengths.prompt.sample_from_uniform(np.random.default_rng(1).random(10_000))
    assert set(np.unique(draws)) <= {100, 300, 512}


def test_a_lognormal_by_mean_and_sigma_has_that_mean():
    chat = lengths(user_data(output_tokens={"mean": 200, "sigma": 0.5}))
    assert chat.lengths.output.mean() == pytest.approx(200.0, rel=1e-3)


def test_a_model_may_declare_its_own_lengths_over_the_class():
    data = user_data()
    data["models"][1]["workloads"] = {"chat": {"output_tokens": 64}}
    chat = lengths(data)
    assert chat.lengths.output.mean() == 64.0 and chat.output_source.startswith("scenario models[llama-3.1-70b]")
    assert chat.prompt_source.startswith("scenario classes[chat]")


def test_a_histogram_file_declaration_is_read_with_the_scenario(tmp_path: Path):
    pd.DataFrame({"bin_lo_tokens": [64, 128], "bin_hi_tokens": [128, 256], "count": [1, 3]}).to_csv(
        tmp_path / "out.csv", index=False)
    data = user_data(output_tokens={"histogram": "out.csv"})
    import tomli_w

    (tmp_path / "s.toml").write_bytes(tomli_w.dumps(data).encode())
    scenario = load_scenario(tmp_path / "s.toml")
    chat = resolve_workloads(scenario, {"llama-3.1-70b": {"chat": 1.0}})[("llama-3.1-70b", "chat")]
    assert chat.lengths.output.mean() == pytest.approx((95.5 * 1 + 191.5 * 3) / 4)
    assert "histogram out.csv" in chat.output_source


def test_a_class_with_traffic_and_no_lengths_is_an_input_error_naming_what_to_add():
    data = user_data()
    del data["classes"][0]["prompt_tokens"]
    data["classes"][0]["name"] = "fixed"
    for model in data["models"]:
        model["classes"] = ["fixed"] if model["name"] == "llama-3.1-70b" else ["code"]
    scenario = parse_scenario(data)
    with pytest.raises(InputError) as caught:
        resolve_workloads(scenario, {"llama-3.1-70b": {"fixed": 1.0}})
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert "class 'fixed' of model 'llama-3.1-70b' (prompt_tokens)" in str(caught.value)
    assert "prompt_tokens" in caught.value.fix
    # the same class without traffic needs no lengths: it is neither calibrated nor simulated
    assert resolve_workloads(scenario, {"llama-3.1-70b": {"fixed": 0.0}}) == {}


def test_a_class_named_like_a_built_in_law_gets_it_visibly():
    data = user_data()
    data["classes"][0].pop("prompt_tokens")
    data["classes"][0]["name"] = "interactive"
    data["models"][1]["classes"] = ["interactive"]
    scenario = parse_scenario(data)
    chat = resolve_workloads(scenario, {"llama-3.1-70b": {"interactive": 1.0}})[("llama-3.1-70b", "interactive")]
    assert chat.defaulted == ("prompt",) and chat.prompt_source.startswith("built-in law 'interactive'")


def test_bad_declarations_are_scenario_errors():
    for declared in ({"median": 100}, {"fixed": 0}, {"law": "premium"}, {"fixed": 5, "median": 3, "p99": 4},
                     {"points": []}, -3):
        with pytest.raises(InputError) as caught:
            parse_scenario(user_data(prompt_tokens=declared))
        assert "prompt_tokens" in str(caught.value)
    data = user_data()
    data["models"][0]["mix"] = {"code": 0.5}
    with pytest.raises(InputError, match="sums to 0.5"):
        parse_scenario(data)
    data["models"][0]["classes"] = ["premium"]
    with pytest.raises(InputError, match="no traffic class 'premium'"):
        parse_scenario(data)


def test_an_ingested_histogram_overrides_the_declaration_and_must_name_known_pairs():
    scenario = parse_scenario(user_data())
    histogram = pd.DataFrame({"model": "llama-3.1-70b", "traffic_class": "chat", "measure": "output_tokens",
                              "bin_lo_tokens": [8], "bin_hi_tokens": [16], "count": [10]})
    chat = resolve_workloads(scenario, {"llama-3.1-70b": {"chat": 1.0}}, histogram=histogram)[
        ("llama-3.1-70b", "chat")]
    assert chat.output_source == "ingest histogram" and chat.lengths.output.mean() == pytest.approx(11.5)
    assert chat.prompt_source.startswith("scenario classes[chat]")  # the histogram has no prompts of this pair
    with pytest.raises(InputError, match="model.*qwen3-32b") as caught:
        resolve_workloads(scenario, {}, histogram=histogram.assign(model="qwen3-32b"))
    assert caught.value.exit_code == ExitCode.INVALID_INPUT


def test_several_histograms_stack_and_add_the_counts_of_shared_bins(tmp_path: Path):
    rows = {"model": "llama-3.1-8b", "traffic_class": "code", "measure": "prompt_tokens", "bin_lo_tokens": [64],
            "bin_hi_tokens": [128], "count": [2]}
    pd.DataFrame(rows).to_csv(tmp_path / "a.histogram.csv", index=False)
    pd.DataFrame({**rows, "count": [3], "model": "llama-3.1-70b", "traffic_class": "chat"}).to_csv(
        tmp_path / "b.histogram.csv", index=False)
    pd.DataFrame({**rows, "count": [5]}).to_csv(tmp_path / "c.histogram.csv", index=False)
    merged = read_histograms([tmp_path / "a.histogram.csv", tmp_path / "b.histogram.csv",
                              tmp_path / "c.histogram.csv"])
    assert merged is not None
    assert sorted(merged["count"].tolist()) == [3, 7]


def test_forecast_mixes_are_each_models_own_traffic_in_whole_percent():
    forecast = pd.DataFrame({"model": ["a", "a", "a", "b"], "traffic_class": ["x", "y", "x", "x"],
                             "region": "r", "mean": [3.0, 2.0, 5.0, 0.0]})
    assert forecast_mixes(forecast, ["a", "b"], ["x", "y"]) == {"a": {"x": 0.8, "y": 0.2}}


@given(st.lists(st.floats(min_value=0.0, max_value=1e6), min_size=1, max_size=8).filter(lambda w: sum(w) > 0))
def test_a_rounded_mix_sums_to_one_and_keeps_every_class_with_traffic(weights):
    mix = rounded_mix({str(i): w for i, w in enumerate(weights)})
    assert sum(round(v * 100) for v in mix.values()) == 100
    positive = [str(i) for i, w in enumerate(weights) if w > 0]
    if len(positive) <= 100:
        assert all(mix[k] >= 0.01 for k in positive)
    total = sum(weights)
    assert all(abs(mix[str(i)] - w / total) <= 0.01 * max(len(positive), 1) + 1e-9 for i, w in enumerate(weights))


def _write_user_scenario(tmp_path: Path, data: dict[str, Any]) -> Path:
    import tomli_w

    path = tmp_path / "user.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


def test_validate_prints_each_pairs_effective_workload(tmp_path: Path):
    path = _write_user_scenario(tmp_path, user_data())
    result = runner.invoke(cli.app, ["validate", str(path), "--json"])
    assert result.exit_code == 0, result.output
    import json

    body = json.loads(result.stdout)
    pairs = {(w["model"], w["traffic_class"]): w for w in body["workloads"]}
    assert set(pairs) == {("llama-3.1-70b", "chat"), ("llama-3.1-8b", "code")}
    code = pairs[("llama-3.1-8b", "code")]
    assert code["prompt_p50_tokens"] in (1469, 1470) and code["output_source"].startswith("scenario classes[code]")
    assert body["length_defaults"] == []


def test_validate_refuses_an_undeclared_unknown_class(tmp_path: Path):
    data = user_data()
    del data["classes"][1]["output_tokens"]
    result = runner.invoke(cli.app, ["validate", str(_write_user_scenario(tmp_path, data))])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "class 'code' of model 'llama-3.1-8b' (output_tokens)" in result.output


@pytest.mark.slow
def test_calibrate_gives_each_model_its_own_classes_only(tmp_path: Path):
    data = user_data()
    for model in data["models"]:
        model["skus"], model["tp"] = ["H100"], [1] if model["name"] == "llama-3.1-8b" else [8]
    path = _write_user_scenario(tmp_path, data)
    out = tmp_path / "capacity.csv"
    result = runner.invoke(cli.app, ["calibrate", "--scenario", str(path), "--out", str(out), "--models",
                                     "llama-3.1-8b", "--sim-duration", "2min", "--replications", "2",
                                     "--tolerance", "0.2", "--default-settings", "--no-cache", "--engine", "local"])
    assert result.exit_code == 0, result.output
    import json

    meta = json.loads(out.with_suffix(".json").read_text())["meta"]
    assert meta["class_mix"] == {"llama-3.1-8b": {"code": 1.0}}
    assert meta["class_mix_source"] == {"llama-3.1-8b": "scenario class shares of the model's classes"}
    assert meta["no_traffic"] == [{"model": "llama-3.1-8b", "traffic_class": "chat"}]
    assert meta["length_defaults"] == []
    assert [w["traffic_class"] for w in meta["workloads"]] == ["code"]

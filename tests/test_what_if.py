"""What-ifs without editing files: ``--set PATH=VALUE`` on the scenario and ``--demand-scale`` on the forecast."""

from __future__ import annotations

import tomllib

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode, InputError
from planner.forecast.scaling import parse_demand_scale, parse_demand_scales, scale_flows, scale_forecast
from planner.runs import RunHistory
from planner.scenario import ScenarioError, load_scenario, parse_scenario
from planner.scenario.overrides import apply_overrides, parse_override, parse_overrides

runner = CliRunner()


@pytest.fixture
def demo(repo_root):
    return repo_root / "scenarios/demo.toml"


# --------------------------------------------------------------------------- --set
def test_set_reaches_list_entries_by_name_even_with_dots_in_the_name(demo):
    scenario = load_scenario(demo, parse_overrides([
        "classes.interactive.ttft_p99_ms=350",
        'capacity.tiers=["reserved","on_demand"]',
        'models.llama-3.1-70b.skus=["H100"]',
        'regions.latency_ms.eu-west."aws:us-east-1"=80',
        "policy.name=cmu",
    ]))
    classes = {c.name: c for c in scenario.classes}
    models = {m.name: m for m in scenario.models}
    assert classes["interactive"].ttft_p99_ms == 350 and classes["standard"].ttft_p99_ms != 350
    assert tuple(scenario.capacity.tiers) == ("reserved", "on_demand")
    assert tuple(models["llama-3.1-70b"].skus) == ("H100",)
    assert tuple(models["llama-3.1-8b"].skus) == ("L40S", "A100-80GB", "H100")
    assert scenario.regions.latency_ms["eu-west"]["aws:us-east-1"] == 80
    assert scenario.policy.name == "cmu"


def test_set_creates_a_field_the_file_leaves_to_its_default(demo):
    data = tomllib.loads(demo.read_text())
    assert "slos" not in next(m for m in data["models"] if m["name"] == "llama-3.1-8b")
    changed = apply_overrides(data, parse_overrides(["models.llama-3.1-8b.slos.interactive.ttft_p99_ms=400"]))
    assert next(m for m in changed["models"] if m["name"] == "llama-3.1-8b")["slos"] == {
        "interactive": {"ttft_p99_ms": 400}}
    assert "slos" not in next(m for m in data["models"] if m["name"] == "llama-3.1-8b")  # the input is not changed
    parse_scenario(changed)


def test_a_bad_value_gets_the_error_the_file_would_get(demo, tmp_path):
    edited = tmp_path / "edited.toml"
    text = demo.read_text()
    block = text.index('name = "interactive"')
    start = text.index("ttft_p99_ms = ", block)
    end = text.index("\n", start)
    edited.write_text(text[:start] + 'ttft_p99_ms = "fast"' + text[end:])
    with pytest.raises(ScenarioError) as in_file:
        load_scenario(edited)
    with pytest.raises(ScenarioError) as from_set:
        load_scenario(demo, parse_overrides(["classes.interactive.ttft_p99_ms=fast"]))
    assert [(e["field"], e["problem"], e["fix"]) for e in from_set.value.errors] == \
        [(e["field"], e["problem"], e["fix"]) for e in in_file.value.errors]
    assert "--set classes.interactive.ttft_p99_ms=fast" in from_set.value.errors[0]["file"]


@pytest.mark.parametrize(("text", "message", "fix"), [
    ("classes.interactiv.ttft_p99_ms=3", "classes has no entry named 'interactiv'", "did you mean 'interactive'"),
    ("capacity.tiers", "is not PATH=VALUE", "--set classes.interactive.ttft_p99_ms=350"),
    ("classes.interactive=3", "names a list entry, not a field", "classes.interactive.ttft_p99_ms"),
    ("horizon.days=3", "horizon is a value, not a table", "end the path at horizon"),
    ('regions."unclosed=3', "empty or unclosed part", "close every quote"),
])
def test_a_bad_path_names_the_option_and_the_fix(demo, text, message, fix):
    with pytest.raises(InputError) as caught:
        load_scenario(demo, parse_overrides([text]))
    assert message in caught.value.message and fix in caught.value.fix
    assert caught.value.where == "--set"


def test_a_misspelt_top_level_key_is_refused_like_in_the_file(demo):
    with pytest.raises(ScenarioError) as caught:
        load_scenario(demo, parse_overrides(['capacty.tiers=["spot"]']))
    assert caught.value.errors[0]["field"] == "capacty" and "did you mean 'capacity'" in caught.value.errors[0]["fix"]


def test_values_are_read_as_toml_and_otherwise_as_text():
    assert parse_override("a=350").value == 350
    assert parse_override("a=0.5").value == 0.5
    assert parse_override("a=true").value is True
    assert parse_override('a=["x","y"]').value == ["x", "y"]
    assert parse_override("a=cmu").value == "cmu"
    assert parse_override("a.b=x=y").value == "x=y"


# --------------------------------------------------------------------------- --demand-scale
def _forecast() -> pd.DataFrame:
    return pd.DataFrame({"region": ["us-east", "eu-west", "eu-west"], "model": ["m", "m", "n"],
                         "traffic_class": ["batch", "batch", "interactive"], "ts": ["t"] * 3,
                         "mean": [10.0, 20.0, 30.0], "q50": [9.0, 19.0, 29.0], "q99": [15.0, 25.0, 35.0],
                         "model_used": ["x"] * 3})


def test_demand_scale_scales_mean_and_every_quantile_of_the_selected_series():
    forecast = _forecast()
    everywhere = scale_forecast(forecast, parse_demand_scales(["2"]))
    demand = ["mean", "q50", "q99"]
    assert everywhere[demand].to_numpy().tolist() == (2 * forecast[demand]).to_numpy().tolist()
    eu = scale_forecast(forecast, parse_demand_scales(["region=eu-west:1.5", "class=interactive:2"]))
    assert eu["mean"].tolist() == [10.0, 30.0, 90.0]  # overlapping scales multiply
    assert eu["q99"].tolist() == [15.0, 37.5, 105.0]
    assert forecast["mean"].tolist() == [10.0, 20.0, 30.0]  # the input is not changed


def test_demand_scale_of_flows_selects_the_origin_as_region():
    flows = pd.DataFrame({"period": ["p"] * 2, "origin": ["us-east", "eu-west"], "region": ["gcp:a", "gcp:a"],
                          "model": ["m", "m"], "traffic_class": ["batch", "batch"], "rps": [1.0, 2.0]})
    assert scale_flows(flows, parse_demand_scales(["region=eu-west:3"]))["rps"].tolist() == [1.0, 6.0]


@pytest.mark.parametrize(("text", "message"), [
    ("two", "'two' is not a number"),
    ("-1", "finite number > 0"),
    ("0", "finite number > 0"),
    ("class=batch:0", "finite number > 0"),
    ("zone=eu:2", "selects no series"),
    ("region=:2", "selects no series"),
])
def test_a_bad_demand_scale_says_how_to_write_one(text, message):
    with pytest.raises(InputError) as caught:
        parse_demand_scale(text)
    assert message in caught.value.message and "--demand-scale 2" in caught.value.fix


def test_a_selector_that_matches_nothing_names_what_exists():
    with pytest.raises(InputError) as caught:
        scale_forecast(_forecast(), parse_demand_scales(["region=eu-wst:2"]))
    assert "no forecast series has region 'eu-wst'" in caught.value.message
    assert caught.value.fix == "use one of: eu-west, us-east"


# --------------------------------------------------------------------------- through the CLI
def _flat_forecast(path):
    rows = []
    for origin in ("us-east", "us-west", "eu-west", "ap-northeast"):
        for model in ("llama-3.1-8b", "llama-3.1-70b"):
            for cls, per_hour in {"interactive": 7200.0, "standard": 3600.0, "batch": 1800.0}.items():
                for ts in pd.date_range("2026-11-02T16:00:00Z", periods=2, freq="h"):
                    rows.append({"region": origin, "model": model, "traffic_class": cls,
                                 "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "mean": per_hour, "q50": per_hour,
                                 "q90": 1.2 * per_hour, "q95": 1.3 * per_hour, "q99": 1.5 * per_hour,
                                 "model_used": "test"})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_place_takes_set_and_demand_scale_and_records_them(demo, tmp_path):
    scenario = tmp_path / "demo_2h.toml"
    scenario.write_text(demo.read_text().replace('horizon = "14d"', 'horizon = "2h"'))
    forecast = _flat_forecast(tmp_path / "forecast.csv")
    base, scaled = tmp_path / "base.csv", tmp_path / "scaled.csv"
    common = ["place", "--scenario", str(scenario), "--forecast", str(forecast), "--json"]
    assert runner.invoke(cli.app, [*common, "--out", str(base)]).exit_code == 0
    result = runner.invoke(cli.app, [*common, "--out", str(scaled), "--demand-scale", "2",
                                     "--set", 'models.llama-3.1-70b.skus=["H100"]'])
    assert result.exit_code == 0, result.output
    before, after = pd.read_csv(base), pd.read_csv(scaled)
    assert set(after.loc[after["model"] == "llama-3.1-70b", "sku"]) == {"H100"}
    assert after["usd"].sum() > 1.5 * before["usd"].sum()
    run = RunHistory().runs(limit=1, command="place")[0]
    assert run["figures"]["what_if"] == ['--set models.llama-3.1-70b.skus=["H100"]', "--demand-scale 2"]
    assert run["arguments"]["demand_scale"] == ["2"]


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--set", "classes.nope.weight=2", "classes has no entry named 'nope'"),
    ("--demand-scale", "region=nowhere:2", "no forecast series has region 'nowhere'"),
])
def test_a_bad_what_if_exits_3_and_writes_nothing(demo, tmp_path, option, value, message):
    forecast = _flat_forecast(tmp_path / "forecast.csv")
    result = runner.invoke(cli.app, ["place", "--scenario", str(demo), "--forecast", str(forecast),
                                     "--out", str(tmp_path / "p.csv"), option, value])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "p.csv").exists()


def test_the_report_header_and_json_name_every_change():
    from planner.report.model import ReportModel
    from planner.report.render import meta_line, report_payload

    model = ReportModel(month="2026-11", as_of="2026-11-01T00:00:00Z", scenario_name="demo", title="t", sections=[],
                        what_if=["--set classes.interactive.ttft_p99_ms=350", "--demand-scale 2"])
    assert meta_line(model).endswith(
        "scenario demo; what-if: --set classes.interactive.ttft_p99_ms=350, --demand-scale 2.")
    assert report_payload(model, "now")["what_if"] == model.what_if
    plain = ReportModel(month="2026-11", as_of="2026-11-01T00:00:00Z", scenario_name="demo", title="t", sections=[])
    assert "what-if" not in meta_line(plain)

"""Scenario files: the bundled ones load, every kind of mistake is reported with file and
field path, all mistakes at once, and the result is frozen."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner.errors import ExitCode, InputError
from planner.scenario import (
    SKU_NAMES,
    Scenario,
    ScenarioError,
    check_against_data,
    load_scenario,
    parse_scenario,
)
from planner.slo import ClassSlo

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "scenarios" / "demo.toml"
GLOBAL = REPO / "scenarios" / "global.toml"


@pytest.fixture(scope="module")
def demo_raw() -> dict:
    with open(DEMO, "rb") as handle:
        return tomllib.load(handle)


def errors_for(raw: dict, mutate) -> list[dict[str, str]]:
    data = copy.deepcopy(raw)
    mutate(data)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, source="bad.toml")
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    for error in caught.value.errors:
        assert set(error) == {"file", "field", "problem", "fix"}
        assert error["file"] == "bad.toml" and error["problem"] and error["fix"]
    return caught.value.errors


def fields(errors: list[dict[str, str]]) -> list[str]:
    return [error["field"] for error in errors]


# --------------------------------------------------------------------------- bundled files
def test_demo_loads_with_expected_shape():
    scenario = load_scenario(DEMO)
    assert scenario.name == "demo"
    assert scenario.serving_keys == ("aws:us-east-1", "gcp:us-central1", "gcp:europe-west4", "gcp:asia-northeast1")
    # The demo history's four origins, so that `planner plan` on the demo plans for all of its demand.
    assert scenario.origin_names == ("us-east", "us-west", "eu-west", "ap-northeast")
    assert scenario.class_names == ("interactive", "standard", "batch", "long-context")
    assert scenario.model_names == ("llama-3.1-8b", "llama-3.1-70b")
    assert {m.engine for m in scenario.models} == {"vllm"} and scenario.allowed_tps("llama-3.1-8b") == (1, 2, 4)
    assert scenario.allowed_tps("llama-3.1-70b") == (4, 8)
    assert scenario.policy.name == "drr-wspt"
    assert scenario.horizon_hours == 14 * 24
    # EU traffic stays in the EU, whatever the class.
    for klass in scenario.class_names:
        assert scenario.eligible_serving("eu-west", klass) == ("gcp:europe-west4",)
    # US interactive stays near; US batch may cross the Atlantic (nearest first).
    assert scenario.eligible_serving("us-east", "interactive") == ("aws:us-east-1", "gcp:us-central1")
    assert scenario.eligible_serving("us-east", "batch")[-1] == "gcp:europe-west4"
    # Japan's interactive traffic has only Tokyo within its latency budget; its batch may cross the Pacific.
    assert scenario.eligible_serving("ap-northeast", "interactive") == ("gcp:asia-northeast1",)
    assert "gcp:us-central1" in scenario.eligible_serving("ap-northeast", "batch")


def test_global_loads_and_meets_its_brief():
    scenario = load_scenario(GLOBAL)
    assert len(scenario.serving_keys) >= 8
    assert {key.split(":")[0] for key in scenario.serving_keys} == {"aws", "gcp", "nebius"}
    assert set(scenario.model_names) == {"llama-3.1-8b", "llama-3.1-70b", "qwen3-235b-a22b"}
    assert len({sku for model in scenario.model_names for sku in scenario.allowed_skus(model)}) >= 5
    assert set(scenario.origin_names) == {"us-east", "us-west", "eu-west", "ap-northeast"}
    assert scenario.quota_gpus("aws:us-east-1", "H100") == 512  # region override
    assert scenario.quota_gpus("aws:us-west-2", "B200") == 128  # capacity default
    assert scenario.quota_gpus("aws:us-west-2", "H100") is None  # catalog decides
    assert 140 <= scenario.rtt_ms("us-east", "aws:ap-northeast-1") <= 180
    assert 75 <= scenario.rtt_ms("eu-west", "aws:us-east-1") <= 90


@pytest.mark.parametrize("path", [DEMO, GLOBAL])
def test_summary_rows_cover_every_section(path):
    scenario = load_scenario(path)
    rows = scenario.summary_rows()
    assert all(set(row) == {"section", "name", "details"} for row in rows)
    sections = [row["section"] for row in rows]
    assert sections.count("serving") == len(scenario.serving_keys)
    assert sections.count("origin") == len(scenario.origin_names)
    assert sections.count("class") == len(scenario.class_names)
    assert sections.count("model") == len(scenario.model_names)
    assert {"scenario", "policy", "capacity"} <= set(sections)
    assert rows == scenario.summary_rows()  # deterministic


def test_defaults_apply_when_optional_tables_are_left_out(demo_raw):
    data = copy.deepcopy(demo_raw)
    del data["capacity"], data["policy"]["params"], data["policy"]["admission"]
    for klass in data["classes"]:
        del klass["priority_jump"], klass["drr_quantum_tokens"], klass["spot_tolerant"]
    scenario = parse_scenario(data)
    assert scenario.capacity.utilisation_cap == 0.85
    assert scenario.capacity.forecast_quantile == 0.95
    assert scenario.capacity.tiers == ("reserved", "on_demand", "spot")
    assert scenario.capacity.budget_usd is None
    assert scenario.capacity.min_replicas_per_pool == 2
    assert scenario.capacity.reserved_term == "365d" and scenario.capacity.reserved_term_hours == 8760
    assert scenario.policy.admission.kv_fraction == 0.85
    assert scenario.policy.admission.output_quantile_reserve == 0.95
    assert scenario.traffic_class("batch").spot_tolerant is False
    assert scenario.allowed_skus("llama-3.1-8b") == ("L40S", "A100-80GB", "H100")


def test_model_without_skus_allows_every_sku(demo_raw):
    data = copy.deepcopy(demo_raw)
    del data["models"][0]["skus"]
    assert parse_scenario(data).allowed_skus("llama-3.1-8b") == SKU_NAMES


def test_scenario_is_frozen():
    scenario = load_scenario(DEMO)
    with pytest.raises(ValidationError):
        scenario.name = "other"
    with pytest.raises(ValidationError):
        scenario.classes[0].share = 0.9
    with pytest.raises(AttributeError):
        scenario.classes.append(scenario.classes[0])  # lists are stored as tuples


# --------------------------------------------------------------------------- file-level errors
def test_toml_syntax_error_names_file_line_and_column(tmp_path):
    bad = tmp_path / "broken.toml"
    bad.write_text('name = "x"\nhorizon = "14d"\n[seeds]\nbase = \n')
    with pytest.raises(InputError) as caught:
        load_scenario(bad)
    assert not isinstance(caught.value, ScenarioError)
    assert caught.value.where == f"{bad}:4:8"
    assert "line 4, column 8" in str(caught.value)


def test_unterminated_string_at_end_of_file_is_located(tmp_path):
    bad = tmp_path / "cut.toml"
    bad.write_text('name = "x"\nhorizon = "14d')
    with pytest.raises(InputError, match="Unterminated string") as caught:
        load_scenario(bad)
    assert caught.value.where == f"{bad}:2:15"
    bad.write_text("name = \n")
    with pytest.raises(InputError) as caught:
        load_scenario(bad)
    assert caught.value.where == f"{bad}:1:8"


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_scenario(tmp_path / "nowhere.toml")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="UTF-8"):
        load_scenario(binary)


def test_error_message_lines_follow_the_contract(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(DEMO.read_text().replace('name = "drr-wspt"', 'name = "lifo"'))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(bad)
    error = caught.value.errors[0]
    line = f"{bad}: policy.name: {error['problem']}. To fix: {error['fix']}"
    assert line in str(caught.value)
    assert "'lifo'" in error["problem"] or '"lifo"' in error["problem"]
    for name in ("fcfs", "cmu", "wspt", "srpt", "priority-aging", "drr-fcfs", "drr-wspt"):
        assert name in error["fix"]


# --------------------------------------------------------------------------- each bad case
BAD_CASES = [
    ("missing field", lambda d: d["classes"][0].pop("share"), "classes[interactive].share", "missing"),
    ("missing table", lambda d: d.pop("seeds"), "seeds", "missing"),
    ("wrong type", lambda d: d["classes"][1].update(weight="2"), "classes[standard].weight", "expected a number"),
    ("bool for number", lambda d: d["classes"][1].update(weight=True), "classes[standard].weight", "boolean"),
    ("float for int", lambda d: d["seeds"].update(base=1.5), "seeds.base", "whole number"),
    ("share sum", lambda d: d["classes"][2].update(share=0.21), "classes[*].share", "sum to 1.05"),
    ("unknown policy", lambda d: d["policy"].update(name="lifo"), "policy.name", "unknown policy"),
    ("e2e <= ttft", lambda d: d["classes"][0].update(e2e_p99_ms=800), "classes[interactive].e2e_p99_ms", "greater"),
    ("no slo", lambda d: [d["classes"][0].pop(f) for f in ("ttft_p99_ms", "e2e_p99_ms")], "classes[interactive]",
     "sets no latency SLO"),
    ("tpot not positive", lambda d: d["classes"][1].update(tpot_p99_ms=0), "classes[standard].tpot_p99_ms", "> 0"),
    ("prompt cap not positive", lambda d: d["classes"][3].update(max_prompt_tokens=0),
     "classes[long-context].max_prompt_tokens", ">= 1"),
    ("model engine unknown", lambda d: d["models"][0].update(engine="tgi"),
     "models[llama-3.1-8b].engine", "unknown engine"),
    ("model TP not a power of two", lambda d: d["models"][0].update(tp=[3]),
     "models[llama-3.1-8b].tp[0]", "unknown tp 3"),
    (
        "override of an unknown class",
        lambda d: d["models"][1].update(slos={"premium": {"ttft_p99_ms": 500}}),
        "models[llama-3.1-70b].slos.premium",
        "no traffic class 'premium'",
    ),
    (
        "override with a bad value",
        lambda d: d["models"][1].update(slos={"interactive": {"tpot_p99_ms": -5}}),
        "models[llama-3.1-70b].slos.interactive.tpot_p99_ms",
        "> 0",
    ),
    (
        "override as text",
        lambda d: d["models"][1].update(slos={"interactive": {"ttft_p99_ms": "1500"}}),
        "models[llama-3.1-70b].slos.interactive.ttft_p99_ms",
        "expected a number",
    ),
    (
        "override of nothing",
        lambda d: d["models"][1].update(slos={"interactive": {}}),
        "models[llama-3.1-70b].slos.interactive",
        "overrides no SLO",
    ),
    (
        "override puts ttft past the class's e2e",
        lambda d: d["models"][1].update(slos={"interactive": {"ttft_p99_ms": 50000}}),
        "models[llama-3.1-70b].slos.interactive",
        "e2e_p99_ms (40000) must be greater than ttft_p99_ms (50000)",
    ),
    (
        "latency pair missing",
        lambda d: d["regions"]["latency_ms"]["eu-west"].pop("gcp:us-central1"),
        'regions.latency_ms.eu-west."gcp:us-central1"',
        "no RTT",
    ),
    (
        "latency row missing",
        lambda d: d["regions"]["latency_ms"].pop("us-east"),
        "regions.latency_ms.us-east",
        "no latency row",
    ),
    (
        "undeclared serving key in matrix",
        lambda d: d["regions"]["latency_ms"]["us-east"].update({"aws:us-west-2": 60}),
        'regions.latency_ms.us-east."aws:us-west-2"',
        "not a declared serving region",
    ),
    (
        "residency without serving region",
        lambda d: d["regions"]["origins"][2].update(residency=["ca"]),
        "regions.origins[eu-west].residency",
        "no serving region",
    ),
    ("duplicate class", lambda d: d["classes"][2].update(name="standard"), "classes[2].name", "declared twice"),
    (
        "duplicate serving key",
        lambda d: d["regions"]["serving"][2].update(key="aws:us-east-1", zone="us"),
        "regions.serving[2].key",
        "declared twice",
    ),
    ("extra key", lambda d: d["capacity"].update(utilization_cap=0.8), "capacity.utilization_cap", "unknown key"),
    ("extra top-level key", lambda d: d.update(region=[]), "region", "unknown key"),
    ("out of range", lambda d: d["capacity"].update(utilisation_cap=1.2), "capacity.utilisation_cap", "<= 1"),
    ("unknown sku", lambda d: d["models"][1].update(skus=["H100", "H1000"]), "models[llama-3.1-70b].skus[1]", "H1000"),
    ("unknown quota sku", lambda d: d["capacity"].update(quotas={"V100": 8}), "capacity.quotas.V100", "GPU SKU"),
    (
        "bad zone",
        lambda d: d["regions"]["serving"][0].update(zone="usa"),
        "regions.serving[aws:us-east-1].zone",
        "zone",
    ),
    (
        "bad cloud",
        lambda d: d["regions"]["serving"][0].update(key="azure:eastus"),
        "regions.serving[azure:eastus].key",
        "cloud",
    ),
    ("bad horizon", lambda d: d.update(horizon="two weeks"), "horizon", "not a horizon"),
    ("horizon past a year", lambda d: d.update(horizon="100000w"), "horizon", "one year"),
    ("bad quantile", lambda d: d["capacity"].update(forecast_quantile=0.8), "capacity.forecast_quantile", "0.8"),
    ("pool floor of zero", lambda d: d["capacity"].update(min_replicas_per_pool=0), "capacity.min_replicas_per_pool",
     ">= 1"),
    ("fractional pool floor", lambda d: d["capacity"].update(min_replicas_per_pool=1.5),
     "capacity.min_replicas_per_pool", "whole number"),
    ("bad reserved term", lambda d: d["capacity"].update(reserved_term="1 year"), "capacity.reserved_term",
     "not a commitment term"),
    ("zero reserved term", lambda d: d["capacity"].update(reserved_term="0d"), "capacity.reserved_term",
     "not a commitment term"),
    ("duplicate tier", lambda d: d["capacity"].update(tiers=["spot", "spot"]), "capacity.tiers[1]", "twice"),
    ("empty list", lambda d: d.update(models=[]), "models", "at least 1"),
    (
        "latency budget unreachable",
        lambda d: d["classes"][0].update(latency_budget_ms=5),
        "classes[interactive].latency_budget_ms",
        "within 5 ms",
    ),
]


@pytest.mark.parametrize(("label", "mutate", "field", "problem"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_each_mistake_names_file_and_field(demo_raw, label, mutate, field, problem):
    errors = errors_for(demo_raw, mutate)
    matching = [e for e in errors if e["field"] == field]
    assert matching, f"{label}: expected an error at {field}, got {fields(errors)}"
    assert any(problem in e["problem"] for e in matching), matching
    assert f"bad.toml: {field}: " in str(ScenarioError("bad.toml", errors))


@pytest.mark.parametrize("mutate", [
    lambda d: d["regions"]["origins"][2].update(residency=["xx"]),
    lambda d: d.update(classes=[{**d["classes"][0], "share": 1.0, "weight": "heavy"}]),
    lambda d: d["regions"].update(origins=[{**d["regions"]["origins"][0], "zone": "mars"}]),
], ids=["only entry of a zone list", "only class", "only origin"])
def test_one_bad_entry_is_reported_alone_not_as_an_empty_list(demo_raw, mutate):
    errors = errors_for(demo_raw, mutate)
    assert not [e for e in errors if "at least" in e["problem"]], errors
    assert len(errors) == 1, errors


# --------------------------------------------------------------------------- SLOs
def test_each_slo_is_optional_and_unset_ones_are_none(demo_raw):
    data = copy.deepcopy(demo_raw)
    del data["classes"][0]["ttft_p99_ms"], data["classes"][0]["e2e_p99_ms"]
    data["classes"][0]["tpot_p99_ms"] = 60
    del data["classes"][1]["e2e_p99_ms"]
    scenario = parse_scenario(data)
    assert scenario.slo("llama-3.1-8b", "interactive") == ClassSlo(tpot_p99_ms=60.0)
    assert list(scenario.slo("llama-3.1-8b", "interactive").targets()) == [("tpot", 60.0)]
    assert scenario.slo("llama-3.1-8b", "standard") == ClassSlo(ttft_p99_ms=3000.0)
    assert scenario.slo("llama-3.1-8b", "batch").metrics() == ("ttft", "e2e")


def test_e2e_need_not_exceed_ttft_when_only_one_is_set(demo_raw):
    data = copy.deepcopy(demo_raw)
    del data["classes"][0]["ttft_p99_ms"]
    data["models"][1].pop("slos")  # llama-3.1-70b's own interactive TTFT would be compared with
    data["classes"][0]["e2e_p99_ms"] = 100  # below the class's old TTFT target: nothing to compare with
    assert parse_scenario(data).slo("llama-3.1-8b", "interactive").e2e_p99_ms == 100.0


def test_a_model_overrides_some_slos_of_one_class_only(demo_raw):
    data = copy.deepcopy(demo_raw)
    data["models"][1]["slos"] = {"interactive": {"ttft_p99_ms": 1500, "tpot_p99_ms": 80}}
    scenario = parse_scenario(data)
    assert scenario.slo("llama-3.1-70b", "interactive") == ClassSlo(1500.0, 80.0, 40000.0)
    assert scenario.slo("llama-3.1-8b", "interactive") == ClassSlo(800.0, None, 40000.0)  # the class's own
    assert scenario.slo("llama-3.1-70b", "standard") == ClassSlo(3000.0, None, 60000.0)
    assert Scenario.model_validate(scenario.model_dump()) == scenario
    details = {r["name"]: r["details"] for r in scenario.summary_rows() if r["section"] == "model"}
    assert "slos[interactive]: ttft_p99_ms=1500, tpot_p99_ms=80, e2e_p99_ms=40000" in details["llama-3.1-70b"]
    assert "slos" not in details["llama-3.1-8b"]


def test_an_override_may_fix_the_order_it_would_break(demo_raw):
    data = copy.deepcopy(demo_raw)
    data["models"][1]["slos"] = {"interactive": {"ttft_p99_ms": 50000, "e2e_p99_ms": 90000}}
    assert parse_scenario(data).slo("llama-3.1-70b", "interactive") == ClassSlo(50000.0, None, 90000.0)


def test_an_override_of_an_unknown_class_lists_the_classes(demo_raw):
    errors = errors_for(demo_raw, lambda d: d["models"][0].update(slos={"chat": {"ttft_p99_ms": 500}}))
    assert fields(errors) == ["models[llama-3.1-8b].slos.chat"]
    assert "interactive, standard, batch" in errors[0]["fix"]


def test_the_summary_lists_only_the_slos_a_class_sets(demo_raw):
    data = copy.deepcopy(demo_raw)
    del data["classes"][0]["e2e_p99_ms"]
    data["classes"][0]["tpot_p99_ms"] = 50
    rows = {r["name"]: r["details"] for r in parse_scenario(data).summary_rows() if r["section"] == "class"}
    assert "ttft_p99_ms=800; tpot_p99_ms=50; max_queue_wait_ms" in rows["interactive"]
    assert "e2e_p99_ms" not in rows["interactive"]


def test_the_longest_horizon_is_a_year(demo_raw):
    assert parse_scenario({**demo_raw, "horizon": "366d"}).horizon_hours == 8784
    errors = errors_for(demo_raw, lambda d: d.update(horizon="8785h"))
    assert fields(errors) == ["horizon"] and "8,785 hours" in errors[0]["problem"]


def test_every_error_is_reported_at_once(demo_raw):
    def break_many(data: dict) -> None:
        data.pop("horizon")
        data["policy"]["name"] = "lifo"
        data["classes"][0]["weight"] = -1
        data["classes"][1]["colour"] = "blue"
        data["regions"]["latency_ms"]["eu-west"].pop("aws:us-east-1")
        data["regions"]["latency_ms"]["us-east"].pop("gcp:us-central1")
        data["capacity"]["redundancy"] = "two"

    errors = errors_for(demo_raw, break_many)
    assert set(fields(errors)) == {
        "horizon",
        "policy.name",
        "classes[interactive].weight",
        "classes[standard].colour",
        'regions.latency_ms.eu-west."aws:us-east-1"',
        'regions.latency_ms.us-east."gcp:us-central1"',
        "capacity.redundancy",
    }
    assert "7 problems" in str(ScenarioError("bad.toml", errors))


def test_misspelt_key_gets_a_suggestion(demo_raw):
    errors = errors_for(demo_raw, lambda d: d["capacity"].update(utilization_cap=0.8))
    assert "did you mean 'utilisation_cap'" in errors[0]["fix"]


# --------------------------------------------------------------------------- property
share_vectors = st.lists(st.floats(min_value=0.01, max_value=100.0), min_size=1, max_size=8)


def _with_classes(raw: dict, shares: list[float]) -> dict:
    data = copy.deepcopy(raw)
    template = data["classes"][2]  # batch: its 250 ms budget reaches a region from every origin
    data["classes"] = [dict(template, name=f"class-{i}", share=share) for i, share in enumerate(shares)]
    for model in data["models"]:
        model.pop("slos", None)  # they override classes this scenario no longer has
    return data


@settings(max_examples=60, deadline=None)
@given(weights=share_vectors, offset=st.floats(min_value=1.5e-3, max_value=0.5), sign=st.sampled_from([-1, 1]))
def test_share_vectors_summing_to_one_validate_and_others_fail(demo_raw, weights, offset, sign):
    total = math.fsum(weights)
    shares = [w / total for w in weights]
    scenario = parse_scenario(_with_classes(demo_raw, shares))
    assert math.isclose(math.fsum(c.share for c in scenario.classes), 1.0, abs_tol=1e-9)

    # Move the largest share by more than 1e-3 (staying inside [0, 1]): the sum is off.
    index = max(range(len(shares)), key=shares.__getitem__)
    moved = shares[index] + sign * offset
    if not 0.0 <= moved <= 1.0:
        moved = shares[index] - sign * offset
    shares[index] = moved
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(_with_classes(demo_raw, shares))
    assert fields(caught.value.errors) == ["classes[*].share"]


# --------------------------------------------------------------------------- data cross-check
def _offers(rows: list[tuple[str, str, str]], **extra) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["region_key", "sku", "tier"])
    for column, values in extra.items():
        frame[column] = values
    return frame


def _profiles(rows: list[tuple[str, str]], tp: int = 1, engine: str = "vllm") -> pd.DataFrame:
    return pd.DataFrame([(m, s, tp, engine) for m, s in rows], columns=["model", "sku", "tp_degree", "engine"])


def test_check_against_data_passes_when_everything_is_there():
    scenario = load_scenario(DEMO)
    offers = _offers(
        [
            ("aws:us-east-1", "H100", "on_demand"),
            ("gcp:us-central1", "L40S", "spot"),
            ("gcp:europe-west4", "A100-80GB", "reserved"),
            ("gcp:asia-northeast1", "H100", "on_demand"),
        ],
        geo=["us", "us", "eu", "apac"],
    )
    profiles = pd.concat([_profiles([("llama-3.1-8b", "H100"), ("qwen3-235b-a22b", "H200")]),
                          _profiles([("llama-3.1-70b", "A100-80GB")], tp=4)])
    assert check_against_data(scenario, offers, profiles) == []
    assert check_against_data(scenario, None, None) == []


def test_check_against_data_reports_each_gap():
    scenario = load_scenario(DEMO)
    offers = _offers(
        [
            ("aws:us-east-1", "H100", "on_demand"),
            ("gcp:us-central1", "B200", "on_demand"),  # no model may use B200
            ("gcp:europe-west4", "H100", "on_demand"),
            ("gcp:asia-northeast1", "H100", "on_demand"),
            ("aws:us-west-2", "H100", "on_demand"),  # not in the scenario: ignored
        ],
        geo=["us", "us", "us", "apac", "us"],  # europe-west4 misfiled in the catalog
        available=[True, True, True, True, False],
    )
    profiles = _profiles([("llama-3.1-8b", "L40S")])  # L40S is offered nowhere here; llama-3.1-70b has no profile
    problems = check_against_data(scenario, offers, profiles)
    text = "\n".join(problems)
    assert "gcp:europe-west4 is declared in zone 'eu'" in text
    assert "gcp:us-central1 offers none of the SKUs" in text
    assert "model llama-3.1-70b has no profile" in text
    assert "model llama-3.1-8b cannot be placed" in text
    assert len(problems) == 4


def test_check_against_data_flags_missing_regions_and_disabled_tiers(demo_raw):
    data = copy.deepcopy(demo_raw)
    data["capacity"]["tiers"] = ["reserved", "on_demand"]
    scenario = parse_scenario(data)
    offers = _offers(
        [("aws:us-east-1", "H100", "spot"), ("gcp:us-central1", "H100", "on_demand")],
        available=["true", "False"],  # as text, the way a CSV may carry it
    )
    problems = check_against_data(scenario, offers, None)
    assert problems[0] == (
        "serving region aws:us-east-1 has no available offers on the enabled tiers (reserved, on_demand)"
    )
    assert "gcp:us-central1 has no available offers" in problems[1]
    assert problems[2] == "serving region gcp:europe-west4 has no offers in the catalog"


def test_check_against_data_needs_a_profile_under_the_model_s_engine_and_tp(demo_raw):
    data = copy.deepcopy(demo_raw)
    data["models"][0].update(engine="sglang", tp=[2])
    scenario = parse_scenario(data)
    offers = _offers([("aws:us-east-1", "H100", "on_demand"), ("gcp:us-central1", "H100", "on_demand"),
                      ("gcp:europe-west4", "H100", "on_demand"), ("gcp:asia-northeast1", "H100", "on_demand")],
                     geo=["us", "us", "eu", "apac"])
    profiles = pd.concat([_profiles([("llama-3.1-8b", "H100"), ("llama-3.1-70b", "H100")], tp=4),
                          _profiles([("llama-3.1-8b", "H100")], tp=2, engine="vllm")])
    problems = check_against_data(scenario, offers, profiles)
    assert len(problems) == 1 and "llama-3.1-8b has no profile under engine sglang" in problems[0]
    assert "H100 TP2 (vllm)" in problems[0]
    ok = pd.concat([profiles, _profiles([("llama-3.1-8b", "H100")], tp=2, engine="sglang")])
    assert check_against_data(scenario, offers, ok) == []


def test_check_against_data_rejects_tables_without_the_columns():
    scenario = load_scenario(DEMO)
    with pytest.raises(InputError, match="region_key"):
        check_against_data(scenario, pd.DataFrame({"region": ["aws:us-east-1"]}), None)
    with pytest.raises(InputError, match="model"):
        check_against_data(scenario, None, pd.DataFrame({"sku": ["H100"]}))


def test_readme_minimal_example_is_valid(tmp_path):
    readme = (REPO / "scenarios" / "README.md").read_text()
    example = readme.split("## Minimal example", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    path = tmp_path / "tiny.toml"
    path.write_text(example)
    scenario = load_scenario(path)
    assert scenario.name == "tiny" and scenario.horizon_hours == 168
    assert scenario.capacity.redundancy == 1 and scenario.policy.params.prediction_noise_sigma == 0.0


def test_scenario_models_are_plain_values():
    scenario = load_scenario(DEMO)
    again = Scenario.model_validate(scenario.model_dump())
    assert again == scenario


def test_validation_looks_each_class_up_a_bounded_number_of_times(demo_raw, monkeypatch):
    """Validation work grows with the number of classes, not its square: a 10 MB scenario of tens of thousands of
    classes once ran past five minutes, each (origin, class) pair scanning every class by name."""
    import planner.scenario.model as scenario_model

    scanned = []
    real_find = scenario_model._find
    monkeypatch.setattr(scenario_model, "_find", lambda items, *args: scanned.append(len(items)) or real_find(
        items, *args))
    data = copy.deepcopy(demo_raw)
    base = {k: v for k, v in data["classes"][1].items() if k not in ("reuse",)}
    data["classes"] = [{**base, "name": f"c{i}", "share": 1 / 500} for i in range(500)]
    for model in data["models"]:
        for key in ("mix", "classes", "slos", "workloads"):
            model.pop(key, None)
    scenario = parse_scenario(data, source="many.toml")
    assert len(scenario.classes) == 500
    assert sum(scanned) <= 20 * 500, f"{len(scanned)} lookups scanning {sum(scanned)} entries"

"""`calibrate`: the capacity table and its contract, one row set per (model, SKU, TP) unit, the cache,
engines, failures and bad inputs.

Most tests calibrate llama-3.1-8b on H100 under the standard class alone (the demo's
long-context class, ~14k-token prompts, makes runs slow and is left at share 0), at the
profile's default engine setting (``search_settings=False``); the engine-setting search
itself is tested in ``test_calibrate_settings.py``.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from scenario_fixtures import with_tps

from planner.calibrate import CALIBRATION_VERSION, CalibrationResult
from planner.calibrate import cache as calibrate_cache
from planner.calibrate import inputs as calibrate_inputs
from planner.calibrate import run as calibrate_run
from planner.calibrate.cache import cache_key, key_material
from planner.calibrate.inputs import Settings, build_tasks, class_shares, select_units, setting_grid
from planner.calibrate.table import TABLE_COLUMNS
from planner.calibrate.unit import CEILING_MARGIN
from planner.catalog import load_catalog
from planner.errors import InputError
from planner.placement.capacity import validate_capacity
from planner.placement.place import place_plan
from planner.profiles import load_profiles
from planner.scenario import Scenario, load_scenario, parse_scenario
from planner.settings import default_cache_dir
from planner.storage import read_table
from planner.workflows.calibrate import calibrate_with_cache as calibrate
from planner.workflows.calibration_cache import entry_path
from planner.workflows.files import write_calibration

REPO_ROOT = Path(__file__).resolve().parents[1]
FAST = {"duration_s": 300.0, "replications": 3, "engine": "local"}
STANDARD_ONLY = {"standard": 1.0}
ON_H100 = {"models": ["llama-3.1-8b"], "skus": ["H100"], "class_mix": STANDARD_ONLY}
TWO_UNITS = {**ON_H100, "search_settings": False}
"""With the ``small`` scenario: llama-3.1-8b on 1 x H100 and 2 x H100, at the profile's defaults."""
SETTINGS = Settings(duration_s=300.0, warmup_fraction=0.1, replications=3, seed=1, rel_tol=0.02, confidence=0.95,
                    pool_replicas=1, policy="drr-wspt", prediction_sigma=0.5,
                    policy_params=(("aging_rate", 0.1), ("trail_c", 0.5)),
                    kv_fraction=0.85, output_quantile_reserve=0.95, search_settings=False)


def with_class_slos(scenario: Scenario, name: str, **slos: float | None) -> Scenario:
    """The scenario with some SLO fields of class ``name`` replaced (None: not set)."""
    return scenario.model_copy(update={"classes": tuple(
        k.model_copy(update=slos) if k.name == name else k for k in scenario.classes)})


def never(*_args, **_kwargs):
    raise AssertionError("a cache hit must not simulate")


@pytest.fixture(scope="module")
def demo() -> Scenario:
    return load_scenario(REPO_ROOT / "scenarios/demo.toml")


@pytest.fixture(scope="module")
def small(demo) -> Scenario:
    """The demo with llama-3.1-8b on TP 1 and 2 only: two units on H100."""
    return with_tps(demo, (1, 2))


@pytest.fixture(scope="module")
def profiles() -> pd.DataFrame:
    return load_profiles()


@pytest.fixture(scope="module")
def searched(demo, profiles, tmp_path_factory) -> CalibrationResult:
    """Every TP of llama-3.1-8b on H100, each searched over the engine settings (pruned)."""
    return calibrate(demo, profiles, cache_dir=tmp_path_factory.mktemp("cache"), **ON_H100, **FAST)


@pytest.fixture(scope="module")
def two_units_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("two-units-cache")


@pytest.fixture(scope="module")
def two_units(small, profiles, two_units_cache) -> CalibrationResult:
    """TWO_UNITS calibrated from an empty cache, which it fills (``two_units_cache``)."""
    return calibrate(small, profiles, cache_dir=two_units_cache, **TWO_UNITS, **FAST)


@pytest.fixture
def warm_cache(two_units, two_units_cache, tmp_path) -> Path:
    """A private copy of the cache ``two_units`` wrote."""
    return Path(shutil.copytree(two_units_cache, tmp_path / "cache"))


def unit_of(result: CalibrationResult, tp: int) -> dict:
    (unit,) = [u for u in result.meta["units"] if u["tp_degree"] == tp]
    return unit


# ----------------------------------------------------------------------------- the table
def test_table_passes_the_capacity_contract_and_fills_a_replica_exactly(searched, demo):
    table = searched.table
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert len(table) == 3 * len(demo.class_names)  # 3 TP degrees; every class gets its row, share 0 or not
    checked = validate_capacity(table)
    assert (checked["max_rps_per_replica"] > 0).all()
    assert set(table["policy"]) == {demo.policy.name}
    assert table["source"].str.startswith("calibrated: bisection").all()
    for (_, _, tp), rows in table.groupby(["model", "sku", "tp_degree"]):
        lam = rows["mix_rps_per_replica"].iloc[0]
        # Mélange row: one replica carrying the calibrated mix at λ* is exactly full
        load = (rows["class_share"] * lam / rows["max_rps_per_replica"]).sum()
        assert load == pytest.approx(1.0, rel=1e-4)
        # classes keep their analytic relative cost
        ratio = rows["max_rps_per_replica"] / rows["class_ceiling_rps_per_replica"]
        assert ratio.max() == pytest.approx(ratio.min(), rel=1e-4)
        assert (rows["mix_rps_per_replica"] <= rows["ceiling_rps_per_replica"]).all()
        assert rows["utilisation_at_capacity"].iloc[0] == pytest.approx(lam / rows["ceiling_rps_per_replica"].iloc[0],
                                                                         rel=1e-5)
        assert rows["mix_rps_per_gpu"].tolist() == pytest.approx([lam / tp] * len(rows), rel=1e-5)
        assert set(rows["binding_class"]) == {"standard"} and set(rows["binding_metric"]) <= {"ttft", "e2e"}
    assert (table["simulations"] > 0).all() and not table["cached"].any()
    assert searched.n_simulated == 3 and searched.n_cached == 0 and searched.failures == []


def test_every_tp_of_an_allowed_sku_is_a_unit_with_the_setting_it_chose(searched, demo, profiles, tmp_path):
    offered = profiles[(profiles["model"] == "llama-3.1-8b") & (profiles["sku"] == "H100")
                       & (profiles["engine"] == demo.model("llama-3.1-8b").engine)]
    tps = sorted(int(t) for t in offered["tp_degree"] if t in demo.allowed_tps("llama-3.1-8b"))
    assert tps == [1, 2, 4]  # every degree that fits an H100, within the demo's tp = [1, 2, 4]
    table_path, json_path = write_calibration(searched, tmp_path / "capacity.csv")
    table, meta = read_table(table_path), json.loads(json_path.read_text())["meta"]
    units = meta["units"]
    assert [u["tp_degree"] for u in units] == tps  # one unit per TP the profiles have, none left out
    assert sorted(set(table["tp_degree"])) == tps
    # every TP of a (model, SKU) is seeded alike: all compared on the same requests
    assert list(meta["seeds"]["pairs"]) == ["llama-3.1-8b/H100"]
    for unit in units:
        rows = table[table["tp_degree"] == unit["tp_degree"]]
        setting = {"max_num_seqs": unit["max_num_seqs"], "max_num_batched_tokens": unit["max_num_batched_tokens"]}
        assert set(rows["engine"]) == {unit["engine"]} == {"vllm"}
        assert set(rows["max_num_seqs"]) == {setting["max_num_seqs"]}
        assert set(rows["max_num_batched_tokens"]) == {setting["max_num_batched_tokens"]}
        # the settings tried are the grid, profile defaults first, once each
        profile = offered[offered["tp_degree"] == unit["tp_degree"]].iloc[0]
        tried = unit["settings_tried"]
        assert [(s["max_num_seqs"], s["max_num_batched_tokens"], s["long_prefill_token_threshold"])
                for s in tried] == setting_grid(profile, True)
        # the chosen setting is the tried one with the highest calibrated rate, and its rate is the unit's
        best = max(tried, key=lambda s: s["rate_rps_per_replica"])
        assert {k: best[k] for k in setting} == setting and best["status"] == "calibrated"
        assert best["rate_rps_per_replica"] == unit["mix_rps_per_replica"]
        assert best["ceiling_rps_per_replica"] == unit["ceiling_rps_per_replica"]
        assert rows["mix_rps_per_replica"].iloc[0] == pytest.approx(unit["mix_rps_per_replica"], abs=1e-6)
        assert unit["simulations"] == sum(s["simulations"] for s in tried) == rows["simulations"].iloc[0]


def test_written_table_reads_back_as_planner_place_reads_it(searched, demo, profiles, tmp_path):
    for name in ("capacity.csv", "capacity.parquet"):
        paths = write_calibration(searched, tmp_path / name)
        assert paths == [tmp_path / name, tmp_path / name.replace(Path(name).suffix, ".json")]
        back = validate_capacity(read_table(paths[0]), where=paths[0])
        pd.testing.assert_series_equal(back["max_rps_per_replica"], searched.table["max_rps_per_replica"],
                                       check_names=False)
        for column in ("tp_degree", "max_num_seqs", "max_num_batched_tokens"):
            assert back[column].tolist() == searched.table[column].tolist()
        payload = json.loads(paths[1].read_text())  # strict JSON: no NaN or Infinity
        assert payload["meta"]["confidence"] == 0.95 and len(payload["rows"]) == len(searched.table)
        assert payload["meta"]["units"][0]["trace"] and payload["meta"]["units"][0]["settings_tried"]
    # the plan uses the calibrated coefficients
    table = validate_capacity(read_table(tmp_path / "capacity.csv"))
    rows = []
    for origin in demo.origin_names:
        for cls, per_hour in {"interactive": 3600.0, "standard": 7200.0, "batch": 1800.0,
                              "long-context": 360.0}.items():
            for ts in pd.date_range("2026-11-02T16:00:00Z", periods=2, freq="h"):
                rows.append({"region": origin, "model": "llama-3.1-8b", "traffic_class": cls,
                             "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "mean": per_hour, "q50": per_hour,
                             "q90": per_hour, "q95": per_hour, "q99": per_hour, "model_used": "test"})
    # the forecast covers the two hours and the one model the plan is for
    two_hours = demo.model_copy(update={"horizon": "2h", "models": (demo.model("llama-3.1-8b"),)})
    plan = place_plan(two_hours, pd.DataFrame(rows), load_catalog(), profiles, capacity=table, time_limit_s=30,
                      baselines=False, periods="hourly")
    assert plan.meta["capacity_source"] == "capacity table"
    assert plan.plan["replicas"].sum() > 0
    used = plan.plan[plan.plan["replicas"] > 0]
    assert set(used["sku"]) == {"H100"}  # the only SKU with a row
    chosen = table.drop_duplicates(["sku", "tp_degree"]).set_index(["sku", "tp_degree"])
    for row in used.to_dict("records"):  # each deployment runs the engine setting its unit was calibrated at
        unit = chosen.loc[(row["sku"], row["tp_degree"])]
        assert (row["max_num_seqs"], row["max_num_batched_tokens"]) == (unit["max_num_seqs"],
                                                                         unit["max_num_batched_tokens"])


def test_same_inputs_give_identical_outputs(two_units, small, profiles, tmp_path):
    again = calibrate(small, profiles, use_cache=False, **TWO_UNITS, **FAST)
    pd.testing.assert_frame_equal(again.table, two_units.table)
    assert again.meta["units"] == two_units.meta["units"]
    first, _ = write_calibration(two_units, tmp_path / "first.csv")
    second, _ = write_calibration(again, tmp_path / "second.csv")
    assert first.read_bytes() == second.read_bytes()
    assert (tmp_path / "first.json").read_bytes() == (tmp_path / "second.json").read_bytes()


def test_an_allowed_sku_without_a_profile_at_an_allowed_tp_is_skipped_with_a_reason(demo, profiles):
    # llama-3.1-70b is profiled at TP 2 on H200 only, never on A100-80GB or H100
    only_tp2 = with_tps(demo, (2,), model="llama-3.1-70b")
    units, skipped = select_units(only_tp2, profiles, ["llama-3.1-70b"], None)
    assert units[["sku", "tp_degree", "engine"]].values.tolist() == [["H200", 2, "vllm"]]
    assert [(s["model"], s["sku"]) for s in skipped] == [("llama-3.1-70b", "A100-80GB"), ("llama-3.1-70b", "H100")]
    assert all("not profiled under vllm at an allowed TP degree" in s["reason"] for s in skipped)


@pytest.mark.slow
def test_demo_scenario_calibrates_every_unit_or_says_why(demo, profiles, tmp_path):
    # long-context's long prompts would make this slow: it gets share 0 (its row, but no SLO checked)
    mix = {"interactive": 0.4, "standard": 0.3, "batch": 0.3}
    result = calibrate(demo, profiles, class_mix=mix, search_settings=False, rel_tol=0.2, cache_dir=tmp_path,
                       **{**FAST, "duration_s": 60.0, "replications": 2})
    expected = {(str(r["model"]), str(r["sku"]), int(r["tp_degree"]))
                for r in select_units(demo, profiles, None, None)[0].to_dict("records")}
    assert {(m, s) for m, s, _ in expected} == {(m, s) for m in demo.model_names for s in demo.allowed_skus(m)}
    units = {(u["model"], u["sku"], u["tp_degree"]) for u in result.meta["units"]}
    assert units == expected and result.meta["skipped_pairs"] == []
    calibrated = {(m, s, int(t)) for m, s, t in
                  result.table[["model", "sku", "tp_degree"]].drop_duplicates().itertuples(index=False)}
    failed = {(f["model"], f["sku"], f["tp_degree"]) for f in result.failures}
    assert calibrated | failed == units and not calibrated & failed
    assert ("llama-3.1-8b", "H100", 1) in calibrated
    for f in result.failures:
        assert ("misses its" in f["reason"] and "SLO" in f["reason"]) or "does not fit in the KV budget" in f["reason"]
    for u in result.meta["units"]:
        if u["status"] != "infeasible":
            assert 0 < u["mix_rps_per_replica"]
            assert any(p["ok"] and p["rate_rps_per_replica"] == u["mix_rps_per_replica"] for p in u["trace"])


# ----------------------------------------------------------------------------- the cache
def test_cache_hit_does_not_simulate_and_gives_the_same_table(two_units, two_units_cache, small, profiles,
                                                             warm_cache, monkeypatch):
    assert two_units.n_simulated == 2 and len(list(two_units_cache.glob("*.json"))) == 2
    monkeypatch.setattr(calibrate_run, "calibrate_unit", never)
    seen = []
    warm = calibrate(small, profiles, cache_dir=warm_cache, progress=lambda d, t: seen.append((d, t)), **TWO_UNITS,
                     **FAST)
    assert warm.n_simulated == 0 and warm.n_cached == 2 and warm.table["cached"].all()
    pd.testing.assert_frame_equal(warm.table.drop(columns="cached"), two_units.table.drop(columns="cached"))
    assert [u["trace"] for u in warm.meta["units"]] == [u["trace"] for u in two_units.meta["units"]]
    assert [u["settings_tried"] for u in warm.meta["units"]] == [u["settings_tried"] for u in two_units.meta["units"]]
    assert seen == [(2, 2)]  # the units answered from the cache, in one report


def test_a_changed_input_misses_the_cache_and_an_unrelated_one_hits(small, profiles, warm_cache):
    looser = with_class_slos(small, "standard", e2e_p99_ms=small.traffic_class("standard").e2e_p99_ms * 2)
    assert calibrate(looser, profiles, cache_dir=warm_cache, **TWO_UNITS, **FAST).n_simulated == 2
    renamed = profiles.assign(source_detail="edited notes")  # not an input of the answer
    assert calibrate(small, renamed, cache_dir=warm_cache, **TWO_UNITS, **FAST).n_cached == 2
    other_policy = calibrate(small, profiles, policy="fcfs", cache_dir=warm_cache, **TWO_UNITS, **FAST)
    assert other_policy.n_simulated == 2 and set(other_policy.table["policy"]) == {"fcfs"}


def keys_of(scenario: Scenario, units: pd.DataFrame, settings: Settings = SETTINGS) -> list[str]:
    return [cache_key(t) for t in build_tasks(scenario, units, class_shares(scenario, None), settings, None)]


def test_the_cache_key_holds_each_model_s_own_slos(demo, profiles):
    """An override changes the key of that model's units only; a metric added or removed changes it too."""
    raw = demo.model_dump()
    raw["models"][0]["slos"] = {"standard": {"tpot_p99_ms": 60.0}}
    overridden = parse_scenario(raw)
    units, _ = select_units(demo, profiles, ["llama-3.1-8b", "llama-3.1-70b"], ["H100"])
    small_model = (units["model"] == "llama-3.1-8b").to_numpy()
    assert small_model.any() and not small_model.all()
    base, changed = keys_of(demo, units), keys_of(overridden, units)
    assert len(set(base)) == len(base)  # one key per unit
    for same_model, before, after in zip(small_model, base, changed, strict=True):
        assert (before != after) == same_model
    task = build_tasks(overridden, units[small_model][:1], class_shares(overridden, None), SETTINGS, None)[0]
    slos = {c["name"]: c["slo"] for c in key_material(task)["classes"]}
    assert slos["standard"] == {"ttft": 3000.0, "tpot": 60.0, "e2e": 60000.0}
    assert slos["interactive"] == {"ttft": 800.0, "e2e": 40000.0}
    assert keys_of(with_class_slos(demo, "batch", e2e_p99_ms=None), units) != base


def test_the_cache_key_changes_with_the_tp_degree_the_engine_and_the_setting_grid(demo, profiles, monkeypatch):
    units, _ = select_units(demo, profiles, ["llama-3.1-8b"], ["H100"])
    row = units[units["tp_degree"] == 1]
    (base,) = keys_of(demo, row)
    # the TP degree and the engine enter the key themselves, not only through the step model they select
    assert keys_of(demo, row.assign(tp_degree=2)) != [base]
    assert keys_of(demo, row.assign(engine="sglang")) != [base]
    # and every other profile row of the SKU (another TP, another engine's measured steps) has its own key
    others = profiles[(profiles["model"] == "llama-3.1-8b") & (profiles["sku"] == "H100")]
    assert len(set(keys_of(demo, others))) == len(others) and base in keys_of(demo, others)
    # the settings tried: only the defaults, the grid, another grid, or the default setting itself
    searched = replace(SETTINGS, search_settings=True)
    (grid,) = keys_of(demo, row, searched)
    assert grid != base
    monkeypatch.setattr(calibrate_inputs, "MAX_NUM_SEQS", (*calibrate_inputs.MAX_NUM_SEQS, 1024))
    assert keys_of(demo, row, searched) != [grid]
    monkeypatch.setattr(calibrate_inputs, "MAX_NUM_BATCHED_TOKENS", (4096,))
    assert len({*keys_of(demo, row, searched), grid, base}) == 3
    assert keys_of(demo, row.assign(max_num_seqs=128)) != [base]
    # what does not decide the answer keeps the key
    assert keys_of(demo, row.assign(source_detail="another note")) == [base]
    # the margin that prunes settings by their ceiling decides which ones are searched: it is keyed too
    (task,) = build_tasks(demo, row, class_shares(demo, None), searched, None)
    assert key_material(task)["search"]["ceiling_margin"] == CEILING_MARGIN
    before = cache_key(task)
    monkeypatch.setattr(calibrate_cache, "CEILING_MARGIN", 2 * CEILING_MARGIN)
    assert cache_key(task) != before


def test_a_tpot_slo_is_checked_and_binds_when_it_is_the_tightest(two_units, small, profiles, tmp_path):
    tight = calibrate(with_class_slos(small, "standard", tpot_p99_ms=60.0), profiles, cache_dir=tmp_path,
                      **TWO_UNITS, **FAST)
    assert set(tight.table["binding_metric"]) == {"tpot"} and tight.failures == []
    for unit, before in zip(tight.meta["units"], two_units.meta["units"], strict=True):
        assert unit["tp_degree"] == before["tp_degree"]
        assert unit["classes"]["standard"]["tpot_p99_slo_ms"] == 60.0
        assert unit["mix_rps_per_replica"] < before["mix_rps_per_replica"]
        assert "standard.tpot" in unit["trace"][0]["p99_upper_ms"]
    assert "tpot" in tight.meta["predicate"]
    # a class with only a TPOT SLO: TTFT and e2e are measured but never checked
    only = calibrate(with_class_slos(small, "standard", ttft_p99_ms=None, tpot_p99_ms=60.0, e2e_p99_ms=None),
                     profiles, cache_dir=tmp_path, **TWO_UNITS, **FAST)
    assert set(only.table["binding_metric"]) == {"tpot"}
    for unit in only.meta["units"]:
        assert {"ttft_p99_slo_ms": None, "e2e_p99_slo_ms": None}.items() <= unit["classes"]["standard"].items()
        assert all(set(probe["p99_upper_ms"]) == {"standard.tpot"} for probe in unit["trace"])


def test_an_unreachable_tpot_slo_is_named_in_the_failure(small, profiles, tmp_path):
    strict = with_class_slos(small, "standard", tpot_p99_ms=1.0)
    result = calibrate(strict, profiles, cache_dir=tmp_path, **TWO_UNITS, **FAST)
    assert result.table.empty and len(result.failures) == 2
    assert all("class 'standard' misses its TPOT p99 SLO of 1 ms" in f["reason"] for f in result.failures)


@pytest.mark.parametrize("damage", ["not json {", '{"calibration_version": V, "result": {"key": "x"}}', "",
                                    '{"calibration_version": V, "result": []}', '{"calibration_version": V}',
                                    "[1, 2]"])
def test_corrupt_cache_entry_is_recomputed(two_units, small, profiles, warm_cache, damage):
    key = two_units.meta["units"][0]["cache_key"]
    entry_path(warm_cache, key).write_text(damage.replace("V", str(CALIBRATION_VERSION)))
    again = calibrate(small, profiles, cache_dir=warm_cache, **TWO_UNITS, **FAST)
    assert again.n_simulated == 1 and again.n_cached == 1
    pd.testing.assert_frame_equal(again.table.drop(columns="cached"), two_units.table.drop(columns="cached"))
    assert json.loads(entry_path(warm_cache, key).read_text())["key"] == key


def older_version(payload: dict) -> None:
    payload["calibration_version"] -= 1


def without_settings_tried(payload: dict) -> None:
    del payload["result"]["settings"]


def tp_as_text(payload: dict) -> None:
    payload["result"]["tp_degree"] = str(payload["result"]["tp_degree"])


@pytest.mark.parametrize("edit", [older_version, without_settings_tried, tp_as_text])
def test_a_cache_entry_of_another_version_or_layout_is_recomputed(two_units, small, profiles, warm_cache, edit):
    key = two_units.meta["units"][1]["cache_key"]
    payload = json.loads(entry_path(warm_cache, key).read_text())
    edit(payload)
    entry_path(warm_cache, key).write_text(json.dumps(payload))
    again = calibrate(small, profiles, cache_dir=warm_cache, **TWO_UNITS, **FAST)
    assert again.n_simulated == 1 and again.table[again.table["tp_degree"] == 2]["cached"].eq(False).all()


def test_unwritable_cache_is_reported_not_fatal(small, profiles, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    result = calibrate(small, profiles, cache_dir=blocker / "cache", **TWO_UNITS, **FAST)
    assert len(result.table) == 2 * len(small.class_names) and len(result.meta["cache"]["notes"]) == 2
    assert all("not written" in note for note in result.meta["cache"]["notes"])


def test_an_ingest_histogram_replaces_the_default_lengths_and_the_cache_key(two_units, small, profiles, warm_cache):
    rows = []
    for measure, bins in (("prompt_tokens", [(256, 512, 40), (512, 1024, 50), (1024, 2048, 10)]),
                          ("output_tokens", [(8, 16, 30), (16, 32, 50), (32, 64, 20)])):
        for lo, hi, count in bins:
            rows.append({"model": "llama-3.1-8b", "traffic_class": "standard", "measure": measure, "bin_lo_tokens": lo,
                         "bin_hi_tokens": hi, "count": count})
    measured = calibrate(small, profiles, histogram=pd.DataFrame(rows), cache_dir=warm_cache, **TWO_UNITS, **FAST)
    assert measured.n_simulated == 2 and measured.meta["length_source"] == "ingest histogram"
    unit, default = measured.meta["units"][0], two_units.meta["units"][0]
    assert unit["classes"]["standard"]["length_source"] == "ingest histogram"
    assert unit["classes"]["interactive"]["length_source"] == default["classes"]["interactive"]["length_source"]
    assert unit["cache_key"] != default["cache_key"]
    # shorter prompts than the trace default: a higher ceiling for the class
    assert unit["classes"]["standard"]["prompt_mean_tokens"] < default["classes"]["standard"]["prompt_mean_tokens"]

    def standard_ceiling(result: CalibrationResult) -> float:
        rows = result.table[(result.table["tp_degree"] == 1) & (result.table["traffic_class"] == "standard")]
        return float(rows["class_ceiling_rps_per_replica"].iloc[0])

    assert standard_ceiling(measured) > standard_ceiling(two_units)


def test_default_cache_dir_follows_the_environment(tmp_path):
    assert default_cache_dir({"PLANNER_CACHE_DIR": str(tmp_path)}) == tmp_path / "calibration"
    assert default_cache_dir({}) == Path.home() / ".cache" / "planner" / "calibration"


# ----------------------------------------------------------------------------- engines
@pytest.mark.slow
def test_local_and_processes_give_byte_identical_tables(small, profiles, tmp_path):
    out = []
    for engine in ("local", "processes"):  # with the engine-setting search and its pruning
        result = calibrate(small, profiles, use_cache=False, **ON_H100, **{**FAST, "engine": engine}, workers=2)
        out.append([path.read_bytes() for path in write_calibration(result, tmp_path / f"{engine}.csv")])
    assert out[0] == out[1]


# ----------------------------------------------------------------------------- failures, never a silent zero
def test_an_unreachable_slo_is_a_failure_with_a_reason(small, profiles, tmp_path):
    strict = with_class_slos(small, "standard", ttft_p99_ms=1.0, e2e_p99_ms=2.0)
    result = calibrate(strict, profiles, cache_dir=tmp_path, **TWO_UNITS, **FAST)
    assert result.table.empty and list(result.table.columns) == list(TABLE_COLUMNS)
    assert [(f["model"], f["sku"], f["tp_degree"]) for f in result.failures] == [("llama-3.1-8b", "H100", 1),
                                                                                 ("llama-3.1-8b", "H100", 2)]
    for failure in result.failures:
        assert "class 'standard' misses its E2E p99 SLO of 2 ms: upper 95 % bound" in failure["reason"]
        assert "1 % of the analytic ceiling" in failure["reason"]
    assert result.meta["failures"] == result.failures


def test_a_class_too_large_for_kv_is_a_failure_with_a_reason(small, profiles, tmp_path):
    tiny = profiles.copy()
    tiny.loc[(tiny["model"] == "llama-3.1-8b") & (tiny["sku"] == "H100") & (tiny["tp_degree"] == 1),
             "kv_capacity_tokens"] = 1000
    result = calibrate(small, tiny, cache_dir=tmp_path, **TWO_UNITS, **FAST)
    assert [(f["sku"], f["tp_degree"]) for f in result.failures] == [("H100", 1)]
    assert "does not fit in the KV budget" in result.failures[0]["reason"]
    assert unit_of(result, 1)["binding_metric"] == "kv" and unit_of(result, 1)["simulations"] == 0
    assert set(result.table["tp_degree"]) == {2}


# ----------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(("kwargs", "where"), [
    ({"policy": "lifo"}, "--policy"),
    ({"models": ["gpt-5"]}, "--models"),
    ({"skus": ["TPU-v5"]}, "--skus"),
    ({"models": ["llama-3.1-70b"], "skus": ["L4"]}, "--models/--skus"),
    ({"class_mix": {"interactive": 0.5, "standard": 0.4}}, "class mix"),
    ({"class_mix": {"premium": 1.0}}, "class mix"),
    ({"class_mix": {"interactive": 1.5, "standard": -0.5}}, "class mix, class 'standard'"),
    ({"duration_s": 0.0}, "--sim-duration"),
    ({"duration_s": math.inf}, "--sim-duration"),
    ({"replications": 1}, "--replications"),
    ({"rel_tol": 0.0}, "--tolerance"),
    ({"confidence": 1.0}, "confidence"),
    ({"pool_replicas": 0}, "--pool-replicas"),
    ({"pool_replicas": 100_000}, "--pool-replicas"),  # 100,000 x max_batch slots: refused before any probe
    ({"pool_replicas": 2_000, "models": ["llama-3.1-8b"], "skus": ["H100"]}, "--pool-replicas"),  # its arrivals
    ({"engine": "threads"}, "--engine"),
])
def test_bad_inputs_are_input_errors_naming_where_and_fix(demo, profiles, tmp_path, kwargs, where):
    with pytest.raises(InputError) as info:
        calibrate(demo, profiles, cache_dir=tmp_path, **kwargs)
    assert info.value.where == where and info.value.fix
    assert not list(tmp_path.iterdir())


def test_a_bad_output_suffix_writes_nothing(two_units, tmp_path):
    with pytest.raises(InputError):
        write_calibration(two_units, tmp_path / "capacity.txt")
    assert not list(tmp_path.iterdir())

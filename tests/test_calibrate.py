"""`calibrate`: the capacity table and its contract, the cache, engines, failures and bad inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from planner.calibrate import CalibrationResult, calibrate, default_cache_dir, write_calibration
from planner.calibrate import run as calibrate_run
from planner.calibrate.cache import cache_key, entry_path, key_material
from planner.calibrate.inputs import Settings, build_tasks, class_shares
from planner.calibrate.table import TABLE_COLUMNS
from planner.catalog import load_catalog
from planner.errors import InputError
from planner.placement.capacity import validate_capacity
from planner.placement.workflow import place_plan
from planner.profiles import load_profiles
from planner.scenario import Scenario, load_scenario, parse_scenario
from planner.storage import read_table

REPO_ROOT = Path(__file__).resolve().parents[1]
FAST = {"duration_s": 300.0, "replications": 3}
STANDARD_ONLY = {"standard": 1.0}
TWO_PAIRS = {"models": ["llama-3.1-8b"], "skus": ["H100", "A100-80GB"], "class_mix": STANDARD_ONLY}


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return load_scenario(REPO_ROOT / "scenarios/demo.toml")


@pytest.fixture(scope="module")
def profiles() -> pd.DataFrame:
    return load_profiles()


@pytest.fixture(scope="module")
def two_pairs(scenario, profiles, tmp_path_factory) -> CalibrationResult:
    return calibrate(scenario, profiles, engine="local", cache_dir=tmp_path_factory.mktemp("cache"), **TWO_PAIRS,
                     **FAST)


def with_class_slos(scenario: Scenario, name: str, **slos: float | None) -> Scenario:
    """The scenario with some SLO fields of class ``name`` replaced (None: not set)."""
    return scenario.model_copy(update={"classes": tuple(
        k.model_copy(update=slos) if k.name == name else k for k in scenario.classes)})


def never(*_args, **_kwargs):
    raise AssertionError("a cache hit must not simulate")


# ----------------------------------------------------------------------------- the table
def test_table_passes_the_capacity_contract_and_fills_a_replica_exactly(two_pairs, scenario):
    table = two_pairs.table
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert len(table) == 2 * len(scenario.class_names)  # every class gets its row, share 0 or not
    checked = validate_capacity(table)
    assert (checked["max_rps_per_replica"] > 0).all()
    assert set(table["policy"]) == {scenario.policy.name}
    assert table["source"].str.startswith("calibrated: bisection").all()
    for _, rows in table.groupby(["model", "sku"]):
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
        assert set(rows["binding_class"]) == {"standard"} and set(rows["binding_metric"]) <= {"ttft", "e2e"}
    assert (table["simulations"] > 0).all() and not table["cached"].any()
    assert two_pairs.n_simulated == 2 and two_pairs.n_cached == 0 and two_pairs.failures == []


@pytest.mark.slow
def test_demo_scenario_calibrates_every_pair_or_says_why(scenario, profiles, tmp_path):
    result = calibrate(scenario, profiles, engine="local", cache_dir=tmp_path, **FAST)
    pairs = {(p["model"], p["sku"]) for p in result.meta["pairs"]}
    assert pairs == {(m, s) for m in scenario.model_names for s in scenario.allowed_skus(m)}
    calibrated = {(m, s) for m, s in result.table[["model", "sku"]].drop_duplicates().itertuples(index=False)}
    failed = {(f["model"], f["sku"]) for f in result.failures}
    assert calibrated | failed == pairs and not calibrated & failed
    assert ("llama-3.1-8b", "H100") in calibrated
    for f in result.failures:
        assert "misses its" in f["reason"] and "SLO" in f["reason"]
    for p in result.meta["pairs"]:
        if p["status"] != "infeasible":
            assert 0 < p["mix_rps_per_replica"] <= p["ceiling_rps_per_replica"]
            assert p["trace"] and p["trace"][0]["ok"]


def test_written_table_reads_back_as_planner_place_reads_it(two_pairs, scenario, profiles, tmp_path):
    for name in ("capacity.csv", "capacity.parquet"):
        paths = write_calibration(two_pairs, tmp_path / name)
        assert paths == [tmp_path / name, tmp_path / name.replace(Path(name).suffix, ".json")]
        back = validate_capacity(read_table(paths[0]), where=paths[0])
        pd.testing.assert_series_equal(back["max_rps_per_replica"], two_pairs.table["max_rps_per_replica"],
                                       check_names=False)
        payload = json.loads(paths[1].read_text())  # strict JSON: no NaN or Infinity
        assert payload["meta"]["confidence"] == 0.95 and len(payload["rows"]) == len(two_pairs.table)
        assert payload["meta"]["pairs"][0]["trace"]
    # the plan uses the calibrated coefficients
    table = validate_capacity(read_table(tmp_path / "capacity.csv"))
    rows = []
    for origin in scenario.origin_names:
        for cls, per_hour in {"interactive": 3600.0, "standard": 7200.0, "batch": 1800.0}.items():
            for ts in pd.date_range("2026-11-02T16:00:00Z", periods=2, freq="h"):
                rows.append({"region": origin, "model": "llama-3.1-8b", "traffic_class": cls,
                             "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "mean": per_hour, "q50": per_hour,
                             "q90": per_hour, "q95": per_hour, "q99": per_hour, "model_used": "test"})
    # the forecast covers the two hours and the one model the plan is for
    two_hours = scenario.model_copy(update={"horizon": "2h", "models": (scenario.model("llama-3.1-8b"),)})
    plan = place_plan(two_hours, pd.DataFrame(rows), load_catalog(), profiles, capacity=table, time_limit_s=30,
                      baselines=False, periods="hourly")
    assert plan.meta["capacity_source"] == "capacity table"
    assert set(plan.plan["sku"]) <= {"H100", "A100-80GB"}
    assert plan.plan["replicas"].sum() > 0


def test_same_inputs_give_identical_outputs(two_pairs, scenario, profiles, tmp_path):
    again = calibrate(scenario, profiles, engine="local", use_cache=False, **TWO_PAIRS, **FAST)
    pd.testing.assert_frame_equal(again.table, two_pairs.table)
    assert again.meta["pairs"] == two_pairs.meta["pairs"]


# ----------------------------------------------------------------------------- the cache
def test_cache_hit_does_not_simulate_and_gives_the_same_table(scenario, profiles, tmp_path, monkeypatch):
    cold = calibrate(scenario, profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    assert cold.n_simulated == 2 and len(list(tmp_path.glob("*.json"))) == 2
    monkeypatch.setattr(calibrate_run, "calibrate_pair", never)
    seen = []
    warm = calibrate(scenario, profiles, engine="local", cache_dir=tmp_path, progress=lambda d, t: seen.append((d, t)),
                     **TWO_PAIRS, **FAST)
    assert warm.n_simulated == 0 and warm.n_cached == 2 and warm.table["cached"].all()
    pd.testing.assert_frame_equal(warm.table.drop(columns="cached"), cold.table.drop(columns="cached"))
    assert [p["trace"] for p in warm.meta["pairs"]] == [p["trace"] for p in cold.meta["pairs"]]
    assert seen == [(1, 2), (2, 2)]


def test_a_changed_input_misses_the_cache_and_an_unrelated_one_hits(scenario, profiles, tmp_path):
    calibrate(scenario, profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    looser = scenario.model_copy(update={"classes": tuple(
        k.model_copy(update={"e2e_p99_ms": k.e2e_p99_ms * 2}) if k.name == "standard" else k
        for k in scenario.classes)})
    assert calibrate(looser, profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST).n_simulated == 2
    renamed = profiles.assign(notes="edited notes")  # not an input of the answer
    assert calibrate(scenario, renamed, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST).n_cached == 2
    other_policy = calibrate(scenario, profiles, policy="fcfs", engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    assert other_policy.n_simulated == 2 and set(other_policy.table["policy"]) == {"fcfs"}


def test_the_cache_key_holds_each_model_s_own_slos(scenario, profiles):
    """An override changes the key of that model's pairs only; a metric added or removed changes it too."""
    raw = scenario.model_dump()
    raw["models"][0]["slos"] = {"standard": {"tpot_p99_ms": 60.0}}
    overridden = parse_scenario(raw)
    settings = Settings(duration_s=300.0, warmup_fraction=0.1, replications=3, seed=1, rel_tol=0.02, confidence=0.95,
                        pool_replicas=1, policy="drr-wspt", prediction_sigma=0.5, aging_rate=0.1, trail_c=0.5,
                        kv_fraction=0.85, output_quantile_reserve=0.95)
    pairs = [("llama-3.1-8b", "H100"), ("llama-3.1-70b", "H100")]

    def keys(s: Scenario) -> list[str]:
        return [cache_key(t) for t in build_tasks(s, profiles, pairs, class_shares(s, None), settings, None)]

    base, changed = keys(scenario), keys(overridden)
    assert changed[0] != base[0] and changed[1] == base[1]
    task = build_tasks(overridden, profiles, pairs[:1], class_shares(overridden, None), settings, None)[0]
    slos = {c["name"]: c["slo"] for c in key_material(task)["classes"]}
    assert slos["standard"] == {"ttft": 3000.0, "tpot": 60.0, "e2e": 60000.0}
    assert slos["interactive"] == {"ttft": 800.0, "e2e": 40000.0}
    assert keys(with_class_slos(scenario, "batch", e2e_p99_ms=None)) != base


def test_a_tpot_slo_is_checked_and_binds_when_it_is_the_tightest(two_pairs, scenario, profiles, tmp_path):
    tight = calibrate(with_class_slos(scenario, "standard", tpot_p99_ms=60.0), profiles, engine="local",
                      cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    assert set(tight.table["binding_metric"]) == {"tpot"} and tight.failures == []
    for pair, before in zip(tight.meta["pairs"], two_pairs.meta["pairs"], strict=True):
        assert pair["classes"]["standard"]["tpot_p99_slo_ms"] == 60.0
        assert pair["mix_rps_per_replica"] < before["mix_rps_per_replica"]
        assert "standard.tpot" in pair["trace"][0]["p99_upper_ms"]
    assert "tpot" in tight.meta["predicate"]
    # a class with only a TPOT SLO: TTFT and e2e are measured but never checked
    only = calibrate(with_class_slos(scenario, "standard", ttft_p99_ms=None, tpot_p99_ms=60.0, e2e_p99_ms=None),
                     profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    assert set(only.table["binding_metric"]) == {"tpot"}
    for pair in only.meta["pairs"]:
        assert {"ttft_p99_slo_ms": None, "e2e_p99_slo_ms": None}.items() <= pair["classes"]["standard"].items()
        assert all(set(probe["p99_upper_ms"]) == {"standard.tpot"} for probe in pair["trace"])


def test_an_unreachable_tpot_slo_is_named_in_the_failure(scenario, profiles, tmp_path):
    strict = with_class_slos(scenario, "standard", tpot_p99_ms=1.0)
    result = calibrate(strict, profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    assert result.table.empty and len(result.failures) == 2
    assert all("class 'standard' misses its TPOT p99 SLO of 1 ms" in f["reason"] for f in result.failures)


@pytest.mark.parametrize("damage", ["not json {", '{"calibration_version": 1, "result": {"key": "x"}}', "",
                                    '{"calibration_version": 1, "result": []}'])
def test_corrupt_cache_entry_is_recomputed(scenario, profiles, tmp_path, damage):
    cold = calibrate(scenario, profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    key = cold.meta["pairs"][0]["cache_key"]
    entry_path(tmp_path, key).write_text(damage)
    again = calibrate(scenario, profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    assert again.n_simulated == 1 and again.n_cached == 1
    pd.testing.assert_frame_equal(again.table.drop(columns="cached"), cold.table.drop(columns="cached"))
    assert json.loads(entry_path(tmp_path, key).read_text())["key"] == key


def test_unwritable_cache_is_reported_not_fatal(scenario, profiles, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    result = calibrate(scenario, profiles, engine="local", cache_dir=blocker / "cache", **TWO_PAIRS, **FAST)
    assert len(result.table) == 6 and len(result.meta["cache"]["notes"]) == 2


def test_an_ingest_histogram_replaces_the_default_lengths_and_the_cache_key(scenario, profiles, tmp_path):
    rows = []
    for measure, bins in (("prompt_tokens", [(256, 512, 40), (512, 1024, 50), (1024, 2048, 10)]),
                          ("output_tokens", [(8, 16, 30), (16, 32, 50), (32, 64, 20)])):
        for lo, hi, count in bins:
            rows.append({"model": "llama-3.1-8b", "traffic_class": "standard", "measure": measure, "bin_lo_tokens": lo,
                         "bin_hi_tokens": hi, "count": count})
    histogram = pd.DataFrame(rows)
    default = calibrate(scenario, profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    measured = calibrate(scenario, profiles, histogram=histogram, engine="local", cache_dir=tmp_path, **TWO_PAIRS,
                         **FAST)
    assert measured.n_simulated == 2 and measured.meta["length_source"] == "ingest histogram"
    pair = measured.meta["pairs"][0]
    assert pair["classes"]["standard"]["length_source"] == "ingest histogram"
    assert pair["cache_key"] != default.meta["pairs"][0]["cache_key"]
    # shorter prompts than the trace default: a higher ceiling for the class
    assert pair["classes"]["standard"]["ceiling_rps_per_replica"] > \
        default.meta["pairs"][0]["classes"]["standard"]["ceiling_rps_per_replica"]


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PLANNER_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "calibration"
    monkeypatch.delenv("PLANNER_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "planner" / "calibration"


# ----------------------------------------------------------------------------- engines
@pytest.mark.slow
def test_local_and_processes_give_byte_identical_tables(scenario, profiles, tmp_path):
    out = []
    for engine in ("local", "processes"):
        result = calibrate(scenario, profiles, engine=engine, workers=2, use_cache=False, **TWO_PAIRS, **FAST)
        path, _ = write_calibration(result, tmp_path / f"{engine}.csv")
        out.append(path.read_bytes())
    assert out[0] == out[1]


# ----------------------------------------------------------------------------- failures, never a silent zero
def test_an_unreachable_slo_is_a_failure_with_a_reason(scenario, profiles, tmp_path):
    strict = scenario.model_copy(update={"classes": tuple(
        k.model_copy(update={"ttft_p99_ms": 1.0, "e2e_p99_ms": 2.0}) if k.name == "standard" else k
        for k in scenario.classes)})
    result = calibrate(strict, profiles, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    assert result.table.empty and list(result.table.columns) == list(TABLE_COLUMNS)
    assert len(result.failures) == 2
    for failure in result.failures:
        assert "class 'standard' misses its E2E p99 SLO of 2 ms: upper 95 % bound" in failure["reason"]
        assert "1 % of the analytic ceiling" in failure["reason"]


def test_a_class_too_large_for_kv_is_a_failure_with_a_reason(scenario, profiles, tmp_path):
    tiny = profiles.copy()
    tiny.loc[(tiny["model"] == "llama-3.1-8b") & (tiny["sku"] == "H100"), "kv_capacity_tokens"] = 1000
    result = calibrate(scenario, tiny, engine="local", cache_dir=tmp_path, **TWO_PAIRS, **FAST)
    assert [f["sku"] for f in result.failures] == ["H100"]
    assert "does not fit in the KV budget" in result.failures[0]["reason"]
    assert set(result.table["sku"]) == {"A100-80GB"}


# ----------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(("kwargs", "where"), [
    ({"policy": "lifo"}, "--policy"),
    ({"models": ["gpt-5"]}, "--models"),
    ({"skus": ["TPU-v5"]}, "--skus"),
    ({"models": ["llama-3.1-70b"], "skus": ["L4"]}, "--models/--skus"),
    ({"class_mix": {"interactive": 0.5, "standard": 0.4}}, "class mix"),
    ({"class_mix": {"premium": 1.0}}, "class mix"),
    ({"class_mix": {"interactive": 1.5, "standard": -0.5}}, "class mix, class 'standard'"),
    ({"duration_s": 0.0}, "--duration"),
    ({"duration_s": math.inf}, "--duration"),
    ({"replications": 1}, "--replications"),
    ({"rel_tol": 0.0}, "--tolerance"),
    ({"confidence": 1.0}, "confidence"),
    ({"pool_replicas": 0}, "--pool-replicas"),
    ({"pool_replicas": 100_000}, "--pool-replicas"),  # 100,000 x max_batch slots: refused before any probe
    ({"pool_replicas": 2_000, "models": ["llama-3.1-8b"], "skus": ["H100"]}, "--pool-replicas"),  # its arrivals
    ({"engine": "threads"}, "--engine"),
])
def test_bad_inputs_are_input_errors_naming_where_and_fix(scenario, profiles, tmp_path, kwargs, where):
    with pytest.raises(InputError) as info:
        calibrate(scenario, profiles, cache_dir=tmp_path, **kwargs)
    assert info.value.where == where and info.value.fix
    assert not list(tmp_path.iterdir())


def test_a_bad_output_suffix_writes_nothing(two_pairs, tmp_path):
    with pytest.raises(InputError):
        write_calibration(two_pairs, tmp_path / "capacity.txt")
    assert not list(tmp_path.iterdir())

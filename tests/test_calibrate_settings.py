"""Calibration's engine-setting search: the grid, one unit searched with and without pruning, settings
pruned by the step-time model's ceiling or by one probe, and the early stop of a clearly missed probe."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from planner.calibrate import inputs as calibrate_inputs
from planner.calibrate import probe as calibrate_probe
from planner.calibrate.inputs import (
    LONG_PREFILL_TOKEN_THRESHOLDS,
    MAX_NUM_BATCHED_TOKENS,
    MAX_NUM_SEQS,
    Settings,
    UnitTask,
    build_tasks,
    class_shares,
    select_units,
    setting_grid,
)
from planner.calibrate.probe import _replication_row, pool_config, probe
from planner.calibrate.probe_memo import MemoryProbeStore, probe_key
from planner.calibrate.unit import (
    CEILING_MARGIN,
    SCREEN_FRACTION,
    calibrate_unit,
    longest_prefill_tokens,
    same_simulations,
    screen,
)
from planner.profiles import load_profiles
from planner.scenario import Scenario, load_scenario, parse_scenario
from planner.workflows.calibrate import calibrate_with_cache as calibrate

REPO_ROOT = Path(__file__).resolve().parents[1]
STANDARD_ONLY = {"standard": 1.0}
REL_TOL = 0.02
SEARCH = {"models": ["llama-3.1-8b"], "skus": ["H100"], "class_mix": STANDARD_ONLY, "duration_s": 300.0,
          "replications": 3, "rel_tol": REL_TOL, "engine": "local", "use_cache": False}
SETTINGS = Settings(duration_s=300.0, warmup_fraction=0.1, replications=3, seed=1, rel_tol=REL_TOL, confidence=0.95,
                    pool_replicas=1, policy="drr-wspt", prediction_sigma=0.5,
                    policy_params=(("aging_rate", 0.1), ("trail_c", 0.5)),
                    kv_fraction=0.85, output_quantile_reserve=0.95, search_settings=True, prune=True)
PRUNED_BY_CEILING = "its analytic ceiling"
PRUNED_BY_PROBE = "misses an SLO at"


@pytest.fixture(scope="module")
def profiles() -> pd.DataFrame:
    return load_profiles()


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    """The demo with llama-3.1-8b on one GPU: one unit on H100."""
    raw = load_scenario(REPO_ROOT / "scenarios/demo.toml").model_dump()
    for spec in raw["models"]:
        if spec["name"] == "llama-3.1-8b":
            spec["tp"] = [1]
    return parse_scenario(raw)


def with_class_slos(scenario: Scenario, name: str, **slos: float | None) -> Scenario:
    return scenario.model_copy(update={"classes": tuple(
        k.model_copy(update=slos) if k.name == name else k for k in scenario.classes)})


def h100_task(scenario: Scenario, profiles: pd.DataFrame, settings: Settings = SETTINGS) -> UnitTask:
    units, _ = select_units(scenario, profiles, ["llama-3.1-8b"], ["H100"])
    (task,) = build_tasks(scenario, units, class_shares(scenario, STANDARD_ONLY), settings, None)
    return task


# ----------------------------------------------------------------------------- the grid
def test_the_grid_starts_with_the_profile_defaults_and_tries_each_setting_once():
    profile = {"max_num_seqs": 256, "max_num_batched_tokens": 8192, "engine": "vllm"}  # vLLM's defaults, on the grid
    grid = setting_grid(profile, True)
    assert grid[0] == (256, 8192, 0) and len(grid) == len(set(grid))
    assert set(grid) == {(s, t, c) for s in MAX_NUM_SEQS for t in MAX_NUM_BATCHED_TOKENS
                         for c in LONG_PREFILL_TOKEN_THRESHOLDS if t >= s and c < t}
    assert setting_grid(profile, False) == [(256, 8192, 0)]
    off_grid = {"max_num_seqs": 96, "max_num_batched_tokens": 4096, "engine": "vllm"}  # e.g. a user's own profile
    assert setting_grid(off_grid, True) == [(96, 4096, 0), *sorted(grid)]
    assert setting_grid(off_grid, False) == [(96, 4096, 0)]


def test_only_vllm_units_try_a_long_prefill_threshold():
    for engine in ("sglang", "trtllm"):
        grid = setting_grid({"max_num_seqs": 256, "max_num_batched_tokens": 8192, "engine": engine}, True)
        assert {cap for _, _, cap in grid} == {0}
    vllm = setting_grid({"max_num_seqs": 256, "max_num_batched_tokens": 8192, "engine": "vllm"}, True)
    assert {cap for _, _, cap in vllm} == set(LONG_PREFILL_TOKEN_THRESHOLDS)


def test_the_grid_leaves_out_token_budgets_below_the_batch_cap(monkeypatch):
    monkeypatch.setattr(calibrate_inputs, "MAX_NUM_SEQS", (64, 1024, 4096))
    monkeypatch.setattr(calibrate_inputs, "MAX_NUM_BATCHED_TOKENS", (512, 2048, 8192))
    monkeypatch.setattr(calibrate_inputs, "LONG_PREFILL_TOKEN_THRESHOLDS", (0,))
    grid = setting_grid({"max_num_seqs": 256, "max_num_batched_tokens": 8192, "engine": "vllm"}, True)
    assert [g[:2] for g in grid] == [(256, 8192), (64, 512), (64, 2048), (64, 8192), (1024, 2048), (1024, 8192),
                                     (4096, 8192)]
    assert all(tokens >= seqs for seqs, tokens, _ in grid)


def test_every_profile_row_gets_its_defaults_first_and_a_grid_of_whole_steps(profiles):
    for row in profiles.to_dict("records"):
        grid = setting_grid(row, True)
        assert grid[0] == (row["max_num_seqs"], row["max_num_batched_tokens"], 0)
        assert len(grid) == len(set(grid)) and all(tokens >= seqs and cap < tokens for seqs, tokens, cap in grid[1:])


def test_a_task_tries_a_replica_per_setting_of_its_grid(scenario, profiles):
    task = h100_task(scenario, profiles)
    row = profiles[(profiles["model"] == "llama-3.1-8b") & (profiles["sku"] == "H100") & (profiles["tp_degree"] == 1)
                   & (profiles["engine"] == "vllm")].iloc[0]
    assert [(r.max_batch, r.token_budget, r.prefill_chunk_cap) for r in task.candidates] == setting_grid(row, True)
    assert {(r.sku, r.tp, r.kv_capacity_tokens, r.count) for r in task.candidates} == {
        ("H100", 1, row["kv_capacity_tokens"], 1)}
    assert len({r.step for r in task.candidates}) == 1  # the setting changes the engine, not the step model
    assert len(h100_task(scenario, profiles, replace(SETTINGS, search_settings=False)).candidates) == 1


# ----------------------------------------------------------------------------- one unit searched
@pytest.fixture(scope="module")
def unpruned(scenario, profiles):
    (unit,) = calibrate(scenario, profiles, prune=False, **SEARCH).meta["units"]
    return unit


@pytest.fixture(scope="module")
def pruned(scenario, profiles):
    (unit,) = calibrate(scenario, profiles, prune=True, **SEARCH).meta["units"]
    return unit


def setting_of(entry: dict) -> tuple[int, int, int]:
    return entry["max_num_seqs"], entry["max_num_batched_tokens"], entry["long_prefill_token_threshold"]


def test_without_pruning_every_setting_is_searched(unpruned):
    tried = unpruned["settings_tried"]
    assert len(tried) == len(setting_grid({"max_num_seqs": 256, "max_num_batched_tokens": 8192, "engine": "vllm"},
                                          True)) > 1
    for entry in tried:
        assert entry["status"] in ("calibrated", "growth_limit") and entry["simulations"] > 0
        assert entry["rate_rps_per_replica"] > 0 and entry["reason"] == ""
    best = max(tried, key=lambda e: e["rate_rps_per_replica"])
    assert setting_of(unpruned) == setting_of(best)
    assert unpruned["mix_rps_per_replica"] == best["rate_rps_per_replica"]
    assert unpruned["simulations"] == sum(e["simulations"] for e in tried)


def unscreened(entry: dict) -> dict:
    """A setting's record without its screen: its score dropped, its replication taken off its simulations."""
    if "screen_worst_over_slo" not in entry:
        return entry
    return {**{k: v for k, v in entry.items() if k != "screen_worst_over_slo"}, "simulations": entry["simulations"] - 1}


def test_pruning_chooses_a_setting_within_the_tolerance_of_the_full_search(pruned, unpruned):
    assert pruned["mix_rps_per_replica"] == pytest.approx(unpruned["mix_rps_per_replica"], rel=REL_TOL)
    assert pruned["simulations"] < unpruned["simulations"]
    full = {setting_of(e): e for e in unpruned["settings_tried"]}
    tried = pruned["settings_tried"]
    assert [setting_of(e) for e in tried] == list(full)  # the same settings, in the grid's order
    assert all("screen_worst_over_slo" not in e for e in unpruned["settings_tried"])  # no order to choose
    # every setting is screened; the best screen is searched first, from the floor, on the same requests as the
    # full search's: the same answer
    scores = [e["screen_worst_over_slo"] for e in tried]
    assert all(0 < x < math.inf for x in scores) and len(set(scores)) > 1
    first = min(tried, key=lambda e: (e["screen_worst_over_slo"], -e["ceiling_rps_per_replica"]))
    assert first["status"] == "calibrated" and unscreened(first) == full[setting_of(first)]
    chosen = [e for e in tried if setting_of(e) == setting_of(pruned)]
    assert chosen[0]["rate_rps_per_replica"] == pruned["mix_rps_per_replica"]
    searched = [e for e in tried if e["status"] != "pruned"]
    assert all(e["rate_rps_per_replica"] <= pruned["mix_rps_per_replica"] for e in searched)
    skipped = [e for e in tried if e["status"] == "pruned"]
    by_probe = [e for e in skipped if e["reason"].startswith(PRUNED_BY_PROBE)]
    assert by_probe, "this case prunes settings after a probe, so the probe's cost below is checked"
    for entry in skipped:  # each says why, and a probe costs at most one probe's replications
        assert entry["rate_rps_per_replica"] == 0.0
        if entry["reason"].startswith(PRUNED_BY_CEILING):
            assert entry["simulations"] == 1 and "cannot beat the best calibrated" in entry["reason"]  # its screen
        else:
            assert entry["reason"].startswith(PRUNED_BY_PROBE), entry["reason"]
            assert "above the best calibrated rate: class 'standard' misses its" in entry["reason"]
            assert 1 <= unscreened(entry)["simulations"] <= SEARCH["replications"]


def test_the_screen_is_replication_0_of_a_probe_at_one_rate_and_orders_the_search(scenario, profiles, monkeypatch):
    """On the demo's mix a long prompt's prefill holds up short prompts' first tokens unless a threshold caps its
    chunk: the threshold scores best at the screen though another setting's ceiling is higher."""
    monkeypatch.setattr(calibrate_inputs, "MAX_NUM_SEQS", (256,))
    monkeypatch.setattr(calibrate_inputs, "MAX_NUM_BATCHED_TOKENS", (2048, 8192))
    monkeypatch.setattr(calibrate_inputs, "LONG_PREFILL_TOKEN_THRESHOLDS", (0, 2048))
    units, _ = select_units(scenario, profiles, ["llama-3.1-8b"], ["H100"])
    (task,) = build_tasks(scenario, units, class_shares(scenario, None), SETTINGS, None)
    settings = [(r.token_budget, r.prefill_chunk_cap) for r in task.candidates]
    assert settings == [(8192, 0), (2048, 0), (8192, 2048)]
    ceilings = [task.mix_ceiling_rps(r) for r in task.candidates]
    memo = MemoryProbeStore()
    rate, scores = screen(task, ceilings, memo)
    assert rate == pytest.approx(SCREEN_FRACTION * sorted(ceilings)[1], rel=1e-12)
    for i, replica in enumerate(task.candidates):
        row = _replication_row(task, pool_config(task, replica, rate), 0)
        assert memo.get(probe_key(task, replica, rate)) == [row]  # the row a probe at this rate reads first
        assert scores[i] == max(row[c.name][m] / slo for c in task.active for m, slo in c.spec.slo.targets())
    best = min(scores, key=scores.__getitem__)
    assert settings[best] == (8192, 2048) and ceilings[best] < max(ceilings)
    read = probe(replace(task, settings=replace(SETTINGS, replications=2)), task.candidates[best], rate, memo)
    assert read.replications_run == 2 and len(memo.get(probe_key(task, task.candidates[best], rate))) == 2
    assert screen(replace(task, settings=replace(SETTINGS, prune=False)), ceilings) == (0.0, {})
    assert screen(task, [ceilings[0], 0.0, 0.0]) == (0.0, {})  # one setting that fits: nothing to order


def short_fixed(scenario: Scenario, reuse: dict | None = None) -> Scenario:
    """Every class at fixed 1,024-token prompts and 256-token outputs (AIConfigurator's kind of question), with
    ``reuse`` declared on each class, or none."""
    raw = scenario.model_dump()
    for klass in raw["classes"]:
        klass.update(prompt_tokens=1024, output_tokens=256, reuse=reuse)
    return parse_scenario(raw)


def test_a_threshold_no_request_can_reach_is_the_same_simulation_and_is_left_out(scenario, profiles):
    task = h100_task(short_fixed(scenario), profiles)
    assert longest_prefill_tokens(task) == 1024 + 256
    same = same_simulations(task)
    thresholded = [i for i, r in enumerate(task.candidates) if r.prefill_chunk_cap > 0]
    assert sorted(same) == thresholded and thresholded
    for i, j in same.items():
        a, b = task.candidates[i], task.candidates[j]
        assert (a.max_batch, a.token_budget, a.prefill_chunk_cap, b.prefill_chunk_cap) == \
            (b.max_batch, b.token_budget, 2048, 0)
    # the proof's oracle: the twins simulate to the same rows, at a rate where batches are full of prefill chunks
    i, j = next(iter(same.items()))
    rate = 0.9 * task.mix_ceiling_rps(task.candidates[j])
    assert _replication_row(task, pool_config(task, task.candidates[i], rate), 0) == \
        _replication_row(task, pool_config(task, task.candidates[j], rate), 0)
    result = calibrate_unit(task)
    for i in thresholded:
        entry = result["settings"][i]
        assert entry["status"] == "pruned" and entry["simulations"] == 0 and "screen_worst_over_slo" not in entry
        assert entry["reason"].startswith("the same simulation as") and "1,280 tokens to prefill" in entry["reason"]
    assert result["long_prefill_token_threshold"] == 0 and result["status"] == "calibrated"
    assert same_simulations(replace(task, settings=replace(SETTINGS, prune=False))) == {}


def test_a_threshold_a_long_prompt_or_a_declared_conversation_can_reach_is_searched(scenario, profiles):
    assert same_simulations(h100_task(scenario, profiles)) == {}  # the demo's standard prompts run to 126k tokens
    talks = short_fixed(scenario, {"system_prompt_tokens": 600, "variants": 2, "turns": 4, "think_time_s": 30})
    task = h100_task(talks, profiles)
    assert longest_prefill_tokens(task) > 2048 and same_simulations(task) == {}


def test_a_setting_whose_ceiling_is_far_below_the_best_rate_is_pruned_without_simulation(scenario, profiles,
                                                                                          monkeypatch):
    monkeypatch.setattr(calibrate_inputs, "MAX_NUM_SEQS", (4,))  # 4 requests in flight: a far lower ceiling
    monkeypatch.setattr(calibrate_inputs, "MAX_NUM_BATCHED_TOKENS", (2048,))
    monkeypatch.setattr(calibrate_inputs, "LONG_PREFILL_TOKEN_THRESHOLDS", (0,))
    task = h100_task(scenario, profiles)
    assert [(r.max_batch, r.token_budget) for r in task.candidates] == [(256, 8192), (4, 2048)]
    default, small = (task.mix_ceiling_rps(r) for r in task.candidates)
    result = calibrate_unit(task)
    best, low = result["settings"]
    assert best["status"] == "calibrated" and setting_of(result) == (256, 8192, 0)
    assert small * CEILING_MARGIN < best["rate_rps_per_replica"] < default * CEILING_MARGIN
    assert low["status"] == "pruned" and low["simulations"] == 1 and "probes" not in low  # its screen only
    assert low["reason"].startswith(PRUNED_BY_CEILING) and f"{small:.4g} req/s" in low["reason"]
    assert result["simulations"] == best["simulations"] + 1
    # without pruning it is searched in full, and loses
    unpruned = calibrate_unit(replace(task, settings=replace(task.settings, prune=False)))
    assert unpruned["settings"][0] == unscreened(best) and unpruned["settings"][1]["simulations"] > 0
    assert setting_of(unpruned) == (256, 8192, 0)


def test_a_unit_where_no_setting_fits_in_kv_fails_without_simulation(scenario, profiles):
    tiny = profiles.assign(kv_capacity_tokens=1000)
    result = calibrate_unit(h100_task(scenario, tiny))
    assert result["status"] == "infeasible" and result["simulations"] == 0 and result["rate_rps_per_replica"] == 0
    assert result["binding_class"] == "standard" and result["binding_metric"] == "kv"
    assert "does not fit in the KV budget" in result["reason"]
    assert len(result["settings"]) > 1
    assert all(e["status"] == "infeasible" and e["simulations"] == 0 for e in result["settings"])


# ----------------------------------------------------------------------------- a probe's early stop
@pytest.mark.parametrize("rate", [2.0, 4.0, 5.5, 6.0, 7.0, 9.0, 12.0, 16.0, 20.0, 24.0])
def test_the_early_stop_of_a_clearly_missed_probe_never_turns_a_hold_into_a_miss(scenario, profiles, monkeypatch,
                                                                                 rate):
    """A tight TPOT SLO misses clearly above ~6 req/s, without rejections until ~24 req/s."""
    tight = with_class_slos(scenario, "standard", tpot_p99_ms=60.0)
    task = h100_task(tight, profiles, replace(SETTINGS, replications=4, search_settings=False))
    replica = task.candidates[0]
    early = probe(task, replica, rate)
    with monkeypatch.context() as patch:
        patch.setattr(calibrate_probe, "_clearly_missed", lambda *_: False)
        full = probe(task, replica, rate)
    assert early.ok == full.ok
    if early.replications_run == full.replications_run:
        assert early == full
    else:  # stopped early: the miss was as clear after fewer replications
        assert not early.ok and early.replications_run < full.replications_run == 4
        assert early.arrivals_per_replication.keys() == full.arrivals_per_replication.keys()


def test_the_early_stop_saves_replications_on_clear_misses(scenario, profiles):
    tight = with_class_slos(scenario, "standard", tpot_p99_ms=60.0)
    task = h100_task(tight, profiles, replace(SETTINGS, replications=4, search_settings=False))
    probes = [probe(task, task.candidates[0], rate) for rate in (9.0, 12.0, 16.0, 20.0)]
    stopped = [p for p in probes if p.replications_run < 4]
    assert stopped and all(p.replications_run >= 2 for p in stopped)  # two at least: an interval needs a spread
    assert all(b.upper_ms < float("inf") for p in stopped for b in p.bounds)  # not a rejection stop


def test_clearly_missed_needs_two_finite_replications_wholly_above_the_slo():
    slo = {0: {"tpot": 60.0}}
    assert calibrate_probe._clearly_missed({(0, "tpot"): [100.0, 101.0]}, slo, 0.95)
    assert not calibrate_probe._clearly_missed({(0, "tpot"): [100.0]}, slo, 0.95)  # one: no spread
    assert not calibrate_probe._clearly_missed({(0, "tpot"): [40.0, 100.0]}, slo, 0.95)  # interval reaches below
    assert not calibrate_probe._clearly_missed({(0, "tpot"): [100.0, float("nan")]}, slo, 0.95)

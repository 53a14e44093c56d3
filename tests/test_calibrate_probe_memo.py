"""Probes kept for searches under other SLOs (``planner.calibrate.probe_memo``): what is read equals what is
simulated, the key holds everything the simulation depends on and no SLO, and a looser SLO's search reads the
replications a tighter one simulated."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from scenario_fixtures import with_tps

from planner.calibrate.inputs import Settings, UnitTask, build_tasks, class_shares, select_units
from planner.calibrate.probe import probe
from planner.calibrate.probe_memo import MemoryProbeStore, decode_rows, encode_rows, probe_key
from planner.calibrate.unit import calibrate_unit
from planner.profiles import load_profiles
from planner.scenario import Scenario, load_scenario
from planner.workflows.calibration_cache import FolderProbeStore, FolderStore

REPO_ROOT = Path(__file__).resolve().parents[1]
SETTINGS = Settings(duration_s=120.0, warmup_fraction=0.1, replications=4, seed=5, rel_tol=0.05, confidence=0.95,
                    pool_replicas=1, policy="drr-wspt", prediction_sigma=0.5,
                    policy_params=(("aging_rate", 0.1), ("trail_c", 0.5)), kv_fraction=0.85,
                    output_quantile_reserve=0.95, search_settings=False)
TIGHT = (150.0, 8000.0)  # standard's TTFT and e2e p99 targets, ms
LOOSE = (3000.0, 60000.0)


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return with_tps(load_scenario(REPO_ROOT / "scenarios/demo.toml"), (1,))


def task_with(scenario: Scenario, profiles, slo: tuple[float, float], settings: Settings = SETTINGS) -> UnitTask:
    classes = tuple(k.model_copy(update={"ttft_p99_ms": slo[0], "e2e_p99_ms": slo[1]}) if k.name == "standard"
                    else k for k in scenario.classes)
    changed = scenario.model_copy(update={"classes": classes})
    units, _ = select_units(changed, profiles, ["llama-3.1-8b"], ["A100-80GB"])
    (task,) = build_tasks(changed, units, class_shares(changed, {"standard": 1.0}), settings, None)
    return task


def same(a: object, b: object) -> bool:
    """Equal to the last bit, NaN included (a class's mean p99 is NaN where no replication saw it)."""
    return repr(a) == repr(b)


def test_a_probe_read_from_the_memo_is_the_probe_simulated(scenario, profiles):
    tight, loose = task_with(scenario, profiles, TIGHT), task_with(scenario, profiles, LOOSE)
    replica = tight.candidates[0]
    rate = 0.5 * tight.mix_ceiling_rps(replica)
    memo = MemoryProbeStore()
    first = probe(tight, replica, rate, memo)
    assert not first.ok and first.replications_run < SETTINGS.replications  # the tight SLO misses clearly, early
    (key,) = memo.rows
    assert len(memo.rows[key]) == first.replications_run
    fresh, read = probe(loose, replica, rate), probe(loose, replica, rate, memo)
    assert fresh.ok and fresh.replications_run == SETTINGS.replications
    assert same(read, fresh)  # the first replications read, the rest simulated
    assert len(memo.rows[key]) == SETTINGS.replications
    assert same(probe(tight, replica, rate, memo), first)  # and read back for the tight SLO too


def test_the_key_holds_what_the_simulation_depends_on_and_no_slo(scenario, profiles):
    tight, loose = task_with(scenario, profiles, TIGHT), task_with(scenario, profiles, LOOSE)
    replica = tight.candidates[0]
    key = probe_key(tight, replica, 1.0)
    assert probe_key(loose, replica, 1.0) == key
    steering = replace(SETTINGS, rel_tol=0.01, confidence=0.9, prune=False, replications=8)
    assert probe_key(task_with(scenario, profiles, TIGHT, steering), replica, 1.0) == key
    different = [probe_key(tight, replica, 1.0 + 1e-12), probe_key(tight, replace(replica, count=2), 1.0),
                 probe_key(tight, replace(replica, max_batch=replica.max_batch * 2), 1.0),
                 probe_key(task_with(scenario, profiles, TIGHT, replace(SETTINGS, seed=6)), replica, 1.0),
                 probe_key(task_with(scenario, profiles, TIGHT, replace(SETTINGS, duration_s=240.0)), replica, 1.0),
                 probe_key(task_with(scenario, profiles, TIGHT, replace(SETTINGS, policy="fcfs")), replica, 1.0)]
    assert key not in different and len(set(different)) == len(different)


def test_the_folder_store_keeps_rows_exactly_and_treats_a_damaged_entry_as_absent(tmp_path):
    rows = [{"standard": {"arrived": 1000.0, "ttft": 0.1 + 0.2, "tpot": float("inf"), "e2e": float("nan")}}]
    store = FolderStore(tmp_path / "calibration").probes
    assert isinstance(store, FolderProbeStore) and store.get("k") is None
    store.put("k", rows)
    (back,) = store.get("k") or []
    assert back["standard"]["ttft"] == 0.1 + 0.2 and back["standard"]["tpot"] == float("inf")
    assert back["standard"]["e2e"] != back["standard"]["e2e"]  # NaN
    assert json.loads(json.dumps(encode_rows(rows)))  # plain JSON, no Infinity or NaN tokens
    assert decode_rows([{"standard": {"ttft": "soon"}}]) is None
    path = tmp_path / "calibration" / "probes" / "k.json"
    path.write_text("{not json")
    assert store.get("k") is None
    path.write_text(json.dumps({"version": 1, "key": "other", "rows": encode_rows(rows)}))
    assert store.get("k") is None  # an entry for another key


def test_a_looser_slos_search_reads_the_tighter_ones_probes_and_answers_the_same(scenario, profiles):
    tight, loose = task_with(scenario, profiles, TIGHT), task_with(scenario, profiles, LOOSE)
    memo = MemoryProbeStore()
    calibrate_unit(tight, memo)
    before = sum(len(rows) for rows in memo.rows.values())
    with_memo = calibrate_unit(loose, memo)
    simulated = sum(len(rows) for rows in memo.rows.values()) - before
    alone = calibrate_unit(loose)
    assert json.dumps(with_memo, sort_keys=True) == json.dumps(alone, sort_keys=True)
    assert 0 < simulated < alone["simulations"]  # the floor and the ceiling were probed for the tight SLO already


def test_stored_rows_without_a_class_or_a_metric_are_simulated_again(scenario, profiles):
    loose = task_with(scenario, profiles, LOOSE)
    replica = loose.candidates[0]
    rate = 0.5 * loose.mix_ceiling_rps(replica)
    memo = MemoryProbeStore()
    key = probe_key(loose, replica, rate)
    memo.put(key, [{"standard": {"arrived": 1.0, "ttft": 1.0}}])  # a damaged entry: no tpot or e2e
    assert same(probe(loose, replica, rate, memo), probe(loose, replica, rate))
    assert len(memo.rows[key]) == SETTINGS.replications  # replaced by the simulated rows

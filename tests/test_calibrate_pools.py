"""Capacity per replica as the pool grows (``planner calibrate --pool-sizes``): the measured answers, the table's
non-decreasing law, the cache, and bad pool-size lists.

The calibrated unit is llama-3.1-8b on one H100 under the demo's mix for that model, at the profile's defaults: its
lone replica meets the SLOs at about half of its throughput ceiling (the interactive class's TTFT binds), so a pool
has room to carry more per replica. (On a class mix whose lone replica already reaches its throughput ceiling, a pool
adds nothing, and the measured answers sit within the search's tolerance of each other.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from scenario_fixtures import with_tps
from typer.testing import CliRunner

from planner import cli
from planner.calibrate import run as calibrate_run
from planner.calibrate.pools import check_pool_sizes, parse_pool_sizes, tabulated_rates
from planner.errors import InputError
from planner.placement.capacity import validate_capacity
from planner.profiles import load_profiles
from planner.scenario import load_scenario
from planner.workflows.calibrate import calibrate_with_cache as calibrate

REPO_ROOT = Path(__file__).resolve().parents[1]
FAST = {"duration_s": 300.0, "replications": 3, "engine": "local"}
LONE_TP1 = {"models": ["llama-3.1-8b"], "skus": ["H100"], "search_settings": False}
SIZES = (2, 4, 8)


def never(*_args, **_kwargs):
    raise AssertionError("a cache hit must not simulate")


@pytest.fixture(scope="module")
def profiles() -> pd.DataFrame:
    return load_profiles()


@pytest.fixture(scope="module")
def tp1(profiles):
    return with_tps(load_scenario(REPO_ROOT / "scenarios/demo.toml"), (1,))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pool-cache")


@pytest.fixture(scope="module")
def pooled(tp1, profiles, cache_dir):
    return calibrate(tp1, profiles, cache_dir=cache_dir, larger_pools=SIZES, **LONE_TP1, **FAST)


def test_tabulated_capacity_is_the_running_minimum_from_the_right() -> None:
    pools = [{"replicas": 2, "rate_rps_per_replica": 9.0, "status": "calibrated"},
             {"replicas": 4, "rate_rps_per_replica": 8.0, "status": "calibrated"},
             {"replicas": 8, "rate_rps_per_replica": 12.0, "status": "calibrated"}]
    # 4 measured less than 2: the pool of 2 takes 8.0, never more than a larger pool verified
    assert tabulated_rates(1, 6.0, pools) == [(1, 6.0), (2, 8.0), (4, 8.0), (8, 12.0)]
    assert tabulated_rates(1, 6.0, [{**pools[0], "status": "infeasible"}]) == [(1, 0.0), (2, 0.0)]


def test_each_pool_size_is_measured_from_the_next_smaller_answer_and_never_falls(pooled) -> None:
    (unit,) = pooled.meta["units"]
    measured = [unit["mix_rps_per_replica"]] + [p["rate_rps_per_replica"] for p in unit["pools"]]
    assert [p["replicas"] for p in unit["pools"]] == list(SIZES)
    # common random numbers, and each search starts from the smaller pool's verified rate
    assert all(p["search"] == "from the next smaller pool's answer" for p in unit["pools"])
    assert measured == sorted(measured)
    assert measured[-1] > 1.3 * measured[0], measured  # the economy of scale is there to measure
    for previous, pool in zip(measured, unit["pools"], strict=False):
        held = [p["rate_rps_per_replica"] for p in pool["probes"] if p["ok"]]
        assert pool["rate_rps_per_replica"] == max(held) >= previous  # a verified rate, from the smaller answer up
        # the smaller answer is assumed to hold and probed only when no rate above it held
        assert (previous in [p["rate_rps_per_replica"] for p in pool["probes"]]) == (max(held) == previous)
        assert pool["simulations"] == sum(p["replications"] for p in pool["probes"])
    assert pooled.meta["pool_sizes"] == [1, *SIZES]


def test_the_table_has_one_row_set_per_pool_size_scaled_by_its_rate(pooled) -> None:
    table = pooled.table
    assert sorted(table["pool_replicas"].unique()) == [1, *SIZES]
    (unit,) = pooled.meta["units"]
    rates = dict(tabulated_rates(1, unit["mix_rps_per_replica"], unit["pools"]))
    for row in table.to_dict("records"):
        rate = rates[row["pool_replicas"]]
        assert row["mix_rps_per_replica"] == pytest.approx(rate, abs=1e-6)
        assert row["utilisation_at_capacity"] == pytest.approx(rate / row["ceiling_rps_per_replica"], abs=1e-5)
        # each class keeps its analytic relative cost at every size
        assert row["max_rps_per_replica"] == pytest.approx(
            row["utilisation_at_capacity"] * row["class_ceiling_rps_per_replica"], rel=1e-4)
    for _, rows in table.groupby("traffic_class"):
        assert rows["max_rps_per_replica"].is_monotonic_increasing


def test_a_second_calibration_answers_every_pool_from_the_cache(tp1, profiles, cache_dir, pooled,
                                                                 monkeypatch) -> None:
    monkeypatch.setattr(calibrate_run, "calibrate_unit", never)
    monkeypatch.setattr(calibrate_run, "calibrate_pools", never)
    again = calibrate(tp1, profiles, cache_dir=cache_dir, larger_pools=SIZES, **LONE_TP1, **FAST)
    pd.testing.assert_frame_equal(again.table.drop(columns="cached"), pooled.table.drop(columns="cached"))


def test_placement_reads_every_pool_size_of_a_pooled_table(pooled) -> None:
    table = pooled.table.drop(columns="cached")
    read = validate_capacity(table)
    assert sorted(set(read["pool_replicas"])) == [1, *SIZES]
    assert read["max_rps_per_replica"].tolist() == table["max_rps_per_replica"].tolist()
    lone = table[table["pool_replicas"] == 1].drop(columns="pool_replicas")
    assert "pool_replicas" not in validate_capacity(lone).columns


def test_a_capacity_table_with_two_rows_for_one_pool_size_is_refused(pooled) -> None:
    table = pooled.table.drop(columns="cached")
    doubled = pd.concat([table, table.iloc[[0]]], ignore_index=True)
    with pytest.raises(InputError, match="pool of 1") as caught:
        validate_capacity(doubled)
    assert "pool_replicas" in caught.value.fix
    bad = table.assign(pool_replicas=table["pool_replicas"].astype(object))
    bad.loc[0, "pool_replicas"] = 0
    with pytest.raises(InputError, match="pool_replicas must be a whole number >= 1"):
        validate_capacity(bad)


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"), (" , ", "empty"), ("1,1", "must increase"), ("4,2", "must increase"), ("0,1", ">= 1"),
    ("1,two", "whole numbers"), ("1.5", "whole numbers"),
])
def test_bad_pool_size_lists_are_input_errors(text, message) -> None:
    with pytest.raises(InputError, match=message) as caught:
        parse_pool_sizes(text)
    assert caught.value.where == "--pool-sizes"
    assert check_pool_sizes((1, 2, 4)) == (1, 2, 4)


@pytest.mark.parametrize(("args", "message"), [
    (["--pool-sizes", "4,2"], "must increase"),
    (["--pool-sizes", ""], "empty"),
    (["--pool-sizes", "1,2", "--pool-replicas", "2"], "both give"),
    (["--pool-sizes", "1,100000"], "above the simulator's ceiling"),
])
def test_the_cli_refuses_a_bad_pool_size_list_and_writes_nothing(args, message, tmp_path) -> None:
    out = tmp_path / "cap.csv"
    result = CliRunner().invoke(cli.app, ["calibrate", "--scenario", str(REPO_ROOT / "scenarios/demo.toml"),
                                      "--out", str(out), "--models", "llama-3.1-8b", "--skus", "H100",
                                      "--default-settings", "--no-cache", *args])
    assert result.exit_code == 3, result.output
    assert message in " ".join(result.output.split())
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_the_calibration_json_keeps_each_pool_search(pooled, tmp_path) -> None:
    from planner.calibrate import calibration_files

    _, text = calibration_files(pooled)
    (unit,) = json.loads(text)["meta"]["units"]
    assert [p["replicas"] for p in unit["pools"]] == list(SIZES)
    assert "running minimum" in json.loads(text)["meta"]["pool_law"]


def test_a_pool_has_saturated_when_a_size_adds_under_five_percent_or_runs_at_the_ceiling():
    from planner.calibrate.pools import saturated

    assert not saturated(10.0, 11.0, 20.0)  # +10 %
    assert saturated(10.0, 10.4, 20.0)  # +4 %: larger pools take 10.4
    assert saturated(10.0, 19.2, 20.0)  # 96 % of the ceiling: nothing left to gain


def test_policies_calibrated_together_give_each_policy_its_own_calibration(tp1, profiles) -> None:
    """Two policies' units and larger pools run as one stream of tasks (a unit's pools start as its answer
    arrives, on two worker processes); each policy's result is the one it gets calibrated on its own."""
    from planner.calibrate import calibrate_together, plan_calibration
    from planner.calibrate.run import calibrate as calibrate_alone

    common = {"models": ["llama-3.1-8b"], "skus": ["H100"], "search_settings": False, "larger_pools": (2,),
              "duration_s": 300.0, "replications": 3, "seed": tp1.seeds.base}
    plans = [plan_calibration(tp1, profiles, policy=policy, **common) for policy in ("fcfs", "cmu")]
    together = calibrate_together(plans, engine="processes", workers=2)
    for policy, result in zip(("fcfs", "cmu"), together, strict=True):
        alone = calibrate_alone(tp1, profiles, policy=policy, engine="local", **common)
        assert result.meta["policy"] == policy and result.n_simulated == 1
        pd.testing.assert_frame_equal(result.table, alone.table)
        assert json.dumps(result.meta, sort_keys=True, default=str) == json.dumps(alone.meta, sort_keys=True,
                                                                                  default=str)

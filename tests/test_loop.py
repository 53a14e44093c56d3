"""The two-timescale loop: derating rules, windows, convergence after a failing round, and exit 5."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from loop_fixtures import small_history, small_scenario, write_small_inputs
from typer.testing import CliRunner

from planner import cli
from planner.catalog import load_catalog
from planner.forecast.run import forecast_history
from planner.loop import LoopSettings, run_loop
from planner.loop.derate import (
    MAX_FACTOR,
    MIN_FACTOR,
    Miss,
    derate,
    factor_for,
    find_misses,
)
from planner.loop.windows import loop_windows
from planner.placement.window import PlanningWindow
from planner.profiles import load_profiles
from planner.runs import RunHistory
from planner.workflows.calibrate import calibrate_with_cache as calibrate

runner = CliRunner()


def _miss(model: str = "m", klass: str = "interactive", shortfall: float = 1.25, units=(("H100", 1),)) -> Miss:
    return Miss("peak", "p", "r", model, klass, "e2e", 1.0, 1.0, shortfall, 0.0, tuple(units))


def _table() -> pd.DataFrame:
    return pd.DataFrame({"model": ["m", "m", "m", "n", "m"], "sku": ["H100", "H100", "L4", "H100", "H100"],
                         "tp_degree": [1, 1, 1, 1, 2],
                         "traffic_class": ["interactive", "batch", "interactive", "interactive", "interactive"],
                         "max_rps_per_replica": [10.0, 4.0, 2.0, 8.0, 30.0], "source": ["calibrated"] * 5})


# --------------------------------------------------------------------------- derating rules
def test_factor_is_inverse_shortfall_within_bounds():
    assert factor_for(1.25) == pytest.approx(0.8)
    assert factor_for(1.01) == MAX_FACTOR  # always at least a 5 % step
    assert factor_for(10.0) == MIN_FACTOR  # never more than halving in one round
    assert factor_for(math.inf) == MIN_FACTOR  # rejections: no finite shortfall


def test_derate_touches_only_the_missed_model_sku_class_and_keeps_the_largest_correction():
    table, changes = derate(_table(), [_miss(shortfall=1.25), _miss(shortfall=2.0)])
    assert table["max_rps_per_replica"].tolist() == [5.0, 4.0, 2.0, 8.0, 30.0]  # not the pool's absent TP2 unit
    assert [(c["model"], c["sku"], c["tp_degree"], c["traffic_class"], c["factor"]) for c in changes] == [
        ("m", "H100", 1, "interactive", 0.5)]
    assert table["source"].iloc[0].endswith("derated by the loop") and table["source"].iloc[1] == "calibrated"


def test_derate_of_a_pool_without_table_rows_changes_nothing():
    table, changes = derate(_table(), [_miss(units=(("B200", 1), ("H100", 4)))])
    assert changes == [] and table.equals(_table())


def test_find_misses_takes_the_worse_metric_and_skips_met_rows():
    per_class = pd.DataFrame([
        {"region": "r", "model": "m", "traffic_class": "interactive", "slo_met": False, "slo_ttft_p99_ms": 900.0,
         "slo_ttft_target_ms": 800.0, "slo_e2e_p99_ms": 60000.0, "slo_e2e_target_ms": 40000.0,
         "rejected_fraction": 0.0},
        {"region": "r", "model": "m", "traffic_class": "batch", "slo_met": True, "slo_ttft_p99_ms": 1.0,
         "slo_ttft_target_ms": 2.0, "slo_e2e_p99_ms": 1.0, "slo_e2e_target_ms": 2.0, "rejected_fraction": 0.0},
    ])
    (miss,) = find_misses(per_class, "peak", "Mon00", {("r", "m"): (("H100", 2),)})
    assert (miss.metric, miss.shortfall, miss.units) == ("e2e", pytest.approx(1.5), (("H100", 2),))
    assert miss.to_dict()["units"] == ["H100 x2"]


@pytest.mark.parametrize(("tpot_p99", "expected"), [
    (90.0, ("tpot", 1.8)),  # TPOT 90 ms against 50: worse than e2e's 1.5
    (60.0, ("e2e", 1.5)),   # TPOT 60 ms against 50: a miss, but e2e's is worse
])
def test_find_misses_takes_the_worst_of_three_metrics(tpot_p99, expected):
    row = {"region": "r", "model": "m", "traffic_class": "interactive", "slo_met": False, "slo_ttft_p99_ms": 700.0,
           "slo_ttft_target_ms": 800.0, "slo_tpot_p99_ms": tpot_p99, "slo_tpot_target_ms": 50.0,
           "slo_e2e_p99_ms": 60000.0, "slo_e2e_target_ms": 40000.0, "rejected_fraction": 0.0}
    (miss,) = find_misses(pd.DataFrame([row]), "peak", "Mon00", {("r", "m"): (("H100", 1),)})
    assert (miss.metric, miss.shortfall) == (expected[0], pytest.approx(expected[1]))
    assert f"interactive {expected[0]} p99" in miss.describe()


def test_a_metric_without_target_is_never_the_miss():
    """TPOT is far above anything, but the class sets no TPOT SLO (empty target): TTFT is the miss."""
    row = {"region": "r", "model": "m", "traffic_class": "interactive", "slo_met": False, "slo_ttft_p99_ms": 1000.0,
           "slo_ttft_target_ms": 800.0, "slo_tpot_p99_ms": 1e9, "slo_tpot_target_ms": math.nan,
           "slo_e2e_p99_ms": 100.0, "slo_e2e_target_ms": math.nan, "rejected_fraction": 0.0}
    (miss,) = find_misses(pd.DataFrame([row]), "peak", "Mon00", {("r", "m"): (("H100", 1),)})
    assert (miss.metric, miss.shortfall, miss.target_ms) == ("ttft", pytest.approx(1.25), 800.0)
    # missed with no set metric over its target: rejections, on the first metric the class sets
    only_tpot = {**row, "slo_ttft_target_ms": math.nan, "slo_tpot_target_ms": 2e9}
    (miss,) = find_misses(pd.DataFrame([only_tpot]), "peak", "Mon00", {("r", "m"): (("H100", 1),)})
    assert (miss.metric, miss.shortfall, miss.target_ms) == ("tpot", math.inf, 2e9)


def test_windows_are_the_peak_and_a_different_trough():
    plan = pd.DataFrame({"period": ["a", "b", "c"], "region": "x:y", "sku": "H100", "model": "m", "tier": "reserved",
                         "replicas": 1, "gpus": 1, "usd": 1.0})
    flows = pd.DataFrame({"period": ["a", "b", "c"], "origin": "o", "region": "x:y", "model": "m",
                          "traffic_class": "k", "rps": [2.0, 5.0, 1.0]})
    windows = loop_windows(plan, flows)
    assert [(w.name, w.period) for w in windows] == [("fleet peak + pool peak", "b"), ("pool trough", "c")]
    assert windows[1].demand["rps"].tolist() == [1.0]
    assert [w.name for w in loop_windows(plan.iloc[:1], flows.iloc[:1])] == ["fleet peak + pool peak + pool trough"]


# --------------------------------------------------------------------------- the loop itself
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    scenario = small_scenario()
    forecast = forecast_history(small_history(), horizon_hours=24, quantiles=[0.5, 0.9, 0.95, 0.99],
                                backtest=False, engine="local").forecast
    cache = tmp_path_factory.mktemp("calibration")
    table = calibrate(scenario, load_profiles(), engine="local", cache_dir=cache, search_settings=False).table
    return scenario, forecast, table, cache


def _settings(scenario, rounds: int = 4) -> LoopSettings:
    return LoopSettings(max_rounds=rounds, periods="hourly", time_limit_s=30, gap=0.01, sim_duration_s=1200,
                        sim_replications=3, engine="local", seed=scenario.seeds.base)


@pytest.mark.slow
def test_loop_converges_on_a_scenario_built_to_fail_the_first_round(small):
    scenario, forecast, table, cache = small
    overstated = table.assign(max_rps_per_replica=table["max_rps_per_replica"] * 4)  # 4x what the SLOs allow
    result = run_loop(scenario, forecast, load_catalog(), load_profiles(), _settings(scenario), capacity=overstated)
    first, last = result.rounds[0], result.rounds[-1]
    assert first["failed"] > 0 and first["changes"], "the overstated table must miss the SLO in round 1"
    returned = result.rounds[result.plan_round - 1]  # the last round, or the last that met before a raise missed
    assert result.converged and returned["failed"] == 0 and len(result.rounds) >= 2
    assert (result.plan_round == len(result.rounds)) == (last["failed"] == 0)
    changes = [c for r in result.rounds for c in r["changes"]]
    assert all(c["after_rps"] < c["before_rps"] for c in changes if c["kind"] != "raise")
    ceiling = overstated.set_index(["model", "sku", "traffic_class"])["max_rps_per_replica"]
    assert all(c["before_rps"] < c["after_rps"] <= ceiling[(c["model"], c["sku"], c["traffic_class"])]
               for c in changes if c["kind"] == "raise")
    assert [r["round"] for r in result.rounds] == list(range(1, len(result.rounds) + 1))
    assert first["gpus_peak"] < returned["gpus_peak"], "the correction must buy capacity"
    assert result.slo["slo_met"].all()
    assert set(result.slo["window"]) == {"fleet peak + pool peak", "pool trough"}  # one pool: its peak is the fleet's
    # The final coefficients sit at or below the overstated ones (a class that never missed keeps its own), at
    # least one was derated, and none is lower than half of the calibrated one.
    final = result.capacity.set_index(["model", "sku", "traffic_class"])["max_rps_per_replica"]
    start = table.set_index(["model", "sku", "traffic_class"])["max_rps_per_replica"]
    assert (final <= 4 * start).all() and (final < 4 * start).any() and (final >= 0.5 * start - 1e-9).all()


def test_a_loop_without_rounds_is_refused_before_any_work(small):
    scenario, forecast, table, cache = small
    with pytest.raises(ValueError, match="at least one round"):
        run_loop(scenario, forecast, load_catalog(), load_profiles(), _settings(scenario, rounds=0), capacity=table)


@pytest.mark.slow
def test_every_round_of_the_loop_plans_the_window_it_was_given(small):
    scenario, forecast, table, cache = small
    overstated = table.assign(max_rps_per_replica=table["max_rps_per_replica"] * 4)  # round 1 fails, round 2 runs
    first = pd.Timestamp(str(forecast["ts"].min()))
    window = PlanningWindow(first + pd.Timedelta(hours=12), first + pd.Timedelta(hours=24))
    result = run_loop(scenario, forecast, load_catalog(), load_profiles(), _settings(scenario), capacity=overstated,
                      planning_window=window)
    assert len(result.rounds) >= 2 and result.converged
    assert result.placement.meta["demand"]["forecast_hours_used"] == 12, "the last round's plan covers the window"
    assert result.placement.periods["first_ts"].tolist() == [f"{t:%Y-%m-%dT%H:%M:%SZ}" for t in window.hour_starts()]


@pytest.mark.slow
def test_plan_cli_exits_5_naming_what_fails_and_still_writes_the_plan(small, tmp_path):
    _, _, table, cache = small
    scenario, history = write_small_inputs(tmp_path)
    capacity = tmp_path / "overstated.csv"
    table.assign(max_rps_per_replica=table["max_rps_per_replica"] * 4).to_csv(capacity, index=False)
    out = tmp_path / "plan"
    result = runner.invoke(cli.app, ["plan", "--scenario", str(scenario), "--history", str(history),
                                     "--out", str(out), "--capacity", str(capacity), "--max-rounds", "1",
                                     "--periods", "hourly", "--sim-duration", "20min", "--engine", "local"])
    assert result.exit_code == 5, result.output
    assert "still fails after 1 round" in result.output and "us-east-1 / llama-3.1-8b" in result.output
    rounds = json.loads((out / "rounds.json").read_text())
    assert rounds["converged"] is False and rounds["still_failing"] and len(rounds["rounds"]) == 1
    assert (out / "plan.csv").exists() and (out / "slo.csv").exists()
    (run,) = RunHistory().runs(command="plan")
    assert run["exit_code"] == 5 and run["figures"]["converged"] is False


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in ("solve_time_s", "seconds")}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


@pytest.mark.slow
def test_plan_cli_calibrates_converges_and_records_the_run(tmp_path):
    scenario, history = write_small_inputs(tmp_path)
    out = tmp_path / "plan"
    args = ["plan", "--scenario", str(scenario), "--history", str(history), "--out", str(out), "--periods", "hourly",
            "--sim-duration", "20min", "--engine", "local", "--cache-dir", str(tmp_path / "cache"), "--json"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["capacity.calibrated.csv", "capacity.csv", "forecast.csv", "forecast.meta.json", "plan.csv",
                     "plan.flows.csv", "plan.json", "rounds.json", "slo.csv"]
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert runner.invoke(cli.app, args).exit_code == 0  # now every calibration comes from the cache
    again = {p.name: p.read_bytes() for p in out.iterdir()}
    plan_json = first.pop("plan.json"), again.pop("plan.json")
    assert again == first, "same inputs and seed must give byte-identical outputs, cache or not"
    assert _without_timings(json.loads(plan_json[0])) == _without_timings(json.loads(plan_json[1]))
    runs = RunHistory().runs(command="plan")
    assert len(runs) == 2 and all(r["exit_code"] == 0 for r in runs)
    figures = runs[0]["figures"]
    assert figures["converged"] is True and figures["plan_cost_usd"] > 0 and figures["total_gpus"] >= 1
    assert set(runs[0]["input_hashes"]) >= {"scenario", "history"}
    assert not RunHistory().plan_for(runs[0]["run_id"]).empty


def test_capacity_summary_names_each_model_s_best_unit_per_gpu_and_its_share_of_the_ceiling():
    from types import SimpleNamespace

    from planner.loop.compare import capacity_summary

    rows = [  # two rows (classes) per unit; the summary reads each unit once
        ("llama-3.1-8b", "H100", 1, 20.0, 0.8), ("llama-3.1-8b", "H100", 1, 20.0, 0.8),
        ("llama-3.1-8b", "H100", 2, 12.0, 0.9), ("llama-3.1-8b", "L40S", 1, 9.0, 0.95),
        ("llama-3.1-70b", "H100", 4, 0.75, 0.5), ("llama-3.1-70b", "H200", 4, 1.25, 0.625),
    ]
    table = pd.DataFrame(rows, columns=["model", "sku", "tp_degree", "mix_rps_per_gpu", "utilisation_at_capacity"])
    result = SimpleNamespace(calibration=SimpleNamespace(table=table))
    assert capacity_summary(result) == ("llama-3.1-70b H200 TP4 1.25 req/s/GPU at 62 % of ceiling; "
                                        "llama-3.1-8b H100 TP1 20 req/s/GPU at 80 % of ceiling")
    assert capacity_summary(SimpleNamespace(calibration=None)) == ""  # a capacity table given: nothing calibrated

"""`planner place` then `planner simulate` through the CLI, and exit 4 with a diagnosis when infeasible."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode

runner = CliRunner()
PLAN_COLUMNS = ["period", "region", "sku", "tp_degree", "model", "tier", "replicas", "gpus", "usd", "engine",
                "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold"]


@pytest.fixture
def six_hours(repo_root, tmp_path):
    """The demo scenario over the six hours the forecast covers."""
    path = tmp_path / "demo_6h.toml"
    path.write_text((repo_root / "scenarios/demo.toml").read_text().replace('horizon = "14d"', 'horizon = "6h"'))
    return path


@pytest.fixture
def forecast_file(tmp_path):
    """Six hours of a flat forecast for the demo scenario's origins, models and classes (requests per hour)."""
    rows = []
    hours = pd.date_range("2026-11-02T16:00:00Z", periods=6, freq="h")
    rate = {"interactive": 7200.0, "standard": 3600.0, "batch": 1800.0}
    for origin in ("us-east", "us-west", "eu-west", "ap-northeast"):
        for model in ("llama-3.1-8b", "llama-3.1-70b"):
            for cls, per_hour in rate.items():
                for i, ts in enumerate(hours):
                    level = per_hour * (1.0 + 0.1 * i)
                    rows.append({"region": origin, "model": model, "traffic_class": cls,
                                 "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "mean": level, "q50": level,
                                 "q90": 1.2 * level, "q95": 1.3 * level, "q99": 1.5 * level,
                                 "model_used": "test"})
    path = tmp_path / "forecast.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_place_writes_plan_json_and_flows_then_simulate_reads_them(six_hours, forecast_file, tmp_path):
    scenario = str(six_hours)
    plan = tmp_path / "plan.csv"
    result = runner.invoke(cli.app, ["place", "--scenario", scenario, "--forecast", str(forecast_file),
                                     "--out", str(plan), "--time-limit", "60", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["meta"]["status"] in ("optimal", "feasible_within_gap")
    frame = pd.read_csv(plan)
    assert list(frame.columns) == PLAN_COLUMNS
    assert (frame["replicas"] > 0).all() and (frame["usd"] >= 0).all()
    meta = json.loads(plan.with_suffix(".json").read_text())
    assert set(meta["inputs_sha256"]) >= {"scenario", "forecast"}
    assert (tmp_path / "plan.flows.csv").exists()
    assert (frame["gpus"] == frame["replicas"] * frame["tp_degree"]).all()
    deployed = {(d["model"], d["sku"], d["tp_degree"]) for d in meta["deployments"]}
    assert deployed == set(frame[["model", "sku", "tp_degree"]].itertuples(index=False, name=None))
    assert all(f"--tensor-parallel-size {d['tp_degree']} " in d["launch"] for d in meta["deployments"])
    reserved = frame[frame["tier"] == "reserved"]
    made = meta["reserved"]["commitments"]
    assert sum(c["gpus"] for c in made) == reserved.groupby("period")["gpus"].sum().max()
    horizon_hours = meta["reserved"]["horizon_hours"]
    assert meta["reserved"]["commitments_total_usd"] == pytest.approx(
        reserved["usd"].sum() * meta["reserved"]["term_hours"] / horizon_hours, abs=0.05)

    sim = runner.invoke(cli.app, ["simulate", "--scenario", scenario, "--plan", str(plan),
                                  "--out", str(tmp_path / "sim.csv"), "--sim-duration", "5min",
                                  "--replications", "2", "--json"])
    sim_payload = json.loads(sim.stdout)
    assert sim_payload["rows"] and (tmp_path / "sim.csv").exists()
    # The analytic capacity may leave a class short; simulate then says so with exit 5, after writing.
    assert sim.exit_code == (ExitCode.OK if sim_payload["all_met"] else ExitCode.SLO_FAILED), sim.output


def test_quota_too_small_exits_4_and_names_quota(six_hours, forecast_file, tmp_path):
    text = six_hours.read_text()
    assert "quotas = {}" in text
    starved = tmp_path / "starved.toml"
    starved.write_text(text.replace("quotas = {}",
                                    "quotas = { L4 = 0, L40S = 0, A100-80GB = 0, H100 = 1, H200 = 0 }", 1))
    plan = tmp_path / "plan.csv"
    result = runner.invoke(cli.app, ["place", "--scenario", str(starved), "--forecast", str(forecast_file),
                                     "--out", str(plan)])
    assert result.exit_code == ExitCode.INFEASIBLE, result.output
    assert "quota" in result.output.lower()
    assert not plan.exists()


def _last_run(command: str) -> dict:
    from planner.runs import RunHistory

    return RunHistory().latest(command)


def test_place_without_a_capacity_table_says_the_plan_is_not_slo_checked(six_hours, forecast_file, tmp_path):
    """Analytic capacities have never been simulated: the screen, the plan JSON and the run history say so."""
    plan = tmp_path / "plan.csv"
    result = runner.invoke(cli.app, ["place", "--scenario", str(six_hours),
                                     "--forecast", str(forecast_file), "--out", str(plan)])
    assert result.exit_code == 0, result.output
    meta = json.loads(plan.with_suffix(".json").read_text())
    assert meta["slo_checked"] is False and meta["capacity_source"].startswith("analytic")
    assert any("not SLO-checked" in w for w in meta["warnings"])
    assert "not SLO-checked" in result.stderr
    total = meta["reserved"]["commitments_total_usd"]
    assert total > 0 and "over the term" in result.stderr and f"${total:,.0f}" in " ".join(result.stderr.split())
    run = _last_run("place")
    assert run["figures"]["slo_checked"] is False
    assert any("not SLO-checked" in w for w in run["figures"]["warnings"])


def test_place_with_a_capacity_table_has_no_analytic_warning(six_hours, forecast_file, tmp_path):
    from planner.placement.capacity import analytic_capacity
    from planner.placement.place import analytic_lengths
    from planner.profiles import load_profiles
    from planner.scenario import load_scenario, usable_profiles

    scenario = load_scenario(six_hours)
    table = analytic_capacity(usable_profiles(scenario, load_profiles()), analytic_lengths(scenario)[0],
                              kv_fraction=scenario.policy.admission.kv_fraction, policy=scenario.policy.name)
    capacity = tmp_path / "capacity.csv"
    table.to_csv(capacity, index=False)
    plan = tmp_path / "plan.csv"
    result = runner.invoke(cli.app, ["place", "--scenario", str(six_hours),
                                     "--forecast", str(forecast_file), "--capacity", str(capacity),
                                     "--out", str(plan), "--json"])
    assert result.exit_code == 0, result.output
    meta = json.loads(plan.with_suffix(".json").read_text())
    assert meta["slo_checked"] is True and meta["warnings"] == []
    assert "not SLO-checked" not in result.stderr
    assert "warnings" not in _last_run("place")["figures"]


def test_place_defaults_are_the_plan_loops(repo_root):
    """`planner place` and `planner plan` (and `report`) share periods, node limit, safety net and gap."""
    import typer.main

    commands = {c.name: c for c in typer.main.get_command(cli.app).commands.values()}
    defaults = {name: {p.name: p.default for p in commands[name].params} for name in ("place", "plan", "report")}
    for option in ("periods", "solver", "node_limit", "time_limit", "gap"):
        assert defaults["place"][option] == defaults["plan"][option] == defaults["report"][option], option
    assert defaults["place"]["periods"] == "how:4"


def test_place_charges_each_pool_the_capacity_of_its_size(six_hours, forecast_file, tmp_path):
    from planner.placement.capacity import analytic_capacity
    from planner.placement.place import analytic_lengths
    from planner.profiles import load_profiles
    from planner.scenario import load_scenario, usable_profiles

    scenario = load_scenario(six_hours)
    lone = analytic_capacity(usable_profiles(scenario, load_profiles()), analytic_lengths(scenario)[0],
                             kv_fraction=scenario.policy.admission.kv_fraction, policy=scenario.policy.name)
    pooled = pd.concat([lone.assign(pool_replicas=1),
                        lone.assign(pool_replicas=2, max_rps_per_replica=1.5 * lone["max_rps_per_replica"])])
    plans = {}
    for name, table in (("lone", lone), ("pooled", pooled)):
        capacity, plan = tmp_path / f"{name}.capacity.csv", tmp_path / f"{name}.plan.csv"
        table.to_csv(capacity, index=False)
        result = runner.invoke(cli.app, ["place", "--scenario", str(six_hours), "--forecast", str(forecast_file),
                                         "--capacity", str(capacity), "--out", str(plan), "--json"])
        assert result.exit_code == 0, result.output
        plans[name] = (pd.read_csv(plan), json.loads(plan.with_suffix(".json").read_text()))
    (lone_plan, lone_meta), (pooled_plan, pooled_meta) = plans["lone"], plans["pooled"]
    assert pooled_meta["warnings"] == [] and pooled_meta["check"]["ok"]
    gains = pooled_meta["capacity"]["pool_gains"]
    assert gains and all(steps == [[2, pytest.approx(1.5, rel=1e-5)]] for steps in gains.values())
    # pools of two or more carry 1.5x per replica: fewer GPUs, never more
    assert pooled_plan["gpus"].sum() < lone_plan["gpus"].sum()
    assert pooled_meta["cost_usd"]["total"] < lone_meta["cost_usd"]["total"]

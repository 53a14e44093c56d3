"""`planner simulate` through the CLI: SLO table and JSON, outputs, and clear errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode, InputError
from planner.runs import RunHistory

runner = CliRunner()
P = "2026-11-02T18:00:00Z"


def write_plan_files(folder, eu_sku: str = "H100"):
    """A two-pool plan and its flows; with H100 in Europe every class meets its SLO, with L4 interactive misses."""
    plan = pd.DataFrame([
        {"period": P, "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-70b", "tier": "on_demand",
         "replicas": 2, "gpus": 8, "usd": 0.0},
        {"period": P, "region": "gcp:europe-west4", "sku": eu_sku, "model": "llama-3.1-8b", "tier": "on_demand",
         "replicas": 2, "gpus": 2, "usd": 0.0},
    ])
    flows = pd.DataFrame(
        [{"period": P, "origin": "us-east", "region": "aws:us-east-1", "model": "llama-3.1-70b",
          "traffic_class": k, "rps": r} for k, r in (("interactive", 1.0), ("standard", 0.5), ("batch", 0.2))]
        + [{"period": P, "origin": "eu-west", "region": "gcp:europe-west4", "model": "llama-3.1-8b",
            "traffic_class": k, "rps": r} for k, r in (("interactive", 0.5), ("standard", 0.2))])
    plan_path = folder / "plan.csv"
    plan.to_csv(plan_path, index=False)
    flows.to_csv(folder / "plan.flows.csv", index=False)
    return plan_path


@pytest.fixture
def plan_files(tmp_path):
    return write_plan_files(tmp_path)


def test_simulate_prints_slo_table_as_json_and_writes_outputs(repo_root, plan_files, tmp_path):
    out = tmp_path / "sim.csv"
    args = ["simulate", "--scenario", str(repo_root / "scenarios/demo.toml"), "--plan", str(plan_files),
            "--out", str(out), "--sim-duration", "5min", "--replications", "2", "--seed", "3", "--json"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["period"] == P and payload["all_met"] is True
    assert {(row["region"], row["traffic_class"]) for row in payload["rows"]} >= {
        ("aws:us-east-1", "interactive"), ("gcp:europe-west4", "standard")}
    first = out.read_bytes()
    assert runner.invoke(cli.app, args).exit_code == 0
    assert out.read_bytes() == first  # same seed, byte-identical results


def test_a_missed_slo_exits_5_after_writing_and_names_each_miss(repo_root, tmp_path):
    plan = write_plan_files(tmp_path, eu_sku="L4")
    out = tmp_path / "sim.csv"
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(repo_root / "scenarios/demo.toml"), "--plan",
                                     str(plan), "--out", str(out), "--sim-duration", "5min", "--replications", "2",
                                     "--seed", "3", "--json"])
    assert result.exit_code == ExitCode.SLO_FAILED, result.output
    payload = json.loads(result.stdout)
    assert payload["all_met"] is False and out.exists() and out.with_suffix(".json").exists()
    missed = {(r["region"], r["model"], r["traffic_class"]) for r in payload["rows"] if not r["slo_met"]}
    assert missed == {("gcp:europe-west4", "llama-3.1-8b", "interactive")}
    message = " ".join(result.stderr.split())
    assert "error (exit 5)" in message
    assert "gcp:europe-west4 / llama-3.1-8b / interactive ttft_p99" in message
    (run,) = RunHistory().runs(command="simulate")  # SLOFailedError ends the run: its message is recorded
    assert run["exit_code"] == ExitCode.SLO_FAILED and "llama-3.1-8b / interactive ttft_p99" in run["message"]


def test_a_model_s_own_tpot_slo_is_checked_and_its_miss_named(repo_root, plan_files, tmp_path):
    """llama-3.1-70b overrides interactive with a TPOT SLO no decode step meets; llama-3.1-8b keeps the class's SLOs."""
    demo = (repo_root / "scenarios/demo.toml").read_text()
    override = "[models.slos.interactive]"
    assert demo.count(override) == 1, "the demo's llama-3.1-70b overrides its interactive SLOs"
    scenario = tmp_path / "tpot.toml"
    scenario.write_text(demo.replace(override, override + "\ntpot_p99_ms = 1"))
    out = tmp_path / "sim.csv"
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(scenario), "--plan", str(plan_files), "--out",
                                     str(out), "--sim-duration", "5min", "--replications", "2", "--seed", "3",
                                     "--json"])
    assert result.exit_code == ExitCode.SLO_FAILED, result.output
    rows = {(r["model"], r["traffic_class"]): r for r in json.loads(result.stdout)["rows"]}
    overridden = rows[("llama-3.1-70b", "interactive")]
    assert overridden["slo_tpot_target_ms"] == 1.0 and not overridden["slo_met"]
    assert overridden["slo_ttft_verdict"] == "met" and overridden["slo_tpot_verdict"] in ("missed", "uncertain")
    assert rows[("llama-3.1-8b", "interactive")]["slo_tpot_target_ms"] is None
    assert rows[("llama-3.1-8b", "interactive")]["slo_tpot_verdict"] == "not_set"
    assert [k for k, r in rows.items() if not r["slo_met"]] == [("llama-3.1-70b", "interactive")]
    message = " ".join(result.stderr.split())
    assert "aws:us-east-1 / llama-3.1-70b / interactive tpot_p99 (" in message and "ms > 1 ms" in message
    assert "ttft_p99" not in message
    table = pd.read_csv(out)
    assert {"slo_tpot_p99_ms", "slo_tpot_target_ms", "slo_tpot_met", "slo_tpot_verdict"} <= set(table.columns)


def test_missing_flows_exits_3_with_hint(repo_root, plan_files, tmp_path):
    (tmp_path / "plan.flows.csv").unlink()
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(repo_root / "scenarios/demo.toml"),
                                     "--plan", str(plan_files), "--out", str(tmp_path / "sim.csv")])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "flows" in result.output


def test_bad_duration_exits_3(repo_root, plan_files, tmp_path):
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(repo_root / "scenarios/demo.toml"),
                                     "--plan", str(plan_files), "--out", str(tmp_path / "s.csv"),
                                     "--sim-duration", "forever"])
    assert result.exit_code == ExitCode.INVALID_INPUT


def test_hand_written_plan_with_forecast_routes_demand_by_residency(repo_root, tmp_path):
    """Today's fleet, written by hand, checked against a forecast hour: EU demand must stay in the EU."""
    plan = pd.DataFrame([
        {"period": "now", "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-8b", "tier": "reserved",
         "replicas": 2, "gpus": 2, "usd": 0.0},
        {"period": "now", "region": "gcp:europe-west4", "sku": "H100", "model": "llama-3.1-8b", "tier": "on_demand",
         "replicas": 1, "gpus": 1, "usd": 0.0},
    ])
    plan_path = tmp_path / "fleet.csv"
    plan.to_csv(plan_path, index=False)
    rows = []
    # The forecast covers every origin and model of the scenario and both hours of its horizon;
    # demand only from us-east and eu-west for llama-3.1-8b, the fleet's model.
    for origin in ("us-east", "us-west", "eu-west", "ap-northeast"):
        for model in ("llama-3.1-8b", "llama-3.1-70b"):
            for cls, per_hour in (("interactive", 3600.0), ("standard", 1800.0), ("batch", 720.0)):
                for ts, scale in (("2026-11-02T17:00:00Z", 1.0), ("2026-11-02T18:00:00Z", 2.0)):
                    served = origin in ("us-east", "eu-west") and model == "llama-3.1-8b"
                    q = per_hour * scale if served else 0.0
                    rows.append({"region": origin, "model": model, "traffic_class": cls, "ts": ts,
                                 "mean": q, "q50": q, "q90": q, "q95": q, "q99": q, "model_used": "test"})
    forecast = tmp_path / "forecast.csv"
    pd.DataFrame(rows).to_csv(forecast, index=False)
    scenario = tmp_path / "two_hours.toml"
    scenario.write_text((repo_root / "scenarios/demo.toml").read_text().replace('horizon = "14d"', 'horizon = "2h"'))
    out = tmp_path / "sim.csv"
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(scenario),
                                     "--plan", str(plan_path), "--forecast", str(forecast), "--out", str(out),
                                     "--sim-duration", "5min", "--replications", "2", "--json"])
    assert result.exit_code == 0, result.output
    per_class = pd.read_csv(out)
    assert set(per_class["region"]) <= {"aws:us-east-1", "gcp:europe-west4"}
    eu = per_class[per_class["region"] == "gcp:europe-west4"]
    assert not eu.empty  # eu-west's traffic (residency eu) is simulated in the EU region


def test_route_forecast_splits_by_gpus_and_respects_residency(repo_root):
    from planner.scenario import load_scenario
    from planner.sim.forecast_demand import route_forecast

    scenario = load_scenario(repo_root / "scenarios/demo.toml")
    plan = pd.DataFrame([
        {"region": "aws:us-east-1", "model": "llama-3.1-8b", "gpus": 3},
        {"region": "gcp:us-central1", "model": "llama-3.1-8b", "gpus": 1},
        {"region": "gcp:europe-west4", "model": "llama-3.1-8b", "gpus": 4},
    ])
    forecast = pd.DataFrame([
        {"region": "us-east", "model": "llama-3.1-8b", "traffic_class": "standard", "ts": "T", "q95": 3600.0},
        {"region": "eu-west", "model": "llama-3.1-8b", "traffic_class": "standard", "ts": "T", "q95": 7200.0},
    ])
    demand = route_forecast(scenario, plan, forecast, "q95", "T").set_index("region")["rps"]
    allowed_us = scenario.eligible_serving("us-east", "standard")
    us_gpus = sum(g for r, g in zip(plan["region"], plan["gpus"], strict=True) if r in allowed_us)
    assert demand["aws:us-east-1"] == pytest.approx(3 / us_gpus)
    # eu-west may only be served in the EU: all of its 2 req/s land in europe-west4.
    eu_from_us = 4 / us_gpus if "gcp:europe-west4" in allowed_us else 0.0
    assert demand["gcp:europe-west4"] == pytest.approx(2.0 + eu_from_us)
    assert demand.sum() == pytest.approx(3.0)


def test_window_trough_simulates_the_quietest_period_with_demand_as_the_plan_loop_does(repo_root, tmp_path):
    """`--window trough` picks the period the plan loop checks as its trough: least demand, but above zero."""
    from planner.loop.windows import POOL_TROUGH, loop_windows

    one_period = write_plan_files(tmp_path)
    plan, flows = pd.read_csv(one_period), pd.read_csv(tmp_path / "plan.flows.csv")
    periods = {"2026-11-02T18:00:00Z": 1.0, "2026-11-03T03:00:00Z": 0.5, "2026-11-03T04:00:00Z": 0.0,
               "2026-11-03T05:00:00Z": 0.75}
    plan = pd.concat([plan.assign(period=p) for p in periods], ignore_index=True)
    flows = pd.concat([flows.assign(period=p, rps=flows["rps"] * scale) for p, scale in periods.items()],
                      ignore_index=True)
    plan.to_csv(one_period, index=False)
    flows.to_csv(tmp_path / "plan.flows.csv", index=False)
    out = tmp_path / "trough.csv"
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(repo_root / "scenarios/demo.toml"),
                                     "--plan", str(one_period), "--out", str(out), "--window", "trough",
                                     "--sim-duration", "5min", "--replications", "2", "--seed", "3", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["period"] == "2026-11-03T03:00:00Z"  # not the empty 04:00, not the busier 05:00
    assert [w.period for w in loop_windows(plan, flows) if POOL_TROUGH in w.name] == [payload["period"]]
    offered = pd.read_csv(out).groupby("traffic_class")["offered_rps"].sum()
    assert offered["interactive"] == pytest.approx((1.0 + 0.5) * 0.5)  # both pools' interactive rate, halved


def test_forecast_trough_is_the_quietest_hour_with_demand(repo_root):
    """With --forecast, `--window trough` is the hour of least total demand above zero (the same rule as flows)."""
    from planner.scenario import load_scenario
    from planner.sim.forecast_demand import forecast_hour

    scenario = load_scenario(repo_root / "scenarios/demo.toml")
    totals = {"2026-11-02T17:00:00Z": 9.0, "2026-11-02T18:00:00Z": 0.0, "2026-11-02T19:00:00Z": 4.0,
              "2026-11-02T20:00:00Z": 4.0}
    forecast = pd.DataFrame([{"region": "us-east", "model": "llama-3.1-8b", "traffic_class": "standard", "ts": ts,
                              "q95": q} for ts, q in totals.items()])
    assert forecast_hour(forecast, "q95", "trough", scenario) == "2026-11-02T19:00:00Z"
    assert forecast_hour(forecast, "q95", "peak", scenario) == "2026-11-02T17:00:00Z"
    with pytest.raises(InputError, match="no trough"):
        forecast_hour(forecast.assign(q95=0.0), "q95", "trough", scenario)

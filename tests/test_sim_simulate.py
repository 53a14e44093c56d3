"""``simulate_plan``, ``select_window`` and the result writer (the `planner simulate` core)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.profiles import load_profiles
from planner.scenario import load_scenario
from planner.sim.simulate import select_window, simulate_plan
from planner.workflows.files import write_simulation_outputs

P = "2026-11-02T18:00:00Z"


@pytest.fixture(scope="module")
def inputs(repo_root_module):
    scenario = load_scenario(repo_root_module / "scenarios" / "demo.toml")
    plan = pd.DataFrame([
        {"period": P, "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-70b", "tier": "on_demand",
         "replicas": 3, "gpus": 12, "usd": 0.0},
        {"period": P, "region": "aws:us-east-1", "sku": "A100-80GB", "model": "llama-3.1-70b", "tier": "reserved",
         "replicas": 1, "gpus": 4, "usd": 0.0},
        {"period": P, "region": "gcp:europe-west4", "sku": "L4", "model": "llama-3.1-8b", "tier": "on_demand",
         "replicas": 2, "gpus": 2, "usd": 0.0},
    ])
    flows = pd.DataFrame(
        [{"period": P, "origin": "us-east", "region": "aws:us-east-1", "model": "llama-3.1-70b", "traffic_class": k,
          "rps": r} for k, r in (("interactive", 1.5), ("standard", 1.0), ("batch", 0.5))]
        + [{"period": P, "origin": "eu-west", "region": "gcp:europe-west4", "model": "llama-3.1-8b",
            "traffic_class": k, "rps": r} for k, r in (("interactive", 1.0), ("standard", 0.5))]
        + [{"period": P, "origin": "eu-west", "region": "gcp:us-central1", "model": "llama-3.1-8b",
            "traffic_class": "batch", "rps": 0.2}])
    return scenario, plan, flows


@pytest.fixture(scope="module")
def repo_root_module():
    from conftest import REPO_ROOT

    return REPO_ROOT


@pytest.fixture(scope="module")
def result(inputs):
    scenario, plan, flows = inputs
    _, demand = select_window(plan, flows, "peak")
    return simulate_plan(scenario, plan, demand, load_profiles(), load_catalog(), duration_s=400.0,
                         replications=2, seed=5)


def test_one_row_per_region_model_class_with_slo_verdicts(result):
    pc = result.per_class
    assert len(pc) == 9  # 3 pools x the 3 classes with traffic: long-context has none, so no row and no verdict
    assert "long-context" not in set(pc["traffic_class"])
    assert {"model": "llama-3.1-8b", "traffic_class": "long-context"} in result.meta["no_traffic"]
    assert set(pc["slo_ttft_verdict"]) <= {"met", "missed", "uncertain", "no_traffic", "no_replicas"}
    us = pc[pc["region"] == "aws:us-east-1"].set_index("traffic_class")
    assert (us["replicas"] == 4).all()
    assert us.loc["interactive", "offered_rps"] == 1.5
    assert us.loc["interactive", "arrived"] > 0 and np.isfinite(us.loc["interactive", "ttft_p99_ms_ci95"])
    for column in ("ttft_p99_ms", "tpot_mean_ms", "e2e_max_ms", "queue_wait_p95_ms", "goodput_rps",
                   "pool_kv_utilisation", "pool_cost_usd_per_m_output_tokens", "preemptions_kv"):
        assert column in pc.columns
    assert abs(us["pool_littles_residual_run"]).max() < 1e-9


def test_unserved_demand_is_reported_as_missed(result):
    pc = result.per_class.set_index(["region", "traffic_class"])
    row = pc.loc[("gcp:us-central1", "batch")]
    assert row["slo_ttft_verdict"] == "no_replicas" and not row["slo_met"]
    assert row["rejected_fraction"] == 1.0
    # the demo sets no TPOT SLO: measured (every request rejected, so +inf) but not checked
    assert row["slo_tpot_p99_ms"] == np.inf and row["slo_tpot_verdict"] == "not_set" and row["slo_tpot_met"]
    assert [m["metric"] for m in result.misses() if m["region"] == "gcp:us-central1"] == ["ttft_p99", "e2e_p99"]
    assert pc.loc[("gcp:europe-west4", "batch"), "slo_ttft_verdict"] == "no_traffic"
    assert not result.all_met


def test_summary_rows_and_meta_are_json(result):
    rows = result.summary_rows()
    assert {"region", "model", "traffic_class", "slo_met", "slo_ttft_verdict"} <= set(rows[0])
    text = json.dumps(result.to_json(), allow_nan=False)
    meta = json.loads(text)["meta"]
    assert meta["policy"] == "drr-wspt" and meta["seed"] == 5 and meta["period"] == P
    pool = next(p for p in meta["pools"] if p["region"] == "aws:us-east-1")
    assert pool["replicas"] == {"A100-80GB x4": 1, "H100 x4": 3}
    assert pool["usd_per_hour"] > 0


def test_same_inputs_give_byte_identical_files(inputs, result, tmp_path):
    scenario, plan, flows = inputs
    _, demand = select_window(plan, flows, "peak")
    again = simulate_plan(scenario, plan, demand, load_profiles(), load_catalog(), duration_s=400.0,
                          replications=2, seed=5)
    first = write_simulation_outputs(result, tmp_path / "a.csv")
    second = write_simulation_outputs(again, tmp_path / "b.csv")
    assert [p.name for p in first] == ["a.csv", "a.json"]
    for x, y in zip(first, second, strict=True):
        assert x.read_bytes() == y.read_bytes()
    parquet = write_simulation_outputs(result, tmp_path / "c.parquet")
    assert len(pd.read_parquet(parquet[0])) == 9


def test_policy_override_and_seed_change(inputs):
    scenario, plan, flows = inputs
    _, demand = select_window(plan, flows, "peak")
    a = simulate_plan(scenario, plan, demand, load_profiles(), load_catalog(), policy="fcfs", duration_s=200.0,
                      replications=1, seed=1)
    assert a.meta["policy"] == "fcfs"
    assert a.per_class["ttft_p99_ms_ci95"].dropna().eq(np.inf).all()  # one replication: no interval


def test_select_window_peak_iso_and_hour_of_week(inputs):
    _, plan, flows = inputs
    two = pd.concat([flows, flows.assign(period="2026-11-02T19:00:00Z", rps=flows["rps"] * 2)])
    plan2 = pd.concat([plan, plan.assign(period="2026-11-02T19:00:00Z")])
    period, demand = select_window(plan2, two, "peak")
    assert period == "2026-11-02T19:00:00Z"
    assert list(demand.columns) == ["region", "model", "traffic_class", "rps"]
    assert select_window(plan2, two, "2026-11-02T18:30:00Z")[0] == P
    blocks = flows.assign(period="Mon16+4h")
    assert select_window(plan.assign(period="Mon16+4h"), blocks, "2026-11-02T18:00:00Z")[0] == "Mon16+4h"
    with pytest.raises(InputError, match="no plan period"):
        select_window(plan2, two, "2026-11-05T03:00:00Z")
    with pytest.raises(InputError, match="not serving keys"):
        select_window(plan, flows.assign(region="us-east"), "peak")


def test_input_errors(inputs):
    scenario, plan, flows = inputs
    _, demand = select_window(plan, flows, "peak")
    args = (load_profiles(), load_catalog())
    with pytest.raises(InputError, match="lacks column"):
        simulate_plan(scenario, plan.drop(columns=["sku"]), demand, *args, duration_s=10.0, replications=1, seed=1)
    with pytest.raises(InputError, match="periods"):
        simulate_plan(scenario, pd.concat([plan, plan.assign(period="x")]), demand, *args, duration_s=10.0,
                      replications=1, seed=1)
    with pytest.raises(InputError, match="does not declare"):
        simulate_plan(scenario, plan, demand.assign(traffic_class="vip"), *args, duration_s=10.0,
                      replications=1, seed=1)
    with pytest.raises(InputError, match="engine"):
        simulate_plan(scenario, plan, demand, *args, duration_s=10.0, replications=1, seed=1, engine="ray")
    with pytest.raises(InputError, match="unknown scheduling policy"):
        simulate_plan(scenario, plan, demand, *args, policy="lifo", duration_s=10.0, replications=1, seed=1)
    with pytest.raises(InputError, match="no catalog offer"):
        simulate_plan(scenario, plan.iloc[[0]].assign(sku="L40S", region="gcp:europe-west4", model="llama-3.1-8b"),
                      demand, *args, duration_s=10.0, replications=1, seed=1)


@pytest.mark.parametrize("arrival", ["gamma", "trace"])
def test_bursty_and_replayed_arrivals(inputs, arrival, repo_root_module):
    from planner.workflows.inputs import read_trace_times

    scenario, plan, flows = inputs
    _, demand = select_window(plan, flows, "peak")
    trace = read_trace_times(repo_root_module / "data" / "samples" / "azure_llm_2023"
                             / "AzureLLMInferenceTrace_conv.csv")
    res = simulate_plan(scenario, plan.iloc[:2], demand[demand["region"] == "aws:us-east-1"], load_profiles(),
                        load_catalog(), duration_s=300.0, replications=1, seed=2, arrival=arrival, arrival_cv=3.0,
                        arrival_trace_s=trace)
    assert res.meta["arrival"] == arrival
    assert res.per_class["arrived"].sum() > 100


def test_pool_without_demand_is_no_traffic(inputs):
    scenario, plan, _ = inputs
    empty = pd.DataFrame(columns=["region", "model", "traffic_class", "rps"])
    mixes = {m: scenario.model_mix(m) for m in scenario.model_names}  # the models' traffic, elsewhere or later
    res = simulate_plan(scenario, plan.iloc[:1], empty, load_profiles(), load_catalog(), duration_s=60.0,
                        replications=2, seed=1, mixes=mixes)
    assert len(res.per_class) == 4
    assert set(res.per_class["slo_ttft_verdict"]) == {"no_traffic"} and res.all_met
    assert set(res.per_class["slo_tpot_verdict"]) == {"not_set"}

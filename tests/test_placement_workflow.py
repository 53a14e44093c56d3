"""``place_plan`` end to end: real bundled data, outputs on disk, decomposition and quota repair."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
from placement_helpers import Case, Region, capacity, catalog, forecast, profiles, scenario_dict, two_region_case

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.paths import data_dir
from planner.placement import ANALYTIC_LABEL, place_plan
from planner.placement.solve import solve_instance
from planner.profiles import load_profiles
from planner.scenario import load_scenario, parse_scenario
from planner.storage import read_table
from planner.workflows.files import placement_debug_writer, write_plan_outputs

PLAN_COLUMNS = ["period", "region", "sku", "tp_degree", "model", "tier", "replicas", "gpus", "usd", "engine",
                "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold"]


def _demo_forecast(hours: int) -> pd.DataFrame:
    """The last ``hours`` hours of the demo history, every origin, as a forecast (every quantile = the count)."""
    history = pd.read_parquet(data_dir() / "history" / "demo_history.parquet")
    last = sorted(history["ts"].unique())[-hours:]
    rows = history[history["ts"].isin(last)]
    frame = rows[["region", "model", "traffic_class", "ts"]].copy()
    for column in ("mean", "q50", "q90", "q95", "q99"):
        frame[column] = rows["requests"].astype(float)
    frame["model_used"] = "history"
    return frame.reset_index(drop=True)


@pytest.fixture(scope="module")
def demo_result():
    scenario = load_scenario("scenarios/demo.toml").model_copy(update={"horizon": "4h"})
    return place_plan(scenario, _demo_forecast(4), load_catalog(), load_profiles(), time_limit_s=60, gap=0.01,
                      periods="hourly", input_hashes={"forecast": "abc"})


def test_demo_plan_is_checked_and_labelled(demo_result):
    meta = demo_result.meta
    assert list(demo_result.plan.columns) == PLAN_COLUMNS
    assert meta["check"]["ok"]
    assert meta["capacity_source"] == ANALYTIC_LABEL
    assert meta["status"] in ("optimal", "feasible_within_gap")
    assert meta["gap"] <= 0.01 + 1e-9
    assert meta["lower_bounds"]["lp_relaxation_usd"] <= meta["cost_usd"]["total"] + 0.01
    assert meta["lower_bounds"]["perfectly_elastic"]["usd"] <= meta["cost_usd"]["total"] + 0.01
    assert meta["baselines"]["best_single_sku"]["usd"] >= meta["cost_usd"]["total"] * (1 - 0.02)
    assert meta["inputs_sha256"] == {"forecast": "abc"}
    assert demo_result.plan["usd"].sum() == pytest.approx(meta["cost_usd"]["rental"], abs=0.05)
    json.dumps(meta)  # JSON-serialisable as it is


def test_summary_rows_add_up(demo_result):
    rows = demo_result.summary_rows()
    assert {"region", "sku", "tier", "gpus_peak", "gpu_hours", "usd"} <= set(rows[0])
    assert sum(r["usd"] for r in rows) == pytest.approx(demo_result.plan["usd"].sum(), abs=0.05)


def test_outputs_written_atomically_and_readable(demo_result, tmp_path):
    out = tmp_path / "plans" / "march.csv"
    written = write_plan_outputs(demo_result, out)
    assert [p.name for p in written] == ["march.csv", "march.flows.csv", "march.json"]
    assert list(read_table(out).columns) == PLAN_COLUMNS
    payload = json.loads((tmp_path / "plans" / "march.json").read_text())
    for key in ("backend", "status", "objective", "bound", "gap", "solve_time_s", "lower_bounds", "baselines",
                "inputs_sha256", "check", "summary", "periods"):
        assert key in payload
    assert not list((tmp_path / "plans").glob(".*tmp"))


def test_same_inputs_give_the_same_plan_csv(tmp_path):
    case = two_region_case()
    first, second = (place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                                gap=0.0, baselines=False, periods="hourly") for _ in range(2))
    write_plan_outputs(first, tmp_path / "a.csv")
    write_plan_outputs(second, tmp_path / "b.csv")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert (tmp_path / "a.flows.csv").read_bytes() == (tmp_path / "b.flows.csv").read_bytes()


def test_debug_dir_gets_lp_and_mps(tmp_path):
    case = two_region_case()
    result = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                        baselines=False, periods="hourly", debug=placement_debug_writer(tmp_path / "debug"))
    lp = (tmp_path / "debug" / "placement.lp").read_text()
    assert "demand_us_east_llama_3.1_8b_interactive_t0" in lp and "R_aws_us_east_1_L4_tp1_llama_3.1_8b" in lp
    assert (tmp_path / "debug" / "placement.mps").stat().st_size > 0
    assert len(result.meta["debug_files"]) == 2


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"solver": "gurobi"}, "unknown solver"),
    ({"gap": 1.5}, "outside"),
    ({"time_limit_s": 0}, "positive"),
    ({"node_limit": 0}, "positive whole"),
    ({"periods": "weekly"}, "period scheme"),
    ({"quantile": 0.8}, "q80"),
])
def test_bad_options_are_input_errors(kwargs, needle):
    case = two_region_case()
    with pytest.raises(InputError, match=needle):
        place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                   baselines=False, **{"periods": "hourly", **kwargs})


def _shared_quota_case() -> Case:
    """Two models that both want the cheap L4s of one region, whose quota cannot hold both."""
    regions = [Region("aws:us-east-1", "us", {"us-east": 10.0},
                      {("L4", "reserved"): 0.5, ("L4", "on_demand"): 1.0, ("H100", "on_demand"): 5.0}, quota=6)]
    scenario = parse_scenario(scenario_dict(
        regions, {"us-east": ("us", ["us"])}, {"small": ["L4", "H100"], "large": ["L4", "H100"]},
        {"interactive": {"latency_budget_ms": 50.0}}, capacity={"utilisation_cap": 0.5, "redundancy": 1},
        horizon="2h"))
    demand = {("us-east", "small", "interactive"): [4.0, 3.0], ("us-east", "large", "interactive"): [4.0, 4.0]}
    caps = capacity([(m, s, 1, "interactive", 2.0 if s == "L4" else 16.0) for m in ("small", "large")
                     for s in ("L4", "H100")])
    return Case(scenario, forecast(demand), catalog(regions),
                profiles([(m, s, 1) for m in ("small", "large") for s in ("L4", "H100")]), caps)


def test_decomposition_repairs_a_shared_quota_and_keeps_a_valid_bound():
    inst, _ = _shared_quota_case().instance()
    joint = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    split = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="decomposed")
    assert split.repaired_quota
    assert split.bound <= joint.objective + 1e-6 <= split.objective + 2e-6
    gpus = (split.fleet.replicas.sum(axis=1) * inst.unit_gpus[:, None])
    l4 = inst.unit_sku == inst.skus.index("L4")
    assert gpus[l4].sum(axis=0).max() <= 6


def test_capacity_table_is_used_when_given():
    case = two_region_case()
    halved = case.capacity.assign(max_rps_per_replica=case.capacity["max_rps_per_replica"] / 2)
    base = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                      gap=0.0, baselines=False, periods="hourly")
    slower = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=halved, gap=0.0,
                        baselines=False, periods="hourly")
    assert base.meta["capacity_source"] == "capacity table"
    assert slower.meta["cost_usd"]["total"] > base.meta["cost_usd"]["total"]


def test_hour_of_week_periods_cover_every_hour():
    case = two_region_case({("us-east", "llama-3.1-8b", "interactive"): [1.0, 2.0, 3.0, 4.0]})
    result = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                        periods="how:2", gap=0.0, baselines=False)
    assert set(result.plan["period"]) <= {"Mon00+2h", "Mon02+2h"}
    assert result.meta["demand"]["hours"] == 4.0
    assert result.meta["check"]["ok"]


def test_budget_row_is_kept_when_it_binds():
    case = two_region_case()
    free = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity, gap=0.0,
                      baselines=False, periods="hourly")
    capped = replace(case, scenario=case.scenario.model_copy(update={"capacity": case.scenario.capacity.model_copy(
        update={"budget_usd": free.meta["cost_usd"]["total"] * 1.001})}))
    again = place_plan(capped.scenario, capped.forecast, capped.catalog, capped.profiles, capacity=capped.capacity,
                       gap=0.0, baselines=False, periods="hourly")
    assert again.meta["cost_usd"]["total"] <= free.meta["cost_usd"]["total"] * 1.001


# --------------------------------------------------------------------------- engine settings and deployments
BUSY = {("us-east", "llama-3.1-8b", "interactive"): [10.0, 14.0, 6.0],
        ("us-east", "llama-3.1-8b", "batch"): [8.0, 0.0, 12.0]}
KEY = ["model", "sku", "tp_degree"]


def _with_settings(table: pd.DataFrame, sku: str, tp: int, seqs: int, tokens: int) -> pd.DataFrame:
    table = table.copy()
    rows = (table["sku"] == sku) & (table["tp_degree"] == tp)
    table.loc[rows, ["engine", "max_num_seqs", "max_num_batched_tokens"]] = ["vllm", seqs, tokens]
    return table


def test_plan_rows_carry_the_capacity_table_s_engine_settings_and_the_profile_defaults_elsewhere():
    case = two_region_case(BUSY, h100_tp2=(24.0, 40.0), quota=3)
    table = _with_settings(case.capacity, "H100", 2, 64, 1024)  # L4 rows name no setting
    result = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=table, gap=0.0,
                        baselines=False, periods="hourly")
    plan = result.plan
    assert list(plan.columns) == PLAN_COLUMNS
    tp2, l4 = plan[(plan["sku"] == "H100") & (plan["tp_degree"] == 2)], plan[plan["sku"] == "L4"]
    assert len(tp2) and len(l4)
    assert set(tp2[["engine", "max_num_seqs", "max_num_batched_tokens"]].itertuples(index=False, name=None)) == {
        ("vllm", 64, 1024)}
    defaults = case.profiles.set_index(KEY).loc[("llama-3.1-8b", "L4", 1)]
    assert set(l4[["engine", "max_num_seqs", "max_num_batched_tokens"]].itertuples(index=False, name=None)) == {
        (defaults["engine"], defaults["max_num_seqs"], defaults["max_num_batched_tokens"])}
    launches = {(d["sku"], d["tp_degree"]): d["launch"] for d in result.meta["deployments"]}
    assert "--tensor-parallel-size 2 --max-num-seqs 64 --max-num-batched-tokens 1024" in launches[("H100", 2)]
    assert f"--max-num-seqs {defaults['max_num_seqs']} " in launches[("L4", 1)]


def test_a_capacity_table_with_two_settings_for_one_deployment_is_refused():
    case = two_region_case()
    table = _with_settings(case.capacity, "L4", 1, 64, 1024)
    table.loc[(table["sku"] == "L4") & (table["traffic_class"] == "batch"), "max_num_seqs"] = 128
    with pytest.raises(InputError, match="more than one engine setting"):
        place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=table, gap=0.0,
                   baselines=False, periods="hourly")


def test_analytic_plan_rows_carry_each_profile_s_engine_defaults(demo_result):
    profiles = load_profiles()
    settings = ["engine", "max_num_seqs", "max_num_batched_tokens"]
    merged = demo_result.plan.merge(profiles[profiles["engine"] == "vllm"], on=KEY, suffixes=("", "_profile"))
    assert len(merged) == len(demo_result.plan) > 0
    for column in settings:
        assert (merged[column] == merged[f"{column}_profile"]).all(), column


def test_deployments_list_each_model_sku_and_tp_the_plan_runs_with_its_vllm_command(demo_result, tmp_path):
    plan, deployments = demo_result.plan, demo_result.meta["deployments"]
    used = sorted(set(plan[KEY].itertuples(index=False, name=None)))
    assert [(d["model"], d["sku"], d["tp_degree"]) for d in deployments] == used
    assert len({tp for _, _, tp in used}) > 1  # the demo runs several TP degrees
    for d in deployments:
        rows = plan[(plan["model"] == d["model"]) & (plan["sku"] == d["sku"]) & (plan["tp_degree"] == d["tp_degree"])]
        assert set(rows["max_num_seqs"]) == {d["max_num_seqs"]} and d["engine"] == "vllm"
        launch = d["launch"]
        assert launch.startswith("vllm serve ")
        for flag, value in (("--tensor-parallel-size", d["tp_degree"]), ("--max-num-seqs", d["max_num_seqs"]),
                            ("--max-num-batched-tokens", d["max_num_batched_tokens"])):
            assert f"{flag} {value}" in launch, (flag, launch)
    write_plan_outputs(demo_result, tmp_path / "plan.csv")
    assert json.loads((tmp_path / "plan.json").read_text())["deployments"] == deployments

"""Capacity coefficients and planning periods: the numbers placement starts from."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from placement_helpers import forecast, two_region_case

from planner.contracts import quantile_column
from planner.errors import InputError
from planner.placement.capacity import (
    ANALYTIC_LABEL,
    TokenLengths,
    analytic_capacity,
    requests_per_second,
    validate_capacity,
)
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.profiles import load_profiles
from planner.profiles.step_model import StepModel
from planner.scenario import parse_scenario
from planner.sources import named

LENGTHS = {"interactive": TokenLengths(1230.0, 160.0), "standard": TokenLengths(1870.0, 30.0),
           "batch": TokenLengths(1870.0, 390.0)}
PROFILE = {**StepModel.linear(20.0, 0.001, 0.1).to_row(), "kv_capacity_tokens": 100_000, "max_num_seqs": 64,
           "max_num_batched_tokens": 2048}
"""The three-coefficient step a + b·(KV read) + c·(prefill tokens): flat dense work, so a prompt's
chunks add only c per token and the ceiling has the closed form below."""


def test_step_time_capacity_by_hand():
    # P = 1000, O = 200: KV allows floor(0.85 * 100000 / 1200) = 70 > max_num_seqs, so B* = 64.
    # t_step = 20 + 0.001 * 64 * 1100 = 90.4 ms; X = 64 / (200 * 90.4 + 64 * 0.1 * 1000) per ms.
    expected = 1000.0 * 64 / (200 * 90.4 + 64 * 0.1 * 1000)
    assert requests_per_second(PROFILE, TokenLengths(1000.0, 200.0), 0.85) == pytest.approx(expected)


def test_kv_limits_the_batch_and_a_request_that_does_not_fit_gets_no_capacity():
    small = {**PROFILE, "kv_capacity_tokens": 12_000}
    # floor(0.85 * 12000 / 1200) = 8 requests fit, below max_num_seqs 64.
    t_step = 20 + 0.001 * 8 * 1100
    assert requests_per_second(small, TokenLengths(1000.0, 200.0), 0.85) == pytest.approx(
        1000.0 * 8 / (200 * t_step + 8 * 0.1 * 1000))
    assert requests_per_second({**PROFILE, "kv_capacity_tokens": 1000}, TokenLengths(1000.0, 200.0), 0.85) == 0.0


def test_analytic_table_covers_the_bundled_profiles_and_grows_with_bigger_gpus():
    bundled = load_profiles()
    vllm = bundled[bundled["engine"] == "vllm"]
    table = analytic_capacity(vllm, {(m, k): length for m in vllm["model"].unique() for k, length in LENGTHS.items()},
                              kv_fraction=0.85)
    assert set(table["traffic_class"]) == set(LENGTHS)
    assert (table["max_rps_per_replica"] > 0).all()
    assert table.duplicated(["model", "sku", "tp_degree", "traffic_class"]).sum() == 0
    # one row per profile row (model, SKU, TP) and class that fits
    assert set(table[["model", "sku", "tp_degree"]].itertuples(index=False, name=None)) == set(
        vllm[["model", "sku", "tp_degree"]].itertuples(index=False, name=None))
    rate = table.set_index(["model", "sku", "tp_degree", "traffic_class"])["max_rps_per_replica"]
    assert rate[("llama-3.1-8b", "H100", 1, "interactive")] > rate[("llama-3.1-8b", "L4", 1, "interactive")]
    assert rate[("llama-3.1-8b", "H100", 2, "interactive")] > rate[("llama-3.1-8b", "H100", 1, "interactive")]
    # 30 vs 390 output tokens
    assert rate[("llama-3.1-8b", "H100", 1, "standard")] > rate[("llama-3.1-8b", "H100", 1, "batch")]
    assert ANALYTIC_LABEL.startswith("analytic estimate")


def test_analytic_table_carries_each_profile_s_engine_defaults():
    bundled = load_profiles()
    vllm = bundled[(bundled["engine"] == "vllm") & (bundled["model"] == "llama-3.1-70b")]
    table = analytic_capacity(vllm, {("llama-3.1-70b", "interactive"): LENGTHS["interactive"]}, kv_fraction=0.85,
                              policy="fcfs")
    merged = table.merge(vllm, on=["model", "sku", "tp_degree"], suffixes=("", "_profile"))
    assert len(merged) == len(table) > 0
    assert (merged["engine"] == "vllm").all() and (merged["policy"] == "fcfs").all()
    assert (merged["max_num_seqs"] == merged["max_num_seqs_profile"]).all()
    assert (merged["max_num_batched_tokens"] == merged["max_num_batched_tokens_profile"]).all()
    assert (merged["long_prefill_token_threshold"] == 0).all()  # vLLM's default: no threshold
    # the rate is the step model's ceiling at those defaults
    row = merged.iloc[0]
    assert row["max_rps_per_replica"] == pytest.approx(
        requests_per_second(vllm[(vllm["sku"] == row["sku"]) & (vllm["tp_degree"] == row["tp_degree"])].iloc[0],
                            TokenLengths(1230.0, 160.0), 0.85), abs=1e-6)


def test_the_analytic_estimate_takes_each_models_own_lengths_and_names_defaults():
    from conftest import REPO_ROOT

    from planner.placement.place import analytic_lengths
    from planner.scenario import load_scenario

    scenario = load_scenario(REPO_ROOT / "scenarios" / "demo.toml")
    lengths, workloads = analytic_lengths(scenario)
    long_context = lengths[("llama-3.1-8b", "long-context")]
    law = workloads[("llama-3.1-8b", "long-context")].lengths.prompt
    assert long_context.prompt_tokens == pytest.approx(law.mean())
    assert 9000 < long_context.prompt_tokens < 11000 and lengths[("llama-3.1-8b", "standard")].output_tokens < 40
    raw = scenario.model_dump()
    raw["classes"][1]["name"] = "agents"  # no built-in law of that name, and none declared: no silent standard
    for key in ("prompt_tokens", "output_tokens"):
        raw["classes"][1][key] = None
    with pytest.raises(InputError, match="no token lengths for class 'agents'"):
        analytic_lengths(parse_scenario(raw))


def _table(**columns) -> pd.DataFrame:
    return pd.DataFrame({"model": ["m"], "sku": ["H100"], "tp_degree": [1], "traffic_class": ["k"],
                         "max_rps_per_replica": [1.0], **columns})


@pytest.mark.parametrize(("frame", "needle"), [
    (_table().drop(columns="max_rps_per_replica"), "lacks the column"),
    (_table(max_rps_per_replica=[0]), "positive number"),
    (pd.concat([_table(), _table(max_rps_per_replica=[2.0])]), "two rows"),
    (_table(max_rps_per_replica=[True]), "true/false"),
    (_table(max_num_seqs=[12.5]), "max_num_seqs must be a whole number"),
])
def test_capacity_table_errors_name_the_problem(frame, needle):
    with pytest.raises(InputError, match=needle):
        validate_capacity(frame, where="cap.csv")


def test_capacity_table_without_tp_degree_is_refused():
    with pytest.raises(InputError, match="lacks the column.*tp_degree") as caught:
        validate_capacity(_table().drop(columns="tp_degree"), where="cap.csv")
    assert "tp_degree" in caught.value.fix


@pytest.mark.parametrize("tp", [1.5, 0, -2, "two", None, float("inf")])
def test_capacity_table_refuses_a_tp_degree_that_is_not_a_whole_number_of_gpus(tp):
    frame = pd.concat([_table(), _table(tp_degree=[tp], sku=["L4"])], ignore_index=True)
    with pytest.raises(InputError, match="tp_degree must be a whole number >= 1") as caught:
        validate_capacity(frame, where="cap.csv")
    assert caught.value.where == "cap.csv, row 2, column 'tp_degree'"


def test_capacity_table_refuses_true_false_tp_degrees():
    frame = pd.concat([_table(tp_degree=[True]), _table(tp_degree=[False], sku=["L4"])], ignore_index=True)
    with pytest.raises(InputError, match="tp_degree must be a whole number"):
        validate_capacity(frame, where="cap.csv")


def test_one_model_and_sku_may_have_a_row_per_tp_degree():
    table = validate_capacity(pd.concat([_table(), _table(tp_degree=[2.0], max_rps_per_replica=[3.0])]))
    assert table["tp_degree"].tolist() == [1, 2] and table["tp_degree"].dtype == np.int64


def test_capacity_table_gets_default_source():
    table = validate_capacity(_table(max_rps_per_replica=["2.5"]))
    assert table.loc[0, "source"] == "capacity table" and table.loc[0, "max_rps_per_replica"] == 2.5
    # no engine settings given: '' and 0 stand for the profile's defaults
    assert (table.loc[0, "engine"], table.loc[0, "max_num_seqs"], table.loc[0, "max_num_batched_tokens"]) == ("", 0, 0)


# --------------------------------------------------------------------------- periods
@pytest.mark.parametrize(("text", "kind", "size"), [("hourly", "hourly", 1), ("how", "how", 1), ("how:4", "how", 4),
                                                    ("HOW:24", "how", 24)])
def test_period_schemes(text, kind, size):
    spec = parse_periods(text)
    assert (spec.kind, spec.block_hours) == (kind, size)


@pytest.mark.parametrize("text", ["daily", "how:5", "hourly:2", "how:0", ""])
def test_bad_period_schemes(text):
    with pytest.raises(InputError):
        parse_periods(text)


def test_quantile_columns():
    assert [quantile_column(q) for q in (0.5, 0.9, 0.95, 0.99)] == ["q50", "q90", "q95", "q99"]


def test_the_simulator_reads_the_same_column_placement_provisions_for():
    """A 0.975 forecast quantile is q97.5 for both (the simulator once rounded it to q98)."""
    from planner.sim.forecast_demand import provisioned_column

    case = two_region_case()
    scenario = case.scenario.model_copy(update={
        "capacity": case.scenario.capacity.model_copy(update={"forecast_quantile": 0.975})})
    forecast = case.forecast.assign(**{"q97.5": case.forecast["q95"]})
    assert provisioned_column(scenario, forecast) == quantile_column(0.975) == "q97.5"
    with pytest.raises(InputError, match="q97.5"):
        provisioned_column(scenario, case.forecast)


def test_hourly_demand_is_requests_per_second():
    case = two_region_case()
    demand = demand_from_forecast(case.forecast, case.scenario, 0.95, parse_periods("hourly"))
    assert demand.rps.shape == (1, 1, 2, 3)
    assert demand.rps[0, 0, 0].tolist() == pytest.approx([1.5, 3.0, 0.5])
    assert demand.periods.hours.tolist() == [1.0, 1.0, 1.0]
    assert not demand.periods.cyclic


def test_hour_of_week_blocks_take_the_max_and_count_hours():
    values = [float(h % 7) for h in range(24 * 14)]  # two weeks of hourly rates
    case = two_region_case({("us-east", "llama-3.1-8b", "interactive"): values})
    scenario = case.scenario.model_copy(update={"horizon": "2w"})
    demand = demand_from_forecast(forecast({("us-east", "llama-3.1-8b", "interactive"): values}), scenario, 0.95,
                                  parse_periods("how:4"))
    assert len(demand.periods) == 42 and demand.periods.cyclic
    assert demand.periods.hours.tolist() == [8.0] * 42  # 4 hours x 2 weeks
    assert demand.periods.labels[:2] == ("Mon00+4h", "Mon04+4h")
    first_block = [values[h] for week in (0, 1) for h in range(week * 168, week * 168 + 4)]
    assert demand.rps[0, 0, 0, 0] == pytest.approx(max(first_block))


def test_forecast_is_clipped_to_the_horizon():
    case = two_region_case({("us-east", "llama-3.1-8b", "interactive"): [1.0] * 30})
    scenario = case.scenario.model_copy(update={"horizon": "24h"})
    demand = demand_from_forecast(case.forecast, scenario, 0.95, parse_periods("hourly"))
    assert (demand.forecast_hours_used, demand.forecast_hours_given) == (24, 30)


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda f: f.drop(columns="q95"), "lacks the column"),
    (lambda f: f.assign(region="mars"), "does not declare"),
    (lambda f: f.assign(ts="yesterday"), "ISO-8601"),
    (lambda f: f.assign(q95=-1.0), "number >= 0"),
    (lambda f: pd.concat([f, f.iloc[:1]]), "two rows"),
    (lambda f: f.iloc[1:], "of the forecast's"),
])
def test_forecast_errors_name_the_problem(mutate, needle):
    case = two_region_case()
    with pytest.raises(InputError, match=needle):
        demand_from_forecast(mutate(case.forecast), case.scenario, 0.95, parse_periods("hourly"))


def test_missing_series_are_zero_and_reported():
    case = two_region_case({("us-east", "llama-3.1-8b", "interactive"): [1.0, 1.0]})
    demand = demand_from_forecast(case.forecast, case.scenario, 0.95, parse_periods("hourly"))
    assert demand.series_without_forecast == ("us-east/llama-3.1-8b/batch",)
    assert np.all(demand.rps[0, 0, 1] == 0) and not math.isnan(demand.rps.sum())


# --------------------------------------------------------------------------- the forecast contract
def scenario_dict_of(scenario) -> dict:
    return scenario.model_dump(mode="json", exclude_none=True)


def _contract_error(frame: pd.DataFrame, scenario) -> InputError:
    with pytest.raises(InputError) as caught:
        demand_from_forecast(named(frame, "fc.csv"), scenario, 0.95, parse_periods("hourly"))
    return caught.value


def test_a_forecast_shorter_than_the_horizon_is_refused_not_planned_for_fewer_hours():
    case = two_region_case()  # 3 hours, and a 3-hour horizon
    error = _contract_error(case.forecast[case.forecast["ts"] == case.forecast["ts"].min()], case.scenario)
    assert error.where == "fc.csv, column 'ts'" and "covers 1 of the 3 hours" in error.message
    assert "--horizon 3h" in error.fix


def test_a_forecast_with_a_missing_hour_is_refused():
    case = two_region_case({("us-east", "llama-3.1-8b", "interactive"): [1.0] * 5})
    hours = sorted(case.forecast["ts"].unique())
    error = _contract_error(case.forecast[case.forecast["ts"] != hours[2]], case.scenario)
    assert f"first hour missing is {hours[2]}" in error.message


def test_a_scenario_origin_without_forecast_rows_is_refused():
    case = two_region_case()
    scenario = parse_scenario({**scenario_dict_of(case.scenario), "regions": {
        **scenario_dict_of(case.scenario)["regions"],
        "origins": [{"name": "us-east", "zone": "us", "residency": ["us", "eu"]},
                    {"name": "us-west", "zone": "us", "residency": ["us"]}],
        "latency_ms": {"us-east": {"aws:us-east-1": 10.0, "gcp:europe-west4": 90.0},
                       "us-west": {"aws:us-east-1": 40.0, "gcp:europe-west4": 140.0}}}})
    error = _contract_error(case.forecast, scenario)
    assert "origin(s) us-west" in error.message and error.where == "fc.csv, column 'region'"


@pytest.mark.parametrize(("mutate", "where", "needle"), [
    (lambda f: f.assign(q50=f["q99"] * 2), "row 1 (the header is row 0), columns 'q50' and 'q90'", "above q90"),
    (lambda f: f.assign(q95=[1e30] + list(f["q95"].iloc[1:])), "row 1 (the header is row 0), column 'q95'",
     "ceiling"),
    (lambda f: f.assign(mean=[np.nan] * len(f)), "row 1 (the header is row 0), column 'mean'", "number >= 0"),
    (lambda f: f.assign(q99=f["q99"] > 0), "column 'q99'", "true/false"),
    (lambda f: f.assign(region=[None] + list(f["region"].iloc[1:])), "row 1 (the header is row 0), column 'region'",
     "empty region"),
    (lambda f: f.assign(ts=pd.to_datetime(f["ts"]).astype("int64") // 10**9), "row 1 (the header is row 0), "
     "column 'ts'", "numbers"),
    (lambda f: f.assign(traffic_class="vip"), "row 1 (the header is row 0), column 'traffic_class'",
     "does not declare"),
])
def test_each_broken_cell_names_the_file_row_and_column(mutate, where, needle):
    case = two_region_case()
    error = _contract_error(mutate(case.forecast.copy()), case.scenario)
    assert error.where == f"fc.csv, {where}" and needle in error.message, (error.where, error.message)

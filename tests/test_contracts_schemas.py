"""Every file schema reports all its problems in one error: several bad cells in different rows
and columns are all named, each with its row, column and fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from placement_helpers import two_region_case

from planner.errors import ExitCode, InputError
from planner.forecast.history_input import validated_history
from planner.forecast.synthetic import synthetic_history
from planner.placement.forecast_check import check_forecast_contract
from planner.sim.plan_input import validated_plan
from planner.sim.simulate import PLAN_COLUMNS
from planner.sources import named


def _refusal(check, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as caught:
        check(*args, **kwargs)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    return caught.value


def test_a_history_with_several_broken_cells_names_every_one():
    history = synthetic_history(2, 48, seed=1)
    history.loc[3, "region"] = ""
    history.loc[10, "ts"] = "yesterday"
    history.loc[20, "requests"] = -5.0
    history.loc[21, "requests"] = -6.0
    history.loc[30, "requests"] = 1e30
    error = _refusal(validated_history, named(history, "hist.csv"), "requests")
    text = str(error)
    assert error.where == "hist.csv" and "4 problems" in error.message, text
    assert "row 4 (the header is row 0), column region: empty region" in text
    assert "row 11 (the header is row 0), column ts: cannot parse timestamp 'yesterday'" in text
    assert "row 21 (the header is row 0), column requests: requests value '-5.0' is not a non-negative number " \
           "(1 more row(s) like it)" in text
    assert "row 31 (the header is row 0), column requests: requests value '1e+30' is above the ceiling" in text


def test_a_forecast_with_several_broken_cells_names_every_one():
    case = two_region_case()
    forecast = case.forecast.copy()
    forecast.loc[0, "model"] = None
    forecast.loc[1, "ts"] = "soon"
    forecast.loc[2, "q95"] = -1.0
    forecast.loc[3, "q50"] = forecast.loc[3, "q99"] * 2
    error = _refusal(check_forecast_contract, named(forecast, "fc.csv"), case.scenario, hours=3)
    text = str(error)
    assert error.where == "fc.csv" and "4 problems" in error.message, text
    assert "row 1 (the header is row 0), column 'model': empty model" in text
    assert "row 2 (the header is row 0), column 'ts': ts 'soon' is not an ISO-8601 time" in text
    assert "row 3 (the header is row 0), column 'q95': q95 must be a number >= 0" in text
    assert "row 4 (the header is row 0), columns 'q50' and 'q90': q50" in text


def test_a_plan_with_several_broken_cells_names_every_one():
    plan = pd.DataFrame([
        {"period": "p", "region": "aws:us-east-1", "sku": "H100", "model": "m", "tier": tier, "replicas": replicas,
         "gpus": gpus, "usd": 0.0}
        for tier, replicas, gpus in (("reserved", 2.0, 2.0), ("on_demand", 1.5, 2.0), ("spot", 1.0, np.nan))
    ])
    plan = pd.concat([plan, plan.iloc[[0]]], ignore_index=True)
    error = _refusal(validated_plan, named(plan, "fleet.csv"), PLAN_COLUMNS)
    text = str(error)
    assert error.where == "fleet.csv" and "3 problems" in error.message, text
    assert "rows 1 and 4 (the header is row 0): the same plan entry" in text
    assert "row 2 (the header is row 0), column 'replicas': replicas must be a whole number >= 0" in text
    assert "row 3 (the header is row 0), column 'gpus': gpus must be a whole number >= 0 (GPUs), got nan" in text


def test_one_problem_reads_as_a_single_located_error():
    history = synthetic_history(1, 24, seed=2)
    history.loc[5, "requests"] = -1.0
    error = _refusal(validated_history, named(history, "hist.csv"), "requests")
    assert error.where == "hist.csv, row 6 (the header is row 0), column requests"
    assert "problems" not in error.message


def test_a_capacity_table_with_several_broken_cells_names_every_one():
    from planner.placement.capacity import validate_capacity

    table = pd.DataFrame({"model": ["m", " ", "m", "m"], "sku": ["H100", "H100", "L4", "H100"],
                          "tp_degree": [1, 1, "two", 1], "traffic_class": ["k"] * 4,
                          "max_rps_per_replica": [1.0, 2.0, 0.0, 3.0], "max_num_seqs": [8, 8.5, 8, 8]})
    error = _refusal(validate_capacity, table, where="cap.csv")
    text = str(error)
    assert error.where == "cap.csv" and "5 problems" in error.message, text
    assert "row 2, column 'model': empty model" in text
    assert "row 2, column 'max_num_seqs': max_num_seqs must be a whole number >= 0, got 8.5" in text
    assert "row 3, column 'tp_degree': tp_degree must be a whole number >= 1, got 'two'" in text
    assert "row 3, column 'max_rps_per_replica': max_rps_per_replica must be a positive number, got 0.0" in text
    assert "row 4: two rows for model 'm', sku 'H100', TP 1, class 'k'" in text


def test_a_profile_table_with_several_broken_cells_names_every_one():
    from planner.paths import profiles_dir
    from planner.profiles import validate_profiles

    profiles = pd.read_csv(profiles_dir() / "profiles.csv").astype({"tp_degree": float, "sku": object})
    profiles.loc[1, "engine"] = "tgi"
    profiles.loc[3, "weights_gb"] = -1.0
    profiles.loc[5, "tp_degree"] = 1.5
    profiles.loc[7, "gpu_memory_utilization"] = 1.5
    profiles.loc[9, "dense_ms_2"] = profiles.loc[9, "dense_ms_1"] / 2
    profiles.loc[11, "sku"] = None
    error = _refusal(validate_profiles, profiles, "p.csv")
    text = str(error)
    assert error.where == "p.csv" and "6 problems" in error.message, text
    assert "row 2 (line 3), column 'engine': unknown engine 'tgi'" in text
    assert "row 4 (line 5), column 'weights_gb': weights_gb must be a positive number, got -1.0" in text
    assert "row 6 (line 7), column 'tp_degree': tp_degree must be a whole number, got 1.5" in text
    assert "row 8 (line 9), column 'gpu_memory_utilization': gpu_memory_utilization must be at most 1" in text
    assert "row 10 (line 11), column 'dense_ms_1': the dense step time falls as tokens grow" in text
    assert "row 12 (line 13), column 'sku': empty value" in text


def test_a_repeated_profile_is_named_once_at_its_second_row():
    from planner.paths import profiles_dir
    from planner.profiles import validate_profiles

    profiles = pd.read_csv(profiles_dir() / "profiles.csv")
    error = _refusal(validate_profiles, pd.concat([profiles, profiles.iloc[[0]]], ignore_index=True), "p.csv")
    first = profiles.iloc[0]
    assert error.where == f"p.csv, row {len(profiles) + 1} (line {len(profiles) + 2}), column 'model'"
    assert error.message == (f"duplicate profile for model {first['model']!r}, sku {first['sku']!r}, "
                             f"tp_degree {int(first['tp_degree'])}, engine {first['engine']!r}")


def test_a_histogram_with_several_broken_cells_names_every_one():
    from planner.sim.workload import workloads_for

    histogram = pd.DataFrame({
        "model": "llama-3.1-8b", "traffic_class": "interactive",
        "measure": ["prompt_tokens"] * 3 + ["output_tokens"] * 3,
        "bin_lo_tokens": [256, 512, "x", 16, 32, 64.5], "bin_hi_tokens": [512, 256, 2048, 32, 64, 128],
        "count": [1, 2, 1, -3, 3, None]})
    error = _refusal(workloads_for, "llama-3.1-8b", ("interactive",), named(histogram, "h.csv"))
    text = str(error)
    assert error.where == "h.csv" and "5 problems" in error.message, text
    assert "row 2 (the header is row 0), column 'bin_hi_tokens': bins need bin_hi_tokens > bin_lo_tokens, " \
           "got 512 to 256" in text
    assert "row 3 (the header is row 0), column 'bin_lo_tokens': bin_lo_tokens must be a whole number of " \
           "tokens >= 0, got 'x'" in text
    assert "row 4 (the header is row 0), column 'count': bins need count >= 0, got -3.0" in text
    assert "row 6 (the header is row 0), column 'bin_lo_tokens'" in text
    assert "row 6 (the header is row 0), column 'count': bins need count >= 0, got nan" in text

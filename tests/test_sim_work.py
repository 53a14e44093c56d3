"""Simulation inputs and work, checked before the run: plan and flow cells, runaway sizes, and evidence."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.profiles import load_profiles
from planner.scenario import load_scenario
from planner.sim.plan_input import validated_plan
from planner.sim.simulate import PLAN_COLUMNS, select_window, simulate_plan
from planner.sim.work import (
    MAX_ARRIVALS_PER_REPLICATION,
    MAX_ARRIVALS_PER_RUN,
    MAX_BATCH_SLOTS_PER_POOL,
    MAX_REPLICATIONS,
    MIN_DURATION_S,
    PoolWork,
    check_duration,
    check_evidence,
    check_replications,
    check_work,
)
from planner.sources import named

P = "2026-11-02T18:00:00Z"


@pytest.fixture(scope="module")
def demo():
    from conftest import REPO_ROOT

    return load_scenario(REPO_ROOT / "scenarios" / "demo.toml")


def _plan(replicas: int = 2) -> pd.DataFrame:
    return pd.DataFrame([
        {"period": P, "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-8b", "tier": "reserved",
         "replicas": replicas, "gpus": replicas, "usd": 0.0},
        {"period": P, "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-8b", "tier": "on_demand",
         "replicas": 1, "gpus": 1, "usd": 0.0},
    ])


def _flows(rps: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame([{"period": P, "origin": "us-east", "region": "aws:us-east-1", "model": "llama-3.1-8b",
                          "traffic_class": k, "rps": rps} for k in ("interactive", "standard", "batch")])


def test_duplicate_plan_rows_are_refused_naming_both_rows_not_summed():
    plan = named(pd.concat([_plan(), _plan().iloc[[0]]], ignore_index=True), "fleet.csv")
    with pytest.raises(InputError) as caught:
        validated_plan(plan, PLAN_COLUMNS)
    assert caught.value.where == "fleet.csv, rows 1 and 3 (the header is row 0)"
    assert "added together" in caught.value.message


@pytest.mark.parametrize(("column", "value", "needle"), [
    ("replicas", np.nan, "whole number"), ("replicas", 1.5, "whole number"), ("replicas", -1, "whole number"),
    ("gpus", np.inf, "whole number"),
])
def test_a_bad_count_names_the_plan_file_row_and_column(column, value, needle):
    plan = _plan()
    plan[column] = plan[column].astype(float)
    plan.loc[1, column] = value
    with pytest.raises(InputError, match=needle) as caught:
        validated_plan(named(plan, "fleet.csv"), PLAN_COLUMNS)
    assert caught.value.where == f"fleet.csv, row 2 (the header is row 0), column '{column}'"


def test_true_false_replicas_are_not_counts():
    with pytest.raises(InputError, match="true/false"):
        validated_plan(_plan().assign(replicas=True), PLAN_COLUMNS)


@pytest.mark.parametrize("value", [np.nan, np.inf, -0.5])
def test_a_nan_or_infinite_flow_is_an_error_not_zero_demand(value):
    flows = _flows()
    flows.loc[1, "rps"] = value
    with pytest.raises(InputError) as caught:
        select_window(_plan(), named(flows, "plan.flows.csv"), "peak")
    assert caught.value.where == "plan.flows.csv, row 2 (the header is row 0), column 'rps'"


def test_a_million_replicas_are_refused_before_anything_is_allocated(demo):
    _, demand = select_window(_plan(), _flows(), "peak")
    start = time.perf_counter()
    with pytest.raises(InputError, match="batch slots") as caught:
        simulate_plan(demo, named(_plan(10**6), "huge.csv"), demand, load_profiles(), load_catalog(),
                      duration_s=600.0, replications=2, seed=1)
    assert time.perf_counter() - start < 10.0 and caught.value.where == "huge.csv"


def test_a_demand_of_a_billion_per_second_is_refused_with_the_estimate(demo):
    _, demand = select_window(_plan(), _flows(1e9), "peak")
    with pytest.raises(InputError) as caught:
        simulate_plan(demo, _plan(), demand, load_profiles(), load_catalog(), duration_s=600.0, replications=2,
                      seed=1)
    assert caught.value.where == "--sim-duration"
    assert "1,800,000,000,000 requests per replication" in caught.value.message
    assert "requests per second, not per hour" in caught.value.fix


def test_the_ceilings_each_hold_on_their_own():
    small = PoolWork("r / m", slots=1000, rate_rps=10.0)
    check_work([small], duration_s=3600.0, replications=5)
    with pytest.raises(InputError, match="batch slots"):
        check_work([PoolWork("r / m", MAX_BATCH_SLOTS_PER_POOL + 1, 1.0)], duration_s=60.0, replications=1)
    with pytest.raises(InputError, match="per replication") as caught:
        check_work([PoolWork("r / m", 1000, MAX_ARRIVALS_PER_REPLICATION / 3000.0)], duration_s=3600.0,
                   replications=1)
    assert "at most 3,000 s" in caught.value.fix
    pools = [PoolWork(f"r{i} / m", 1000, MAX_ARRIVALS_PER_REPLICATION / 3600.0) for i in range(4)]
    check_work(pools, duration_s=3600.0, replications=2)  # 40M in all: under the run's ceiling
    with pytest.raises(InputError, match="over every pool and replication") as caught:
        check_work(pools, duration_s=3600.0, replications=3)  # 60M
    assert caught.value.where == "--sim-duration/--replications"
    assert MAX_ARRIVALS_PER_RUN == 50_000_000


def test_replications_are_bounded_both_ways():
    assert check_replications(MAX_REPLICATIONS) == MAX_REPLICATIONS
    for bad in (0, MAX_REPLICATIONS + 1):
        with pytest.raises(InputError) as caught:
            check_replications(bad)
        assert caught.value.where == "--replications"
    with pytest.raises(InputError, match="--replications"):  # even with no demand, a billion tasks is no run
        check_work([PoolWork("r / m", 10, 0.0)], duration_s=60.0, replications=10**9)


def test_a_window_shorter_than_a_minute_is_refused():
    assert check_duration(MIN_DURATION_S) == MIN_DURATION_S
    with pytest.raises(InputError, match="shorter than the minimum of 60 s") as caught:
        check_duration(0.001)
    assert caught.value.where == "--sim-duration"
    with pytest.raises(InputError, match="--sim-duration"):
        check_duration(1.0, "--sim-duration")


def test_a_class_with_demand_but_no_arrival_is_no_evidence_not_a_pass():
    rows = pd.DataFrame([
        {"region": "r", "model": "m", "traffic_class": "batch", "replicas": 2, "offered_rps": 0.001, "arrived": 0.0},
        {"region": "r", "model": "m", "traffic_class": "interactive", "replicas": 2, "offered_rps": 5.0,
         "arrived": 270.0},
        {"region": "r", "model": "m", "traffic_class": "standard", "replicas": 2, "offered_rps": 0.0, "arrived": 0.0},
        {"region": "x", "model": "m", "traffic_class": "batch", "replicas": 0, "offered_rps": 1.0, "arrived": 54.0},
    ])
    with pytest.raises(InputError) as caught:
        check_evidence(rows, duration_s=60.0, warmup_s=6.0)
    assert caught.value.where == "--sim-duration" and "batch at r / m" in caught.value.message
    assert "--sim-duration 3334s" in caught.value.fix  # 3 expected arrivals in the measured 90 %
    check_evidence(rows.iloc[1:], duration_s=60.0, warmup_s=6.0)  # no traffic at all is not a problem

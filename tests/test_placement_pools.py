"""The placement program charges a pool of n replicas n · c(n): hand-computed cases, the plan check, the spot rule
and how a table's pool gains are read. (Mixed pools, each unit counting its own replicas, are checked against
exhaustive search in ``test_placement_oracle.py``.)

One region, llama on H100 at TP 1, one class, 1 req/s per replica alone (2 req/s at a utilisation cap of 0.5),
and a table calibrated at pool sizes 1, 2 and 4 with per-replica gains 1.2 and 1.5: a pool carries 1, 2.4, 3.6,
6, 7.5, 9, ... req/s with 1, 2, 3, 4, 5, 6, ... replicas.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from placement_helpers import Region, capacity, catalog, forecast, profiles, scenario_dict

from planner.errors import InputError
from planner.placement.capacity import pool_gains, validate_capacity
from planner.placement.check import check_plan
from planner.placement.instance import build_instance
from planner.placement.limits import SafetyNet
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.placement.pool_steps import NO_STEP, choose_steps, solve_with_steps
from planner.placement.result import plan_frames
from planner.placement.solve import solve_instance
from planner.scenario import parse_scenario

GAINS = [(2, 1.2), (4, 1.5)]


def carried(n: int) -> float:
    """What n replicas carry under the table's law (the gain of the largest size <= n)."""
    gain = max([1.0] + [g for size, g in GAINS if size <= n])
    return n * gain


def fewest(demand: float) -> int:
    return next(n for n in range(1, 100) if carried(n) >= demand - 1e-9)


def setup(demand: float, tiers=("on_demand",), spot: bool = False):
    regions = [Region("aws:us-east-1", "us", {"us-east": 10.0},
                      {("H100", "on_demand"): 2.0, ("H100", "spot"): 0.5}, quota=32)]
    rules = {"tiers": list(tiers), "redundancy": 0, "utilisation_cap": 0.5, "min_replicas_per_pool": 1,
             "spot_reliable_fraction": 1.0}
    scenario = parse_scenario(scenario_dict(regions, {"us-east": ("us", ["us"])}, {"llama": ["H100"]},
                                            {"chat": {"spot_tolerant": spot}}, capacity=rules, horizon="1h",
                                            tps={"llama": [1]}))
    demand_frame = demand_from_forecast(forecast({("us-east", "llama", "chat"): [demand]}), scenario, 0.95,
                                        parse_periods("hourly"))
    table = capacity([("llama", "H100", 1, "chat", 2.0)], {("llama", "H100", 1): GAINS})
    inst = build_instance(scenario, demand_frame, catalog(regions), profiles([("llama", "H100", 1)]), table)
    return scenario, demand_frame, regions, table, inst


@pytest.mark.parametrize("demand", [0.9, 2.0, 3.0, 4.5, 5.5, 6.0, 7.2, 8.9])
def test_the_program_buys_the_fewest_replicas_whose_tabulated_capacity_covers_the_demand(demand):
    *_, inst = setup(demand)
    summary = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    assert summary.status.value == "optimal", summary.message
    plan, _, _ = plan_frames(inst, summary.fleet)
    assert int(plan["replicas"].sum()) == fewest(demand)
    assert fewest(demand) <= math.ceil(demand)  # never more than a lone-replica table buys


def test_backends_agree_on_a_pooled_instance():
    *_, inst = setup(5.5)
    objectives = {b: solve_instance(inst, backend=b, time_limit_s=30, gap=0.0, strategy="direct").objective
                  for b in ("highs", "cbc", "ortools")}
    assert max(objectives.values()) == pytest.approx(min(objectives.values()), rel=1e-6)
    assert objectives["highs"] == pytest.approx(4 * 2.0, rel=1e-3)  # four replicas for an hour at 2 USD


def test_the_plan_check_charges_the_pool_its_tabulated_capacity():
    scenario, demand, regions, table, inst = setup(5.5)
    summary = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    plan, flows, loads = plan_frames(inst, summary.fleet)
    report = check_plan(plan, flows, loads, scenario=scenario, catalog=catalog(regions),
                        profiles=profiles([("llama", "H100", 1)]), capacity=table, demand=demand)
    assert report.ok, report.violations
    # one replica fewer cannot carry 5.5 req/s: 3 x 1.2 = 3.6
    fewer = plan.assign(replicas=plan["replicas"] - 1, gpus=plan["gpus"] - 1)
    report = check_plan(fewer, flows, loads, scenario=scenario, catalog=catalog(regions),
                        profiles=profiles([("llama", "H100", 1)]), capacity=table, demand=demand)
    assert any("needs" in v for v in report.violations), report.violations
    # without the pool rows, four replicas carry 4 req/s only
    lone = table[table["pool_replicas"] == 1]
    report = check_plan(plan, flows, loads, scenario=scenario, catalog=catalog(regions),
                        profiles=profiles([("llama", "H100", 1)]), capacity=lone, demand=demand)
    assert not report.ok


def test_spot_replicas_keep_the_lone_replica_capacity():
    *_, inst = setup(5.5, tiers=("spot",), spot=True)
    summary = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    plan, _, _ = plan_frames(inst, summary.fleet)
    assert set(plan["tier"]) == {"spot"} and int(plan["replicas"].sum()) == 6


def test_pool_gains_read_the_smallest_ratio_over_classes_and_only_rising_steps():
    table = validate_capacity(pd.DataFrame(
        [("m", "H100", 1, k, rate * gain, size) for size, gain in ((1, 1.0), (2, 1.3), (4, 1.3), (8, 1.6))
         for k, rate in (("a", 1.0), ("b", 2.0))]
        + [("m", "H100", 1, "a", 1.0 * 1.7, 16), ("m", "H100", 1, "b", 2.0 * 1.65, 16)],
        columns=["model", "sku", "tp_degree", "traffic_class", "max_rps_per_replica", "pool_replicas"]))
    (steps,) = pool_gains(table).values()
    assert [n for n, _ in steps] == [2, 8, 16]  # 4 adds nothing over 2
    assert steps[-1][1] == pytest.approx(1.65)  # the smaller of the two classes' ratios


def test_a_table_whose_rate_falls_as_the_pool_grows_is_refused():
    frame = pd.DataFrame([("m", "H100", 1, "a", 2.0, 1), ("m", "H100", 1, "a", 1.5, 4)],
                         columns=["model", "sku", "tp_degree", "traffic_class", "max_rps_per_replica",
                                  "pool_replicas"])
    with pytest.raises(InputError, match="less than in a smaller pool") as caught:
        validate_capacity(frame, "cap.csv")
    assert "row 2" in caught.value.message and "cap.csv" in caught.value.where


def test_a_pool_takes_the_step_that_needs_the_fewest_replicas():
    *_, inst = setup(1.0)
    load = np.array([[0.0], [0.9], [2.0], [3.0], [4.5], [5.5], [7.2], [8.9]])  # one unit, several loads
    steps = choose_steps(replace(inst, unit_pool_size=np.repeat(inst.unit_pool_size, 8, axis=0),
                                 unit_pool_gain=np.repeat(inst.unit_pool_gain, 8, axis=0),
                                 unit_cap_rps=np.repeat(inst.unit_cap_rps, 8, axis=0)), load)
    # loads in replicas at the lone rate: 3.0 needs 3 alone, max(2, 3) = 3 at step 0 (no gain in count), and
    # max(4, 2) = 4 at step 1, so no step; 4.5 needs 5 alone, 4 at step 0, 4 at step 1: the smaller step
    assert steps[:, 0].tolist() == [NO_STEP, NO_STEP, NO_STEP, NO_STEP, 0, 1, 1, 1]


@pytest.mark.parametrize("demand", [0.9, 3.0, 4.5, 7.2, 8.9, 13.0])
def test_fixing_the_chosen_steps_finds_the_fewest_replicas_on_the_hand_computed_case(demand):
    *_, inst = setup(demand)
    net = SafetyNet.starting_now(30.0)
    summary = solve_with_steps(inst, lambda fixed: solve_instance(fixed, backend="highs", gap=0.0,
                                                                  strategy="direct", net=net), net.left, 0.0)
    plan, _, _ = plan_frames(inst, summary.fleet)
    assert int(plan["replicas"].sum()) == fewest(demand)
    assert summary.bound <= summary.objective + 1e-6  # the free-step LP bound is a bound
    assert [r["status"] for r in summary.pool_steps["rounds"]][0] in ("optimal", "feasible_within_gap")

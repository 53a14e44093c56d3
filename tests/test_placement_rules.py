"""Rules every plan keeps, every infeasibility cause named, and check_plan catching tampering."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_helpers import Case, Region, capacity, catalog, forecast, profiles, scenario_dict, two_region_case

from planner.errors import ExitCode, InfeasibleError
from planner.placement import check_plan, place_plan
from planner.scenario import parse_scenario

rates = st.lists(st.sampled_from([0.0, 0.3, 1.0, 2.5, 4.0]), min_size=3, max_size=3)


def _place(case: Case, **kwargs):
    return place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                      time_limit_s=30, gap=0.0, baselines=False, periods="hourly", **kwargs)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(rates, rates, st.sampled_from([["us"], ["us", "eu"]]))
def test_spot_only_for_tolerant_classes_and_residency_kept(interactive, batch, residency):
    case = two_region_case({("us-east", "llama-3.1-8b", "interactive"): interactive,
                            ("us-east", "llama-3.1-8b", "batch"): batch}, residency=residency)
    if sum(interactive) + sum(batch) == 0:
        return
    result = _place(case)
    spot_loads = result.loads[result.loads["pool"] == "spot"]
    assert set(spot_loads["traffic_class"]) <= {"batch"}
    spot_rows = result.plan[result.plan["tier"] == "spot"]
    assert spot_rows.empty or not spot_loads.empty
    if residency == ["us"]:
        assert (result.flows["region"] == "aws:us-east-1").all()
    assert (result.flows[result.flows["traffic_class"] == "interactive"]["region"] == "aws:us-east-1").all()
    assert result.meta["check"]["ok"]


# --------------------------------------------------------------------------- diagnosis
def _single_region_case(region_offers, *, origin_residency=("us",), interactive_budget=50.0, far=None,
                        skus=("H100",), rules=None, demand=2.0) -> Case:
    regions = [Region("aws:us-east-1", "us", {"us-east": 10.0}, region_offers, quota=8)]
    if far is not None:
        regions.append(far)
    scenario = parse_scenario(scenario_dict(
        regions, {"us-east": ("us", list(origin_residency))}, {"llama-3.1-8b": list(skus)},
        {"interactive": {"latency_budget_ms": interactive_budget}}, capacity=rules or {}, horizon="2h"))
    caps = capacity([("llama-3.1-8b", s, 1, "interactive", 4.0) for s in ("H100", "L4")])
    return Case(scenario, forecast({("us-east", "llama-3.1-8b", "interactive"): [demand, demand]}), catalog(regions),
                profiles([("llama-3.1-8b", "H100", 1), ("llama-3.1-8b", "L4", 1)]), caps)


def _diagnosis(case: Case) -> InfeasibleError:
    with pytest.raises(InfeasibleError) as caught:
        _place(case)
    assert caught.value.exit_code == ExitCode.INFEASIBLE == 4
    assert "origin us-east, model llama-3.1-8b, class interactive" in caught.value.message
    return caught.value


def test_no_sku_in_an_allowed_region_can_run_the_model():
    error = _diagnosis(_single_region_case({("L4", "on_demand"): 1.0}, skus=("H100",)))
    assert "no SKU in an allowed region can run the model" in error.message


def test_residency_is_named():
    far = Region("gcp:europe-west4", "eu", {"us-east": 90.0}, {("H100", "on_demand"): 2.0})
    error = _diagnosis(_single_region_case({("L4", "on_demand"): 1.0}, skus=("H100",), far=far,
                                           interactive_budget=200.0))
    assert "(residency)" in error.message and "gcp:europe-west4" in error.message


def test_latency_is_named():
    far = Region("aws:us-west-2", "us", {"us-east": 70.0}, {("H100", "on_demand"): 2.0})
    error = _diagnosis(_single_region_case({("L4", "on_demand"): 1.0}, skus=("H100",), far=far))
    assert "(latency)" in error.message and "aws:us-west-2 at 70 ms" in error.message


def test_quota_is_named():
    error = _diagnosis(_single_region_case({("H100", "on_demand"): 2.0}, demand=100.0))
    assert "(quota)" in error.message and "H100 in aws:us-east-1 (8 GPUs)" in error.message


def test_a_zero_quota_is_named_not_the_sku():
    """A quota of 0 for the only SKU left no unit at all; the diagnosis named the SKU ("allow another SKU")."""
    error = _diagnosis(_single_region_case({("H100", "on_demand"): 2.0}, rules={"quotas": {"H100": 0}}))
    assert "(quota)" in error.message and "no SKU" not in error.message
    assert "a quota of 0 GPUs (from the scenario), below the 1 GPU(s) of one replica, for H100 in aws:us-east-1" \
        in error.message and "raise the GPU quota" in error.fix


@pytest.mark.parametrize(("tiers", "why"), [
    (["spot"], 'class interactive is not spot_tolerant, and spot is the only tier enabled (capacity.tiers = ["spot"])'),
    (["on_demand", "spot"], "class interactive is not spot_tolerant, and llama-3.1-8b is offered only on spot in "
                            "aws:us-east-1"),
])
def test_spot_only_for_a_class_that_may_not_use_it_is_named(tiers, why):
    """The units existed, on spot only; the diagnosis called them dominated TP degrees of no SKU."""
    error = _diagnosis(_single_region_case({("H100", "spot"): 1.0}, rules={"tiers": tiers}))
    assert "(spot only)" in error.message and why in error.message and "dominated" not in error.message
    assert "enable on_demand or reserved in capacity.tiers, or mark the class spot_tolerant" in error.fix


def test_budget_is_named():
    error = _diagnosis(_single_region_case({("H100", "on_demand"): 2.0}, rules={"budget_usd": 1.0}))
    assert "(budget)" in error.message and "above the budget of 1.00 USD" in error.message


# --------------------------------------------------------------------------- check_plan
@pytest.fixture(scope="module")
def placed():
    case = two_region_case(residency=["us", "eu"])
    inst, demand = case.instance()
    return case, demand, _place(case)


def _check(case, demand, plan, flows, loads):
    return check_plan(plan, flows, loads, scenario=case.scenario, catalog=case.catalog, profiles=case.profiles,
                      capacity=case.capacity, demand=demand)


def test_untouched_plan_passes(placed):
    case, demand, result = placed
    report = _check(case, demand, result.plan, result.flows, result.loads)
    assert report.ok, report.violations
    assert report.total_usd == pytest.approx(result.meta["cost_usd"]["total"], abs=0.01)


def test_removed_replica_is_caught(placed):
    case, demand, result = placed
    plan = result.plan.copy()
    busiest = plan["replicas"].idxmax()
    plan.loc[busiest, "replicas"] -= 1
    plan.loc[busiest, "gpus"] -= 1
    violations = " ".join(_check(case, demand, plan, result.flows, result.loads).violations)
    assert "load needs" in violations or "usd" in violations


def test_wrong_price_is_caught(placed):
    case, demand, result = placed
    plan = result.plan.copy()
    plan.loc[0, "usd"] = plan.loc[0, "usd"] * 0.5
    assert any("the catalog price gives" in v
               for v in _check(case, demand, plan, result.flows, result.loads).violations)


def test_dropped_demand_and_residency_breach_are_caught(placed):
    case, demand, result = placed
    flows = result.flows.copy()
    flows = flows[flows["traffic_class"] != "interactive"]
    moved = result.flows[result.flows["traffic_class"] == "interactive"].assign(region="gcp:europe-west4")
    report = _check(case, demand, result.plan, pd.concat([flows, moved]), result.loads)
    assert any("exceeds the class budget" in v for v in report.violations)
    report = _check(case, demand, result.plan, flows, result.loads)
    assert any("only 0 is routed" in v or "is routed" in v for v in report.violations)


def test_interactive_on_spot_is_caught(placed):
    case, demand, result = placed
    loads = result.loads.copy()
    interactive = loads["traffic_class"] == "interactive"
    loads.loc[interactive, "pool"] = "spot"
    assert any("not spot-tolerant" in v for v in _check(case, demand, result.plan, result.flows, loads).violations)


def test_quota_breach_is_caught(placed):
    case, demand, result = placed
    plan = result.plan.copy()
    plan.loc[0, "replicas"] = 500
    plan.loc[0, "gpus"] = 500
    assert any("exceed the quota" in v for v in _check(case, demand, plan, result.flows, result.loads).violations)


# --------------------------------------------------------------------------- check_plan and tensor parallelism
BUSY = {("us-east", "llama-3.1-8b", "interactive"): [10.0, 14.0, 6.0],
        ("us-east", "llama-3.1-8b", "batch"): [8.0, 0.0, 12.0]}


@pytest.fixture(scope="module")
def placed_tp():
    """A plan that runs replicas of two H100s (they carry more per GPU than one H100) beside one-GPU ones."""
    case = two_region_case(BUSY, h100_tp2=(24.0, 40.0), quota=3)
    inst, demand = case.instance()
    result = _place(case)
    assert 2 in set(result.plan["tp_degree"]) and 1 in set(result.plan["tp_degree"])
    return case, demand, result


def _tp2_row(plan: pd.DataFrame) -> int:
    return int(plan.index[plan["tp_degree"] == 2][0])


def test_untouched_tp_plan_passes(placed_tp):
    case, demand, result = placed_tp
    assert _check(case, demand, result.plan, result.flows, result.loads).ok
    rows = result.plan
    assert (rows["gpus"] == rows["replicas"] * rows["tp_degree"]).all()


def test_gpus_that_are_not_replicas_times_tp_are_caught(placed_tp):
    case, demand, result = placed_tp
    plan = result.plan.copy()
    row = _tp2_row(plan)
    plan.loc[row, "gpus"] = plan.loc[row, "replicas"]  # priced as if each replica had one GPU
    violations = _check(case, demand, plan, result.flows, result.loads).violations
    assert any(f"gpus {plan.loc[row, 'replicas']} != {plan.loc[row, 'replicas']} replicas × 2 GPUs" in v
               for v in violations), violations


def test_a_tp_degree_the_scenario_does_not_allow_is_caught(placed_tp):
    case, demand, result = placed_tp
    model = case.scenario.model("llama-3.1-8b").model_copy(update={"tp": (1,)})
    scenario = case.scenario.model_copy(update={"models": (model,)})
    assert scenario.allowed_tps("llama-3.1-8b") == (1,)
    report = check_plan(result.plan, result.flows, result.loads, scenario=scenario, catalog=case.catalog,
                        profiles=case.profiles, capacity=case.capacity, demand=demand)
    assert any("TP 2 is not allowed for llama-3.1-8b" in v for v in report.violations), report.violations


def test_a_model_sku_and_tp_without_a_profile_is_caught(placed_tp):
    case, demand, result = placed_tp
    profiles_tp1 = case.profiles[case.profiles["tp_degree"] == 1]
    report = check_plan(result.plan, result.flows, result.loads, scenario=case.scenario, catalog=case.catalog,
                        profiles=profiles_tp1, capacity=case.capacity, demand=demand)
    assert any("no profile of llama-3.1-8b on 2 x H100" in v for v in report.violations), report.violations


def test_the_quota_counts_tp_times_replicas_gpus(placed_tp):
    case, demand, result = placed_tp
    plan = result.plan.copy()
    row = _tp2_row(plan)
    # two replicas of two H100s: 4 GPUs (the row is consistent) over the quota of 3, though 2 replicas are not
    plan.loc[row, ["replicas", "gpus"]] = [2, 4]
    plan.loc[row, "usd"] = plan.loc[row, "usd"] * 2
    violations = _check(case, demand, plan, result.flows, result.loads).violations
    assert any("H100 GPUs in aws:us-east-1" in v and "exceed the quota of 3" in v for v in violations), violations


def test_tp_load_on_the_wrong_degree_is_caught(placed_tp):
    """Loads are checked per (region, SKU, TP): the TP 2 load moved onto the TP 1 replicas overflows them."""
    case, demand, result = placed_tp
    loads = result.loads.copy()
    loads.loc[loads["tp_degree"] == 2, "tp_degree"] = 1
    assert any("load needs" in v for v in _check(case, demand, result.plan, result.flows, loads).violations)

"""Plans that make economic sense: the pool minimum, reserved capacity priced by its term,
deterministic bounds and baselines with their status, and the cheaper single-SKU plan returned."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from placement_helpers import Case, Region, capacity, catalog, forecast, profiles, scenario_dict, two_region_case

from planner.placement import highs_backend, place_plan
from planner.placement import place as place_module
from planner.placement.bounds import (
    ELASTIC_GAP,
    SingleSku,
    best_single_sku,
    elastic_bound,
    period_instance,
    reference_status,
)
from planner.placement.limits import SafetyNet
from planner.placement.problem import formulate
from planner.placement.result import Fleet
from planner.placement.solve import solve_instance
from planner.scenario import parse_scenario

MODEL = "llama-3.1-8b"


def _l4_case(demand: list[float], rules: dict) -> Case:
    """One region, one SKU (L4: 1 req/s interactive per replica after the cap), reserved at half the on-demand price."""
    regions = [Region("aws:us-east-1", "us", {"us-east": 10.0},
                      {("L4", "reserved"): 0.5, ("L4", "on_demand"): 1.0}, quota=64)]
    scenario = parse_scenario(scenario_dict(
        regions, {"us-east": ("us", ["us"])}, {MODEL: ["L4"]}, {"interactive": {"latency_budget_ms": 50.0}},
        capacity={"utilisation_cap": 0.5, "redundancy": 1, **rules}, horizon=f"{len(demand)}h"))
    return Case(scenario, forecast({("us-east", MODEL, "interactive"): demand}), catalog(regions),
                profiles([(MODEL, "L4", 1)]), capacity([(MODEL, "L4", 1, "interactive", 2.0)]))


def _place(case: Case, **kwargs):
    return place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                      time_limit_s=60, gap=0.0, periods="hourly", **{"baselines": False, **kwargs})


def _replicas(result, tier: str | None = None) -> dict[str, int]:
    plan = result.plan if tier is None else result.plan[result.plan["tier"] == tier]
    return {str(k): int(v) for k, v in plan.groupby("period")["replicas"].sum().items()}


# --------------------------------------------------------------------------- the pool minimum
@pytest.mark.parametrize("floor", [1, 2, 3])
def test_every_serving_pool_keeps_the_minimum_replicas_in_every_period(floor):
    result = _place(_l4_case([0.5, 0.2, 0.5], {"min_replicas_per_pool": floor, "tiers": ["on_demand"]}))
    counts = _replicas(result)
    assert len(counts) == 3 and min(counts.values()) == floor  # 0.5 req/s needs one replica; the floor asks more
    assert result.meta["check"]["ok"] and "pool_floor" in result.meta["check"]["checks"]


def test_an_idle_spot_replica_is_no_second_replica_for_classes_that_may_not_use_spot():
    case = two_region_case({("us-east", MODEL, "interactive"): [0.3, 0.3]},
                           capacity_rules={"redundancy": 1, "min_replicas_per_pool": 2}, residency=["us"])
    result = _place(case)
    assert (result.plan["tier"] != "spot").all()
    steady = result.plan.groupby(["period", "region", "model"])["replicas"].sum()
    assert (steady == 2).all()


def test_with_no_redundancy_a_spot_only_pool_counts_its_spot_replicas():
    case = two_region_case({("us-east", MODEL, "batch"): [4.0, 4.0]},
                           capacity_rules={"redundancy": 0, "min_replicas_per_pool": 3}, residency=["us"])
    result = _place(case)
    pools = result.plan.groupby(["period", "region", "model"])["replicas"].sum()
    assert (pools >= 3).all()
    assert (result.plan["tier"] == "spot").any()
    assert result.meta["check"]["ok"]


def test_the_default_pool_minimum_is_two():
    result = _place(_l4_case([0.5, 0.5], {"tiers": ["on_demand"]}))
    assert set(_replicas(result).values()) == {2}


# --------------------------------------------------------------------------- reserved and its term
PEAKY = [4.0, 4.0, 4.0, 4.0, 1.0, 1.0]  # replicas needed: 4 for two thirds of the horizon, then 1


def test_a_term_longer_than_the_horizon_reserves_only_the_sustained_load():
    rules = {"min_replicas_per_pool": 1}
    whole = _place(_l4_case(PEAKY, {**rules, "reserved_term": "6h"}))
    assert set(_replicas(whole, "reserved").values()) == {4}  # used 2/3 of the term, break-even 1/2: reserve it
    year = _place(_l4_case(PEAKY, {**rules, "reserved_term": "365d"}))
    # 1 replica of load in the quietest hour + the floor of 1: two reserved, the peak on demand
    assert set(_replicas(year, "reserved").values()) == {2}
    assert _replicas(year, "on_demand") == {p: 2 for p in list(_replicas(year))[:4]}
    assert year.meta["check"]["ok"]
    assert year.meta["cost_usd"]["total"] > whole.meta["cost_usd"]["total"]


def _evidence(steady_rps: float, limited: bool = True) -> dict:
    return {"history_hours": 336, "needed_hours": 1344, "steady_rps": {MODEL: steady_rps}, "limited": limited,
            "allowed_by_option": not limited}


def test_a_history_short_for_the_term_holds_reserved_replicas_to_its_steady_load():
    """PEAKY's quietest hour needs 1 replica (1 req/s at 1 per replica); a history that sustained only 0.5 req/s
    scales that to half a replica: one reserved replica (the floor of 1, and half a replica of load rounds down)."""
    rules = {"min_replicas_per_pool": 1}
    year = _place(_l4_case(PEAKY, rules))
    short = _place(_l4_case(PEAKY, rules), reserved_evidence=_evidence(0.5))
    assert set(_replicas(year, "reserved").values()) == {2}
    assert set(_replicas(short, "reserved").values()) == {1}
    assert set(_replicas(short).values()) == {4, 1}  # the peak on demand, and no idle second replica at night
    assert short.meta["check"]["ok"]
    assert "--commit-on-short-history" in short.meta["reserved"]["rule"]
    assert short.meta["reserved"]["evidence"]["load_scale"] == {MODEL: 0.5}
    allowed = _place(_l4_case(PEAKY, rules), reserved_evidence=_evidence(0.5, limited=False))
    assert _replicas(allowed, "reserved") == _replicas(year, "reserved")
    assert allowed.meta["reserved"]["evidence"]["allowed_by_option"] is True


def test_the_history_evidence_is_its_span_and_each_models_steady_rate():
    from planner.placement.reserved import history_evidence

    hours = pd.date_range("2026-10-01", periods=14 * 24, freq="h", tz="UTC")
    rate = np.where(np.arange(hours.size) % 24 < 12, 7200.0, 3600.0)  # 2 req/s by day, 1 by night
    rate[5] = 0.0  # an outage hour does not set the steady load
    history = pd.DataFrame({"ts": hours.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-east", "model": MODEL,
                            "traffic_class": "interactive", "requests": rate})
    short = history_evidence(history, 8760, allow=False)
    assert short == {"history_hours": 336, "needed_hours": 1344, "steady_rps": {MODEL: 1.0}, "limited": True,
                     "allowed_by_option": False}
    assert history_evidence(history, 8760, allow=True)["limited"] is False
    assert history_evidence(history, 24 * 30, allow=False)["limited"] is False  # 8 weeks a year of a month: 4 days


def test_units_with_no_on_demand_offer_may_still_reserve_the_peak():
    result = _place(_l4_case(PEAKY, {"min_replicas_per_pool": 1, "tiers": ["reserved"]}))
    assert set(_replicas(result, "reserved").values()) == {4}


def test_the_break_even_utilisation_is_in_the_plan_json():
    result = _place(_l4_case(PEAKY, {"min_replicas_per_pool": 1}))
    reserved = result.meta["reserved"]
    assert reserved["term_hours"] == 8760 and reserved["horizon_hours"] == 6.0
    assert "shorter than the reserved term" in reserved["rule"]
    assert reserved["break_even"] == [{"region": "aws:us-east-1", "sku": "L4", "reserved_usd_per_gpu_hour": 0.5,
                                       "on_demand_usd_per_gpu_hour": 1.0, "break_even_utilisation": 0.5}]


# --------------------------------------------------------------------------- bounds and baselines
def test_bounds_and_baselines_carry_their_status_and_repeat():
    case = two_region_case()
    first, second = (_place(case, baselines=True) for _ in range(2))
    for result in (first, second):
        meta = result.meta
        assert meta["lower_bounds"]["perfectly_elastic"]["status"] in ("optimal", "feasible_within_gap", "node_limit")
        assert meta["baselines"]["best_single_sku"]["status"] in ("optimal", "feasible_within_gap", "node_limit")
        assert meta["lower_bounds_status"]["lp_relaxation_usd"] == {"status": "optimal"}
        assert meta["lower_bounds_status"]["best_proven_usd"]["status"] == "optimal"
    assert first.meta["lower_bounds"] == second.meta["lower_bounds"]
    assert first.meta["baselines"] == second.meta["baselines"]


def test_references_run_beside_the_search_in_processes_of_their_own_give_the_same_figures(monkeypatch):
    """On this small program, solving the baseline's programs block by block finds the same plans."""
    case = two_region_case()
    here = _place(case, baselines=True)
    monkeypatch.setattr(place_module, "DIRECT_MAX_INTEGERS", 0)  # as on a program too large for one block
    spawned: list[tuple[str, str]] = []
    real = place_module.in_background

    def counted(fn, task):
        spawned.append((fn.__name__, task.strategy))
        return real(fn, task)

    monkeypatch.setattr(place_module, "in_background", counted)
    beside = _place(case, baselines=True)
    # the baseline's programs are solved block by block, as the search's are on a program that large
    assert sorted(spawned) == [("_baseline", "decomposed"), ("_elastic", "decomposed")]
    assert beside.meta["lower_bounds"] == here.meta["lower_bounds"]
    assert beside.meta["baselines"] == here.meta["baselines"]
    pd.testing.assert_frame_equal(beside.plan, here.plan)


def test_a_bound_the_safety_net_stops_is_not_reported():
    inst, _ = two_region_case().instance()
    expired = SafetyNet(time.monotonic() - 1.0)
    elastic = elastic_bound(inst, expired)
    assert elastic["usd"] is None and elastic["status"] == "time_limit"
    single = best_single_sku(inst, backend="highs", gap=0.01, node_limit=100, net=SafetyNet(time.monotonic() - 1.0))
    assert single.figures["usd"] is None and single.figures["status"] == "time_limit" and single.fleet is None


def test_the_elastic_bound_is_the_same_solved_side_by_side_or_one_period_at_a_time():
    inst, _ = two_region_case({("us-east", MODEL, "interactive"): [1.5, 3.0, 0.5, 6.0, 2.5],
                               ("us-east", MODEL, "batch"): [2.0, 0.0, 4.0, 1.0, 9.0]}).instance()
    one = elastic_bound(inst, SafetyNet.starting_now(120), threads=1)
    side = elastic_bound(inst, SafetyNet.starting_now(120), threads=3)
    assert one == side and one["periods_solved_as_milp"] == 5
    # the oracle: each period's MILP solved to optimality on its own, summed
    optima = [highs_backend.solve(formulate(period_instance(inst, t), budget=False, cuts=False),
                                  time_limit_s=60, gap=0.0) for t in range(inst.n_periods)]
    assert all(o.status.value == "optimal" for o in optima)
    exact = sum(o.objective for o in optima)
    assert one["status"] in ("optimal", "feasible_within_gap")
    assert exact * (1 - ELASTIC_GAP) - 1e-6 <= one["usd"] <= exact + 1e-6


def test_a_period_infeasible_on_its_own_is_named_whichever_thread_solved_it():
    # 300 req/s interactive in the second hour: more than the 4 GPUs of quota per region can carry
    inst, _ = two_region_case({("us-east", MODEL, "interactive"): [1.5, 300.0, 0.5, 2.0]}, quota=4).instance()
    for threads in (1, 2):
        elastic = elastic_bound(inst, SafetyNet.starting_now(120), threads=threads)
        assert elastic["status"] == "infeasible" and elastic["usd"] is None
        assert elastic["note"] == f"period {inst.periods.labels[1]} is infeasible on its own"


def test_the_single_sku_plan_is_returned_when_it_is_cheaper(monkeypatch):
    case = two_region_case()

    def worse_search(inst, **kwargs):  # a search that ended far above the optimum
        summary = solve_instance(inst, **kwargs)
        replicas = summary.fleet.replicas.copy()
        replicas[0, inst.tier_index("on_demand"), :] += 5
        return replace(summary, fleet=Fleet(replicas, summary.fleet.flows, summary.fleet.loads))

    monkeypatch.setattr(place_module, "solve_instance", worse_search)
    result = _place(case, baselines=True)
    single = result.meta["baselines"]["best_single_sku"]
    assert result.meta["plan_source"] == "best_single_sku"
    assert result.meta["notes"] == ["the single-SKU plan was cheaper: returned it"]
    assert result.plan["sku"].nunique() == 1 and result.plan["sku"].iloc[0] == single["sku"]
    assert result.meta["cost_usd"]["total"] == pytest.approx(single["usd"], rel=1e-4)
    assert result.meta["check"]["ok"]


def test_the_searched_plan_is_kept_when_no_baseline_beats_it():
    result = _place(two_region_case(), baselines=True)
    assert result.meta["plan_source"] == "search" and result.meta["notes"] == []


def test_a_baseline_the_safety_net_stops_makes_the_plan_not_reproducible(monkeypatch):
    finished = _place(two_region_case(), baselines=True)
    assert finished.meta["reproducible"] is True and finished.meta["time_limit_hits"] == []
    # its plan would replace the searched one if it were cheaper, so a run that finishes it may return another plan
    stopped = SingleSku({"usd": None, "note": "the L4 solve was stopped by the wall-clock safety net",
                         **reference_status("time_limit")})
    monkeypatch.setattr(place_module, "best_single_sku", lambda inst, **kwargs: stopped)
    meta = _place(two_region_case(), baselines=True).meta
    assert meta["baselines"]["best_single_sku"]["status"] == "time_limit"
    assert meta["reproducible"] is False
    assert meta["time_limit_hits"] == ["the single-SKU baseline, whose plan replaces a dearer one (the L4 solve was "
                                       "stopped by the wall-clock safety net)"]
    assert any("may differ between runs" in w for w in meta["warnings"])

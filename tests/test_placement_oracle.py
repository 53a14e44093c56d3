"""The placement MILP against exhaustive search on tiny random instances, and monotonicity.

The oracle shares no code with the formulation. For a tiny instance (one origin, one model,
at most three units, at most two periods, a quota of two GPUs per (region, SKU)) it
enumerates every serving set Y, every reserved vector R and, period by period (dynamic
programming over the previous on-demand vector, for the switching cost), every on-demand
and spot vector. A unit is (region, SKU, TP): in the one-region cases the first SKU may
also run replicas of two GPUs (TP 2) beside its one-GPU replicas, two units that share the
(region, SKU)'s quota, so the oracle counts GPUs (TP × replicas) against it. For each
fleet it checks quotas, redundancy and the pool minimum P itself (a region in Y keeps
max(N, P, 1) reserved or on-demand replicas in every period) and solves the routing of
the demand as a small LP with scipy (Mélange capacity per unit, spot only for
spot-tolerant classes at φ of its rate, flows allowed by residency and latency only to
regions in Y, or with N = 0 for a spot-tolerant class to the regions that have P replicas
of any tier in that period), whose value is the latency tie-break penalty. When the
horizon is shorter than the reserved term, the routing LP also holds a region's reserved
replicas of units offered on demand to at most its steady load (in replicas) plus
max(N, P, 1).
The optimum over all fleets must equal the MILP's. A unit may carry more per replica in a pool
of two (a capacity table calibrated at pool sizes 1 and 2): the oracle then gives its steady
replicas n · g(n) replicas' worth of capacity, g(n) the gain of the largest pool size ≤ n.

Placement leaves out a TP unit that a smaller TP of the same (region, SKU, model)
dominates; on instances that always have a TP 2 unit, the exhaustive optimum with every
TP unit kept must equal the MILP's optimum without the dominated ones.
"""

from __future__ import annotations

import itertools
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_helpers import Region, capacity, catalog, forecast, profiles, scenario_dict
from scipy.optimize import linprog

from planner.placement.instance import build_instance
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.placement.solve import solve_instance
from planner.scenario import parse_scenario

TIER_NAMES = ("reserved", "on_demand", "spot")


@st.composite
def tiny_builders(draw, with_tp2: bool = False):
    """A tiny problem, as a function of ``keep_dominated`` (build it with every TP unit) to its instance.

    ``with_tp2``: always one region whose first SKU also runs TP 2 replicas.
    """
    two_regions = False if with_tp2 else draw(st.booleans())
    skus = ["L4", "H100"][: 1 if two_regions else draw(st.integers(1, 2))]
    # one region: the first SKU may also run TP 2 replicas, carrying 1.5x, 2x or 3x a TP 1
    # replica of each class (at most 2x in every class: dominated by two TP 1 replicas)
    tp2 = {k: draw(st.sampled_from([1.5, 2.0, 3.0])) for k in ("interactive", "batch")} \
        if with_tp2 or (not two_regions and draw(st.booleans())) else {}
    tiers = draw(st.sets(st.sampled_from(TIER_NAMES), min_size=1, max_size=3))
    prices = {}
    for sku in skus:
        base = draw(st.sampled_from([0.5, 1.0, 2.0, 3.0]))
        prices[(sku, "reserved")] = base * 0.6
        prices[(sku, "on_demand")] = base
        prices[(sku, "spot")] = base * draw(st.sampled_from([0.2, 0.4]))
    regions = [Region("aws:us-east-1", "us", {"us-east": 10.0}, dict(prices), quota=2)]
    if two_regions:
        far_prices = {key: value * draw(st.sampled_from([0.7, 1.0, 1.3])) for key, value in prices.items()}
        regions.append(Region("aws:us-west-2", "us", {"us-east": 70.0}, far_prices, quota=2))
    periods = draw(st.integers(1, 2))
    rates = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5])
    demand = {("us-east", "m", "interactive"): [draw(rates) for _ in range(periods)],
              ("us-east", "m", "batch"): [draw(rates) for _ in range(periods)]}
    rules = {"tiers": sorted(tiers), "redundancy": draw(st.integers(0, 2)), "utilisation_cap": 0.5,
             "spot_reliable_fraction": draw(st.sampled_from([0.5, 1.0])),
             "switching_cost_usd": draw(st.sampled_from([0.0, 0.5])),
             "min_replicas_per_pool": draw(st.integers(1, 3)), "reserved_term": draw(st.sampled_from(["1h", "365d"]))}
    scenario = parse_scenario(scenario_dict(
        regions, {"us-east": ("us", ["us"])}, {"m": skus},
        {"interactive": {"latency_budget_ms": draw(st.sampled_from([50.0, 100.0]))},
         "batch": {"latency_budget_ms": 100.0, "spot_tolerant": True}},
        capacity=rules, horizon=f"{periods}h"))
    rows = [("m", s, 1, k, draw(st.sampled_from([1.0, 2.0, 3.0])) * (2 if s == "H100" else 1))
            for s in skus for k in ("interactive", "batch")]
    rows += [("m", s, 2, k, tp2[k] * rate) for _, s, _, k, rate in rows if tp2 and s == skus[0]]
    units = [("m", s, 1) for s in skus] + ([("m", skus[0], 2)] if tp2 else [])
    # a pool of two TP 1 replicas may carry more per replica than one (planner calibrate --pool-sizes 1,2)
    pools = {("m", s, 1): [(2, gain)] for s in skus if (gain := draw(st.sampled_from([None, 1.25, 1.5])))}
    demand_frame = demand_from_forecast(forecast(demand), scenario, 0.95, parse_periods("hourly"))

    def build(keep_dominated: bool = False):
        def instance():
            return build_instance(scenario, demand_frame, catalog(regions), profiles(units), capacity(rows, pools))

        if not keep_dominated:
            return instance()
        with mock.patch("planner.placement.instance._dominating_tp", return_value=None):
            return instance()

    return build


def tiny_cases():
    """Tiny instances as placement builds them (dominated TP units left out)."""
    return tiny_builders().map(lambda build: build())


def _pool_capacity(inst, u: int, n: int) -> float:
    """n steady replicas of unit u carry n · g_u(n) replicas' worth: the gain of the largest pool size <= n."""
    gain = 1.0
    if inst.unit_pool_size is not None:
        for size, step in zip(inst.unit_pool_size[u], inst.unit_pool_gain[u], strict=True):
            if 0 < size <= n:
                gain = max(gain, float(step))
    return n * gain


def _route_penalty(inst, t: int, serving: tuple[int, ...], tolerant_to: tuple[int, ...], steady: np.ndarray,
                   spot: np.ndarray, held: np.ndarray | None) -> float:
    """Least latency penalty to route period t's demand with this fleet, or inf if it cannot be routed.

    ``held``: per region, the reserved replicas the sustained-load rule must cover (None: no rule).
    """
    o, m = 0, 0
    columns = []  # (unit, class, pool)
    for u in range(inst.n_units):
        for k in range(len(inst.classes)):
            if inst.unit_cap_rps[u, k] <= 0 or not inst.eligible[o, k, inst.unit_region[u]]:
                continue
            if inst.unit_region[u] not in (tolerant_to if inst.spot_tolerant[k] else serving):
                continue
            columns.append((u, k, 0))
            if inst.spot_tolerant[k]:
                columns.append((u, k, 1))
    demand = inst.demand_rps[o, m, :, t]
    if not columns:
        return 0.0 if demand.sum() == 0 else math.inf
    n = len(columns)
    cost = np.array([inst.latency_penalty * 3600.0 * inst.periods.hours[t] * inst.rtt_ms[o, inst.unit_region[u]]
                     for u, _, _ in columns])
    a_eq = np.zeros((len(inst.classes), n))
    for j, (_, k, _) in enumerate(columns):
        a_eq[k, j] = 1.0
    a_ub, b_ub = [], []
    for u in range(inst.n_units):
        for pool, count, scale in ((0, _pool_capacity(inst, u, int(steady[u])), 1.0),
                                   (1, spot[u], inst.spot_fraction)):
            row = np.zeros(n)
            for j, (uu, k, p) in enumerate(columns):
                if uu == u and p == pool:
                    row[j] = 1.0 / (scale * inst.unit_cap_rps[u, k])
            if row.any():
                a_ub.append(row)
                b_ub.append(float(count))
    floor = max(inst.redundancy, inst.min_replicas_per_pool, 1)
    sigma = 1.0 if inst.reserved_load_scale is None else float(inst.reserved_load_scale[m])  # a short history's
    for region, reserved in enumerate(held if held is not None else []):
        if reserved > 0:  # reserved ≤ σ steady load + floor, i.e. -σ load ≤ floor - reserved
            a_ub.append(np.array([-sigma / inst.unit_cap_rps[u, k] if inst.unit_region[u] == region and p == 0
                                  else 0.0 for u, k, p in columns]))
            b_ub.append(float(floor - reserved))
    result = linprog(cost, A_ub=np.array(a_ub) if a_ub else None, b_ub=np.array(b_ub) if b_ub else None,
                     A_eq=a_eq, b_eq=demand, bounds=(0, None), method="highs")
    return float(result.fun) if result.status == 0 else math.inf


def oracle(inst) -> float:
    """Exhaustive optimum of the placement objective (rental + switching + latency penalty)."""
    U, T = inst.n_units, inst.n_periods
    hours = inst.periods.hours
    price = np.nan_to_num(inst.unit_price, nan=0.0) * inst.unit_gpus[:, None]
    offered = {tier: np.isfinite(inst.unit_price[:, i]) & (tier in inst.tiers) for i, tier in enumerate(TIER_NAMES)}
    spot_ok = offered["spot"] & (inst.unit_cap_rps[:, inst.spot_tolerant] > 0).any(axis=1) & (inst.spot_fraction > 0)
    most = inst.unit_max_replicas
    ranges = {name: [range(int(most[u]) + 1) if ok[u] else range(1) for u in range(U)]
              for name, ok in (("R", offered["reserved"]), ("D", offered["on_demand"]), ("S", spot_ok))}
    regions = sorted(set(inst.unit_region.tolist()))
    routed: dict[tuple, float] = {}

    def penalty_of(t: int, serving: tuple[int, ...], tolerant_to: tuple[int, ...], steady: np.ndarray,
                   spot: np.ndarray, held: np.ndarray | None) -> float:
        key = (t, serving, tolerant_to, steady.tobytes(), spot.tobytes(), None if held is None else held.tobytes())
        if key not in routed:
            routed[key] = _route_penalty(inst, t, serving, tolerant_to, steady, spot, held)
        return routed[key]

    need = max(inst.redundancy, 1)  # a serving region keeps this many steady replicas in every period
    pool = inst.min_replicas_per_pool  # steady ones in Y; of any tier where spot-tolerant traffic goes with N = 0
    flexible = offered["reserved"] & offered["on_demand"]  # reserved units the sustained-load rule holds
    subsets = [c for size in range(len(regions) + 1) for c in itertools.combinations(regions, size)]
    best = math.inf
    for serving in subsets:
        for reserved in itertools.product(*ranges["R"]):
            r_vec = np.array(reserved)
            held = None
            if inst.reserved_sustained_only:
                held = np.zeros(len(inst.regions))
                np.add.at(held, inst.unit_region, r_vec * flexible)
            base = float(inst.total_hours * (price[:, 0] * r_vec).sum())
            states = {(0,) * U: 0.0}
            for t in range(T):
                nxt: dict[tuple[int, ...], float] = {}
                for on_demand in itertools.product(*ranges["D"]):
                    d_vec = np.array(on_demand)
                    steady = r_vec + d_vec
                    for spot in itertools.product(*ranges["S"]):
                        s_vec = np.array(spot)
                        gpus = np.zeros_like(inst.quota_gpus)
                        np.add.at(gpus, (inst.unit_region, inst.unit_sku), (steady + s_vec) * inst.unit_gpus)
                        if (gpus > inst.quota_gpus).any():
                            continue
                        if any(steady[inst.unit_region == r].sum() < max(need, pool) for r in serving):
                            continue
                        tolerant_to = serving if inst.redundancy > 0 else tuple(
                            r for r in regions if (steady + s_vec)[inst.unit_region == r].sum() >= pool)
                        penalty = penalty_of(t, serving, tolerant_to, steady, s_vec, held)
                        if not math.isfinite(penalty):
                            continue
                        rental = hours[t] * float((price[:, 1] * d_vec + price[:, 2] * s_vec).sum())
                        for previous, value in states.items():
                            switch = (inst.switching_cost_usd * np.abs(d_vec - np.array(previous)).sum()
                                      if t > 0 else 0.0)
                            total = value + switch + rental + penalty
                            if total < nxt.get(on_demand, math.inf):
                                nxt[on_demand] = total
                states = nxt
            if states:
                best = min(best, base + min(states.values()))
    return best


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases())
def test_milp_optimum_equals_exhaustive_search(inst):
    assert_the_optimum_is_the_oracles(inst)


def assert_the_optimum_is_the_oracles(inst) -> None:
    expected = oracle(inst)
    summary = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    if math.isinf(expected):
        assert summary.status.value == "infeasible"
        return
    assert summary.status.value == "optimal", summary.message
    assert summary.objective == pytest.approx(expected, rel=1e-6, abs=1e-6)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_cases(), st.sampled_from([0.0, 0.5]))
def test_milp_optimum_equals_exhaustive_search_when_a_short_history_scales_the_sustained_load(inst, sigma):
    """Reserved replicas held to a share σ of the sustained load (planner/placement/reserved.py): the same optimum."""
    from dataclasses import replace

    assert_the_optimum_is_the_oracles(
        replace(inst, reserved_sustained_only=True, reserved_load_scale=np.full(len(inst.models), sigma)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(tiny_cases(), st.sampled_from([1.0, 1.25, 2.0]))
def test_more_demand_never_lowers_the_optimal_cost(inst, factor):
    base = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    if not base.status.has_solution:
        return
    from dataclasses import replace

    more = solve_instance(replace(inst, demand_rps=inst.demand_rps * factor), backend="highs", time_limit_s=30,
                          gap=0.0, strategy="direct")
    if more.status.value == "infeasible":
        return  # more demand may not fit the quota at all; it never becomes cheaper
    assert more.status.value == "optimal"
    assert more.objective >= base.objective - 1e-6 * max(1.0, base.objective)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(tiny_builders(with_tp2=True))
def test_leaving_out_dominated_tp_units_keeps_the_optimum(build):
    inst, every = build(), build(keep_dominated=True)
    assert every.n_units >= inst.n_units
    if every.n_units == inst.n_units:
        return  # no TP unit was dominated
    expected = oracle(every)
    summary = solve_instance(inst, backend="highs", time_limit_s=30, gap=0.0, strategy="direct")
    if math.isinf(expected):
        assert summary.status.value == "infeasible"
        return
    assert summary.status.value == "optimal", summary.message
    assert summary.objective == pytest.approx(expected, rel=1e-6, abs=1e-6)

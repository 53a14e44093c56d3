"""Calibration's search: bisection on known predicates, monotone in the SLO, common random numbers,
and the answer re-checked by simulating the pool independently."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario_fixtures import with_tps, without_reuse

from planner.calibrate.inputs import Settings, UnitTask, build_tasks, class_shares, select_units
from planner.calibrate.probe import pair_seed, pool_config, replication_seed, run_length_s
from planner.calibrate.search import (
    CALIBRATED,
    FLOOR_FRACTION,
    GROWTH,
    GROWTH_LIMIT,
    INFEASIBLE,
    MAX_GROWTHS,
    bisect_capacity,
)
from planner.profiles import load_profiles, profile_for
from planner.profiles.step_model import StepModel
from planner.scenario import Scenario, load_scenario
from planner.sim.policies import get_policy, policy_values
from planner.sim.replica.pool import ClassSpec, PoolConfig, ReplicaSpec, draw_sample
from planner.sim.replica.run import simulate_pool
from planner.sim.workload import workloads_for
from planner.slo import p99_column
from planner.workflows.calibrate import calibrate_with_cache as calibrate

REPO_ROOT = Path(__file__).resolve().parents[1]
FAST = {"duration_s": 300.0, "replications": 3, "engine": "local", "search_settings": False}
"""At the profile's default engine setting: the proof of :mod:`planner.calibrate.search` is about
one setting's bisection (``start=None``); the setting search is ``test_calibrate_settings.py``'s."""
STANDARD_ONLY = {"standard": 1.0}


@pytest.fixture(scope="module")
def demo() -> Scenario:
    return load_scenario(REPO_ROOT / "scenarios/demo.toml")


@pytest.fixture(scope="module")
def scenario(demo) -> Scenario:
    """The demo with llama-3.1-8b on one GPU only: one unit per SKU."""
    return with_tps(demo, (1,))


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


def with_slos(scenario: Scenario, slos: dict[str, tuple[float, ...]]) -> Scenario:
    """The scenario with (ttft_p99_ms, e2e_p99_ms[, tpot_p99_ms]) replaced for the named classes."""
    fields = ("ttft_p99_ms", "e2e_p99_ms", "tpot_p99_ms")
    classes = tuple(k.model_copy(update=dict(zip(fields, slos[k.name], strict=False)))
                    if k.name in slos else k for k in scenario.classes)
    return scenario.model_copy(update={"classes": classes})


# ----------------------------------------------------------------------------- bisection on known predicates
@dataclass(frozen=True)
class Point:
    rate_rps: float
    ok: bool


def threshold(t: float):
    return lambda rate: Point(rate, rate <= t)


@pytest.mark.parametrize("t", [0.05, 0.3, 0.77, 0.999])
def test_bisection_brackets_a_sharp_threshold_within_rel_tol(t):
    out = bisect_capacity(threshold(t), 1.0, 0.02)
    assert out.status == CALIBRATED
    assert out.rate_rps <= t < out.hi.rate_rps
    assert out.hi.rate_rps - out.rate_rps <= 0.02 * out.hi.rate_rps
    assert all(p.ok == (p.rate_rps <= t) for p in out.probes)


def test_bisection_grows_past_a_conservative_ceiling_and_stops_at_the_growth_limit():
    grown = bisect_capacity(threshold(2.0), 1.0, 0.02)
    assert grown.status == CALIBRATED and 1.96 <= grown.rate_rps <= 2.0
    capped = bisect_capacity(threshold(1e9), 1.0, 0.02)
    assert capped.status == GROWTH_LIMIT
    assert capped.rate_rps == pytest.approx(GROWTH ** MAX_GROWTHS)


def test_bisection_is_infeasible_below_the_floor_probed_last():
    out = bisect_capacity(threshold(0.5 * FLOOR_FRACTION), 1.0, 0.02)
    assert out.status == INFEASIBLE and out.rate_rps == 0.0 and out.lo is None
    assert out.probes[-1].rate_rps == FLOOR_FRACTION and out.hi is out.probes[-1]
    assert not any(p.ok for p in out.probes)


def floor_first(ok, ceiling: float, rel_tol: float):
    """The search as it was with the floor probed first: (status, rate, rates visited)."""
    lo = ok(FLOOR_FRACTION * ceiling)
    seen = [lo.rate_rps]
    if not lo.ok:
        return INFEASIBLE, 0.0, seen
    hi = ok(ceiling)
    seen.append(hi.rate_rps)
    growths = 0
    while hi.ok:
        lo = hi
        if growths == MAX_GROWTHS:
            return GROWTH_LIMIT, lo.rate_rps, seen
        growths += 1
        hi = ok(GROWTH * hi.rate_rps)
        seen.append(hi.rate_rps)
    while hi.rate_rps - lo.rate_rps > rel_tol * hi.rate_rps:
        mid = ok(0.5 * (lo.rate_rps + hi.rate_rps))
        seen.append(mid.rate_rps)
        lo, hi = (mid, hi) if mid.ok else (lo, mid)
    return CALIBRATED, lo.rate_rps, seen


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10_000), slo=st.floats(0.001, 3.0), rel_tol=st.sampled_from([0.01, 0.02, 0.05, 0.2]))
def test_the_floor_probed_last_gives_the_answer_of_the_floor_probed_first_wherever_the_floor_holds(seed, slo,
                                                                                                   rel_tol):
    upper = noisy_bounds(seed)

    def ok(rate):
        return Point(rate, upper(rate) <= slo)

    status, rate, seen = floor_first(ok, 1.0, rel_tol)
    out = bisect_capacity(ok, 1.0, rel_tol)
    visited = [p.rate_rps for p in out.probes]
    if ok(FLOOR_FRACTION).ok:
        assert (out.status, out.rate_rps) == (status, rate)
        assert visited == seen[1:] + ([FLOOR_FRACTION] if rate == FLOOR_FRACTION else [])
    else:  # the floor misses: infeasible as before, unless a higher visited rate held (then it is the answer)
        held = [p.rate_rps for p in out.probes if p.ok]
        assert out.rate_rps == (max(held) if held else 0.0)
        assert (out.status == INFEASIBLE) == (not held)


def test_a_start_that_holds_replaces_the_floor():
    start = Point(0.5, True)
    out = bisect_capacity(threshold(0.77), 1.0, 0.02, start)
    assert out.probes[0] is start and out.probes[1].rate_rps == 1.0  # no floor probe: on to the ceiling
    assert out.status == CALIBRATED and out.rate_rps <= 0.77 < out.hi.rate_rps
    above = bisect_capacity(threshold(2.0), 1.0, 0.02, Point(1.2, True))  # a start above the ceiling grows from it
    assert above.probes[1].rate_rps == pytest.approx(GROWTH * 1.2) and 1.96 <= above.rate_rps <= 2.0
    with pytest.raises(ValueError, match="only start from a rate that holds"):
        bisect_capacity(threshold(0.77), 1.0, 0.02, Point(0.9, False))


def test_a_known_miss_at_the_ceiling_is_the_first_hi_and_not_probed_again():
    seen = []

    def ok(rate):
        seen.append(rate)
        return threshold(0.6)(rate)

    miss = Point(1.0, False)
    out = bisect_capacity(ok, 1.0, 0.02, miss=miss)
    assert out.probes[0] is miss and 1.0 not in seen
    assert out.status == CALIBRATED and out.rate_rps <= 0.6 < out.hi.rate_rps
    assert out.rate_rps == bisect_capacity(threshold(0.6), 1.0, 0.02).rate_rps  # the same visits otherwise
    with pytest.raises(ValueError, match="known miss"):
        bisect_capacity(ok, 1.0, 0.02, miss=Point(0.9, False))


def noisy_bounds(seed: int):
    """A fixed, non-monotone 'p99 bound' of the rate: increasing trend plus deterministic noise."""
    def upper(rate: float) -> float:
        noise = (zlib.crc32(f"{seed}:{rate!r}".encode()) % 1000) / 1000.0
        return rate * (1.0 + 0.6 * noise)
    return upper


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10_000), tight=st.floats(0.001, 3.0), factor=st.floats(1.0, 4.0),
       rel_tol=st.sampled_from([0.01, 0.02, 0.05, 0.2]))
def test_looser_threshold_never_gives_less_even_when_the_predicate_is_not_monotone(seed, tight, factor, rel_tol):
    upper = noisy_bounds(seed)
    a = bisect_capacity(lambda r: Point(r, upper(r) <= tight), 1.0, rel_tol)
    b = bisect_capacity(lambda r: Point(r, upper(r) <= tight * factor), 1.0, rel_tol)
    assert b.rate_rps >= a.rate_rps


# ----------------------------------------------------------------------------- monotone on the real simulator
SLO_PAIRS = [  # (tight, loose) (ttft_p99_ms, e2e_p99_ms[, tpot_p99_ms]) of class standard
    ((1500.0, 60000.0), (3000.0, 60000.0)),
    ((3000.0, 8000.0), (3000.0, 60000.0)),
    ((800.0, 5000.0), (5000.0, 90000.0)),
    ((2000.0, 20000.0), (2000.0, 20001.0)),
    ((3000.0, 60000.0, 40.0), (3000.0, 60000.0, 60.0)),
    ((3000.0, 60000.0, 60.0), (3000.0, 60000.0)),  # dropping the TPOT SLO only loosens
    ((800.0, 5000.0, 30.0), (5000.0, 90000.0, 45.0)),
]


def unit_rate(result) -> float:
    (unit,) = result.meta["units"]
    return unit["mix_rps_per_replica"]


@pytest.mark.parametrize(("tight", "loose"), SLO_PAIRS)
def test_looser_slo_never_gives_less_capacity(scenario, profiles, tmp_path, tight, loose):
    caps = []
    for slo in (tight, loose):
        result = calibrate(with_slos(scenario, {"standard": slo}), profiles, models=["llama-3.1-8b"],
                           skus=["A100-80GB"], class_mix=STANDARD_ONLY, cache_dir=tmp_path, **FAST)
        caps.append(unit_rate(result))
    assert caps[1] >= caps[0]


@settings(max_examples=8, deadline=None)
@given(ttft=st.floats(300.0, 4000.0), ttft_factor=st.floats(1.0, 2.0), e2e=st.floats(2000.0, 60000.0),
       e2e_factor=st.floats(1.0, 3.0), tpot=st.one_of(st.none(), st.floats(20.0, 1000.0)),
       tpot_factor=st.floats(1.0, 3.0))
def test_looser_slo_never_gives_less_capacity_property(scenario, profiles, tmp_path_factory, ttft, ttft_factor, e2e,
                                                       e2e_factor, tpot, tpot_factor):
    cache = tmp_path_factory.mktemp("cache")
    tight: tuple[float, ...] = (ttft, max(e2e, ttft + 1.0))
    loose: tuple[float, ...] = (tight[0] * ttft_factor, tight[1] * e2e_factor)
    if tpot is not None:  # drawn both with and without a TPOT SLO
        tight, loose = (*tight, tpot), (*loose, tpot * tpot_factor)
    caps = []
    for slo in (tight, loose):
        result = calibrate(with_slos(scenario, {"standard": slo}), profiles, models=["llama-3.1-8b"],
                           skus=["A100-80GB"], class_mix=STANDARD_ONLY, cache_dir=cache, **FAST)
        caps.append(unit_rate(result))
    assert caps[1] >= caps[0]


@pytest.mark.parametrize(("tight", "loose"), [
    ({"interactive": (500.0, 20000.0), "standard": (1000.0, 20000.0)},
     {"interactive": (800.0, 40000.0), "standard": (3000.0, 60000.0)}),
    ({"interactive": (800.0, 20000.0), "standard": (400.0, 5000.0)},
     {"interactive": (800.0, 20000.0), "standard": (3000.0, 5000.0)}),
])
def test_looser_slos_never_give_less_capacity_to_any_class_of_a_mix(scenario, profiles, tmp_path, tight, loose):
    out = []
    for slos in (tight, loose):
        result = calibrate(with_slos(scenario, slos), profiles, models=["llama-3.1-8b"], skus=["H100"],
                           class_mix={"interactive": 0.5, "standard": 0.5}, cache_dir=tmp_path, **FAST)
        table = result.table.set_index("traffic_class")["max_rps_per_replica"].to_dict()
        out.append((unit_rate(result), table))
    (lam_t, caps_t), (lam_l, caps_l) = out
    assert lam_l >= lam_t
    for klass, cap in caps_t.items():
        assert caps_l[klass] >= cap


def test_looser_slo_never_gives_less_capacity_to_any_setting_when_nothing_is_pruned(scenario, profiles, tmp_path):
    """Without pruning every setting runs its own bisection from the floor, so the proof holds setting by
    setting, and for the best of them. (Pruning compares settings with the best rate found so far, which
    depends on the SLO: there the answer is only as good as the tolerance, ``test_calibrate_settings.py``.)"""
    out = []
    for slo in ((3000.0, 60000.0, 40.0), (3000.0, 60000.0, 60.0)):
        result = calibrate(with_slos(scenario, {"standard": slo}), profiles, models=["llama-3.1-8b"],
                           skus=["A100-80GB"], class_mix=STANDARD_ONLY, cache_dir=tmp_path,
                           **{**FAST, "search_settings": True, "duration_s": 120.0}, prune=False)
        (unit,) = result.meta["units"]
        out.append((unit["mix_rps_per_replica"], [s["rate_rps_per_replica"] for s in unit["settings_tried"]]))
    (lam_t, per_setting_t), (lam_l, per_setting_l) = out
    assert len(per_setting_t) > 1 and lam_l >= lam_t
    assert all(loose >= tight for tight, loose in zip(per_setting_t, per_setting_l, strict=True))


# ----------------------------------------------------------------------------- common random numbers
SETTINGS = Settings(duration_s=600.0, warmup_fraction=0.1, replications=2, seed=11, rel_tol=0.02, confidence=0.95,
                    pool_replicas=1, policy="drr-wspt", prediction_sigma=0.5,
                    policy_params=(("aging_rate", 0.1), ("trail_c", 0.5)),
                    kv_fraction=0.85, output_quantile_reserve=0.95)


def unit_tasks(scenario: Scenario, profiles, sku: str, settings: Settings = SETTINGS,
               mix: dict[str, float] | None = None) -> list[UnitTask]:
    """llama-3.1-8b's tasks on ``sku``, one per TP the scenario allows, smallest first."""
    units, _ = select_units(scenario, profiles, ["llama-3.1-8b"], [sku])
    return build_tasks(scenario, units, class_shares(scenario, mix), settings, None)


def test_every_rate_sees_the_same_requests_time_scaled(demo, profiles):
    demo = without_reuse(demo)  # conversations keep their think times at any rate (tests/test_class_reuse.py)
    task, *other_tps = unit_tasks(demo, profiles, "H100")
    replica = task.candidates[0]
    slow, fast = 0.5, 2.0
    a = draw_sample(pool_config(task, replica, slow), replication_seed(11, "llama-3.1-8b", "H100", 0))
    b = draw_sample(pool_config(task, replica, fast), replication_seed(11, "llama-3.1-8b", "H100", 0))
    n = min(a.n, b.n)
    assert n > 1000
    np.testing.assert_allclose(a.arrival_s[:n] * slow, b.arrival_s[:n] * fast, rtol=1e-9)
    for field in ("cls", "prompt_tokens", "output_tokens", "predicted_output_tokens", "route_u"):
        np.testing.assert_array_equal(getattr(a, field)[:n], getattr(b, field)[:n])
    # neither the policy, nor the TP degree, nor the engine setting enters the seed: the very same requests
    other_policy = unit_tasks(demo, profiles, "H100", replace(SETTINGS, policy="fcfs"))[0]
    searched = unit_tasks(demo, profiles, "H100", replace(SETTINGS, search_settings=True))[0]
    assert len(searched.candidates) > 1 and len(other_tps) == 2  # the demo's 8B runs on TP 1, 2 or 4
    for other, candidate in [(other_policy, other_policy.candidates[0]), *[(t, t.candidates[0]) for t in other_tps],
                             *[(searched, c) for c in searched.candidates[1:]]]:
        c = draw_sample(pool_config(other, candidate, slow), replication_seed(11, "llama-3.1-8b", "H100", 0))
        for field in ("arrival_s", "cls", "prompt_tokens", "output_tokens", "predicted_output_tokens", "route_u"):
            np.testing.assert_array_equal(getattr(a, field), getattr(c, field))


def test_replication_seeds_are_the_pair_seeds_children():
    children = pair_seed(5, "llama-3.1-8b", "H100").spawn(3)
    for i, child in enumerate(children):
        fresh = replication_seed(5, "llama-3.1-8b", "H100", i)
        assert fresh.spawn_key == child.spawn_key and fresh.entropy == child.entropy
        assert fresh.generate_state(4).tolist() == child.generate_state(4).tolist()


def test_low_rates_run_longer_so_the_rarest_class_has_enough_requests(scenario, profiles):
    shares = class_shares(scenario, None)
    (task,) = unit_tasks(scenario, profiles, "L40S", replace(SETTINGS, duration_s=3600.0))
    replica = task.candidates[0]
    assert run_length_s(task, replica, 100.0) == 3600.0
    low = run_length_s(task, replica, 0.01)
    assert low * 0.9 * 0.01 * min(shares.values()) == pytest.approx(task.settings.min_class_requests)
    # a pool of several replicas carries N times the rate: the same requests in N times less time
    pooled = replace(replica, count=4)
    assert run_length_s(task, pooled, 0.01) == pytest.approx(low / 4)
    assert pool_config(task, pooled, 0.01).classes[0].rate_rps == pytest.approx(4 * 0.01 * shares["interactive"])


# ----------------------------------------------------------------------------- the answer, re-checked
def independent_pool(scenario: Scenario, profiles, model: str, sku: str, rate: float, duration: float,
                     mix: dict[str, float]) -> PoolConfig:
    """The pool simulate would build for one replica at ``rate``, written out here from the scenario."""
    p = profile_for(profiles, model, sku, 1, scenario.model(model).engine)
    laws = workloads_for(model, scenario.class_names)
    classes = tuple(ClassSpec(k.name, rate * mix.get(k.name, 0.0), k.weight, k.priority_jump,
                              float(k.drr_quantum_tokens), k.max_queue_wait_ms, scenario.slo(model, k.name),
                              laws[k.name]) for k in scenario.classes)
    replica = ReplicaSpec(sku, 1, StepModel.from_row(p), int(p["kv_capacity_tokens"]), int(p["max_num_seqs"]),
                          int(p["max_num_batched_tokens"]), tp=int(p["tp_degree"]))
    a = scenario.policy.admission
    q = scenario.policy.params
    return PoolConfig((replica,), classes, get_policy(scenario.policy.name), duration_s=duration,
                      warmup_s=0.1 * duration, kv_fraction=a.kv_fraction,
                      output_quantile_reserve=a.output_quantile_reserve, policy_params=policy_values(q.model_dump()),
                      prediction_sigma=q.prediction_noise_sigma)


def slo_holds(scenario: Scenario, model: str, config: PoolConfig, replications: int, seed: np.random.SeedSequence,
              mix: dict[str, float]) -> bool:
    frame = simulate_pool(config, replications=replications, seed=seed).per_class
    ok = True
    for row in frame.to_dict("records"):
        if mix.get(row["traffic_class"], 0.0) == 0:
            continue
        for metric, target in scenario.slo(model, row["traffic_class"]).targets():
            ok &= row[p99_column(metric)] + row[f"{p99_column(metric)}_ci95"] <= target
    return bool(ok)


@pytest.mark.parametrize(("sku", "mix", "slos"), [
    ("A100-80GB", STANDARD_ONLY, {}), ("H100", STANDARD_ONLY, {}),
    ("H100", {"interactive": 0.5, "standard": 0.5}, {}),
    ("A100-80GB", STANDARD_ONLY, {"standard": (3000.0, 60000.0, 60.0)}),  # TPOT binds
])
def test_slo_holds_at_the_answer_and_fails_just_above_it(scenario, profiles, tmp_path, sku, mix, slos):
    scenario = without_reuse(with_slos(scenario, slos))  # the re-check below writes plain Poisson pools
    rel_tol = 0.02
    result = calibrate(scenario, profiles, models=["llama-3.1-8b"], skus=[sku], class_mix=mix, rel_tol=rel_tol,
                       cache_dir=tmp_path, seed=3, **FAST)
    (unit,) = result.meta["units"]
    lam = unit["mix_rps_per_replica"]
    assert 0 < lam <= unit["ceiling_rps_per_replica"]
    assert unit["binding_metric"] == ("tpot" if slos else unit["binding_metric"])
    s = replace(SETTINGS, duration_s=FAST["duration_s"], replications=3, seed=3, policy=scenario.policy.name,
                search_settings=False)
    (task,) = unit_tasks(scenario, profiles, sku, s, mix)
    for rate, expected in ((lam, True), (lam * (1 + 2 * rel_tol), False)):
        duration = run_length_s(task, task.candidates[0], rate)
        config = independent_pool(scenario, profiles, "llama-3.1-8b", sku, rate, duration, mix)
        assert slo_holds(scenario, "llama-3.1-8b", config, 3, pair_seed(3, "llama-3.1-8b", sku), mix) is expected, rate
    assert not math.isnan(lam)

"""The compiled replica engine: exact agreement with the pure-Python reference, and invariants.

Pools are small (3 replicas of the real llama-3.1-70b profiles, 2 minutes) and mostly
overloaded on purpose, so queues, wait-time rejections, KV preemptions and Trail-limited
SRPT preemptions all happen (each test checks that they did).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st_
from replica_fixtures import matches_reference, outputs, pool, replica, run
from sim_replica_reference import Reference

from planner.sim.policies import POLICIES
from planner.sim.replica.engine import run_pool
from planner.sim.replica.metrics import class_p99s, replication_metrics
from planner.sim.replica.pool import draw_sample, engine_state, run_sample
from planner.sim.replica.routing import ROUTERS
from planner.sim.replica.run import simulate_pool
from planner.sim.replica.state import (
    A_AREA,
    A_LAST,
    DONE,
    F_EXIT,
    F_FIRST,
    I_CLS,
    I_GEN,
    I_OUT,
    I_PRE_KV,
    I_PRE_POL,
    I_STATUS,
    P_CAP,
    P_MAXKV,
    REJECTED,
)
from planner.slo import SLO_METRICS, ClassSlo, p99_column

# (rate req/s, KV capacity override, kv_fraction, reserve quantile): a queue with wait
# rejections at full KV, and a small KV cache whose p30 reservation under-reserves so
# that running requests outgrow it and get preempted by recompute.
STRESS = [(25.0, None, 0.85, 0.95), (12.0, 40_000, 1.0, 0.3)]




@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("stress", range(len(STRESS)))
def test_compiled_equals_reference_for_every_policy(policy, stress):
    rate, kv, frac, reserve = STRESS[stress]
    state = matches_reference(pool(rate, policy, "jsq", kv=kv, kv_fraction=frac, reserve=reserve))
    assert (state.req_i[:, I_STATUS] == REJECTED).any()
    if stress == 1:
        assert state.req_i[:, I_PRE_KV].sum() > 0
    if policy == "srpt":
        assert state.req_i[:, I_PRE_POL].sum() > 0
    else:
        assert state.req_i[:, I_PRE_POL].sum() == 0


@pytest.mark.parametrize("router", list(ROUTERS))
def test_compiled_equals_reference_for_every_router(router):
    matches_reference(pool(25.0, "drr-wspt", router))


@pytest.mark.parametrize("policy", ["fcfs", "srpt", "drr-wspt"])
def test_compiled_equals_reference_with_a_prefill_chunk_cap(policy):
    matches_reference(pool(25.0, policy, "jsq", chunk_cap=512))


def test_a_prefill_chunk_cap_lets_short_prompts_in_beside_a_long_one():
    """A 30k-token prompt prefilling on its own holds the whole budget; capped at 1,024 tokens a step it
    leaves room, and a short prompt arriving just after it gets its first token steps sooner."""
    from planner.profiles import load_profiles, profile_for
    from planner.sim.replica.pool import ReplicaSpec, engine_state

    spec = ReplicaSpec.of(profile_for(load_profiles(), "llama-3.1-8b", "H100", 1, "vllm"), 1)
    first = {}
    for cap in (0, 1024):
        config = pool(1.0, "fcfs", "jsq", replicas=(replace(spec, prefill_chunk_cap=cap),), model="llama-3.1-8b")
        sample = draw_sample(config, np.random.SeedSequence(1))
        long_prompt = replace(sample, arrival_s=np.array([0.0, 0.01]), cls=np.array([1, 0]),
                              prompt_tokens=np.array([30_000, 500]), output_tokens=np.array([10, 10]),
                              predicted_output_tokens=np.array([10.0, 10.0]), route_u=np.zeros((2, 1)))
        state, hkey, hid = engine_state(config, long_prompt)
        run_pool(state, hkey, hid)
        first[cap] = state.req_f[:, F_FIRST]
    assert first[1024][1] < 0.5 * first[0][1]  # the short prompt's first token, far sooner
    assert first[1024][0] > first[0][0]  # the long one pays: its prefill is spread over more steps


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st_.sampled_from(sorted(POLICIES)),
    router=st_.sampled_from(sorted(ROUTERS)),
    rate=st_.floats(2.0, 30.0),
    kv=st_.integers(12_000, 120_000),
    reserve=st_.floats(0.2, 0.99),
    trail=st_.floats(0.0, 1.0),
    seed=st_.integers(0, 10_000),
    chunk_cap=st_.sampled_from([0, 256, 1024]),
)
def test_compiled_equals_reference_property(policy, router, rate, kv, reserve, trail, seed, chunk_cap):
    config = pool(rate, policy, router, kv=kv, kv_fraction=1.0, reserve=reserve, trail_c=trail, duration=40.0,
                  chunk_cap=chunk_cap)
    state = matches_reference(config, seed)
    assert (state.rep_i[:, P_MAXKV] <= state.rep_i[:, P_CAP]).all()


def test_same_seed_same_results_other_seed_differs():
    config = pool(20.0, "wspt", "power-of-d")
    first, second, other = outputs(run(config, 3)[1]), outputs(run(config, 3)[1]), outputs(run(config, 4)[1])
    for name in first:
        assert np.array_equal(first[name], second[name], equal_nan=True), name
    assert first["exit"].size != other["exit"].size or not np.array_equal(first["exit"], other["exit"])


def test_tokens_are_conserved_and_nobody_is_lost():
    """Every admitted request generates exactly its output length, through preemptions."""
    config = pool(12.0, "srpt", "jsq", kv=40_000, kv_fraction=1.0, reserve=0.3)
    sample, st = run(config)
    status = st.req_i[:, I_STATUS]
    assert set(np.unique(status)) <= {DONE, REJECTED}
    done = status == DONE
    assert np.array_equal(st.req_i[done, I_GEN], st.req_i[done, I_OUT])
    assert np.array_equal(st.req_i[done, I_OUT], sample.output_tokens[done])
    assert (st.req_i[~done, I_GEN] == 0).all()  # rejected requests never started (preempted ones are exempt)
    assert st.req_i[:, I_PRE_KV].sum() + st.req_i[:, I_PRE_POL].sum() > 0


@pytest.mark.parametrize("policy", ["fcfs", "srpt", "drr-fcfs"])
def test_kv_cache_never_exceeds_capacity(policy):
    _, st = run(pool(12.0, policy, "round-robin", kv=30_000, kv_fraction=1.0, reserve=0.2))
    assert (st.rep_i[:, P_MAXKV] <= st.rep_i[:, P_CAP]).all()
    assert st.rep_i[:, P_MAXKV].max() > 0.9 * 30_000  # the cache really was full
    assert st.req_i[:, I_PRE_KV].sum() > 0


@pytest.mark.parametrize("rate", [3.0, 25.0])
def test_littles_law_on_every_run(rate):
    """The engine's own integral of N(t) equals λ·E[T] from the request records (no request lost)."""
    rep = run_sample(pool(rate, "cmu", "jsq"), draw_sample(pool(rate, "cmu", "jsq"), np.random.SeedSequence(1)))
    st = rep.state
    sojourn = st.req_f[:, F_EXIT] - st.arrival
    assert np.isfinite(sojourn).all()
    assert st.acc_f[A_AREA] == pytest.approx(sojourn.sum(), rel=1e-9)
    _, pool_metrics = replication_metrics(rep)
    assert abs(pool_metrics["littles_residual_run"]) < 1e-9
    # On the window [w0, w1) the residual is an edge effect: only the N(w0) + N(w1) jobs in
    # the system at either edge are counted differently by L and by lambda*E[T], each by at
    # most the longest sojourn. The bound comes from this run's own records.
    w0, w1 = rep.config.warmup_s, rep.config.duration_s
    exit_ = st.req_f[:, F_EXIT]
    at_edges = sum(int(((st.arrival <= t) & (exit_ > t)).sum()) for t in (w0, w1))
    inside = (st.arrival >= w0) & (st.arrival < w1)
    bound = at_edges * sojourn.max() / sojourn[inside].sum()
    assert abs(pool_metrics["littles_residual_window"]) <= bound
    assert st.acc_f[A_LAST] >= rep.config.duration_s * 0.9


def test_rejections_are_counted_per_class():
    config = pool(25.0, "fcfs", "jsq", max_wait_scale=0.2)
    rep = run_sample(config, draw_sample(config, np.random.SeedSequence(2)))
    rows, _ = replication_metrics(rep)
    st = rep.state
    w = (st.arrival >= config.warmup_s) & (st.arrival < config.duration_s)
    for k, row in enumerate(rows):
        mine = w & (st.req_i[:, I_CLS] == k)
        assert row["rejected"] == int((mine & (st.req_i[:, I_STATUS] == REJECTED)).sum())
        assert row["arrived"] == row["completed"] + row["rejected"]
    assert sum(r["rejected"] for r in rows) > 0
    assert all(r["slo_ttft_p99_ms"] == np.inf for r in rows if r["rejected_fraction"] > 0.01)


def test_tpot_p99_is_over_multi_token_answers_with_rejections_at_infinity():
    config = pool(14.0, "fcfs", "jsq")  # interactive: a few rejections, under 1 %, so the p99 stays finite
    rep = run_sample(config, draw_sample(config, np.random.SeedSequence(2)))
    rows, _ = replication_metrics(rep)
    st = rep.state
    w = (st.arrival >= config.warmup_s) & (st.arrival < config.duration_s)
    mine = w & (st.req_i[:, I_CLS] == 0)
    multi = mine & (st.req_i[:, I_STATUS] == DONE) & (st.req_i[:, I_OUT] > 1)
    tpot_ms = 1000.0 * (st.req_f[multi, F_EXIT] - st.req_f[multi, F_FIRST]) / (st.req_i[multi, I_OUT] - 1)
    rejected = int((mine & (st.req_i[:, I_STATUS] == REJECTED)).sum())
    assert 0 < rejected < 0.01 * mine.sum()
    expected = np.percentile(np.concatenate([tpot_ms, np.full(rejected, np.inf)]), 99.0, method="inverted_cdf")
    assert rows[0]["slo_tpot_p99_ms"] == pytest.approx(expected, rel=1e-12)
    assert rows[0]["slo_tpot_p99_ms"] > rows[0]["tpot_p99_ms"]  # the rejections push it up
    assert all(r["slo_tpot_p99_ms"] == np.inf for r in rows if r["rejected_fraction"] > 0.01)


@pytest.mark.parametrize("rate", [6.0, 14.0, 25.0])  # none, a few and many rejections
def test_class_p99s_are_the_full_metrics_columns_calibration_reads(rate):
    config = pool(rate, "fcfs", "jsq", max_wait_scale=0.2)
    rep = run_sample(config, draw_sample(config, np.random.SeedSequence(3)))
    full, _ = replication_metrics(rep)
    lean = class_p99s(rep)
    assert len(lean) == len(full)
    for row, whole in zip(lean, full, strict=True):
        assert set(row) == {"arrived", *(p99_column(m) for m in SLO_METRICS)}
        for column, value in row.items():
            assert repr(value) == repr(whole[column])  # the same value to the bit, inf and nan alike


def test_a_class_that_misses_only_its_tpot_slo_misses_and_loses_its_goodput():
    loose = dict(ttft_p99_ms=1e6, e2e_p99_ms=1e7)
    frames = {}
    for tpot in (None, 1.0):  # 1 ms per token: no decode step is that fast
        config = pool(6.0, "fcfs", "jsq", slo=ClassSlo(tpot_p99_ms=tpot, **loose))
        frames[tpot] = simulate_pool(config, replications=3, seed=np.random.SeedSequence(4)).per_class
    unset, tight = frames[None], frames[1.0]
    assert (unset["slo_tpot_verdict"] == "not_set").all() and unset["slo_tpot_target_ms"].isna().all()
    assert unset["slo_met"].all() and (unset["goodput_fraction"] == 1.0).all()
    assert (tight["slo_ttft_verdict"] == "met").all() and (tight["slo_e2e_verdict"] == "met").all()
    assert (tight["slo_tpot_verdict"] == "missed").all() and not tight["slo_tpot_met"].any()
    assert not tight["slo_met"].any()
    assert (tight["goodput_fraction"] < 0.05).all()  # only one-token answers, which have no TPOT to miss
    same = ["slo_tpot_p99_ms", "ttft_p99_ms", "arrived"]
    assert tight[same].equals(unset[same])  # an SLO is only checked: the simulation is the same


def test_queue_wait_never_exceeds_max_wait_for_admitted_requests():
    config = pool(25.0, "priority-aging", "jsq", max_wait_scale=0.5)
    rep = run_sample(config, draw_sample(config, np.random.SeedSequence(5)))
    rows, _ = replication_metrics(rep)
    for row, klass in zip(rows, config.classes, strict=True):
        assert row["queue_wait_max_ms"] <= klass.max_queue_wait_ms + 1e-6


def test_cmu_favours_interactive_over_fcfs_under_load():
    """Same arrivals (common random numbers): c-mu cuts the interactive wait, batch pays (conservation)."""
    waits = {}
    for policy in ("fcfs", "cmu"):
        config = pool(22.0, policy, "jsq", max_wait_scale=100.0, duration=300.0)
        rows, _ = replication_metrics(run_sample(config, draw_sample(config, np.random.SeedSequence(11))))
        waits[policy] = [r["queue_wait_mean_ms"] for r in rows]
    assert waits["cmu"][0] < 0.5 * waits["fcfs"][0]
    assert waits["cmu"][2] > waits["fcfs"][2]


def test_trail_c_zero_never_preempts_by_policy():
    _, st = run(pool(25.0, "srpt", "jsq", trail_c=0.0))
    assert st.req_i[:, I_PRE_POL].sum() == 0
    _, st = run(pool(25.0, "srpt", "jsq", trail_c=1.0))
    assert st.req_i[:, I_PRE_POL].sum() > 0


def test_too_large_requests_are_rejected_on_arrival():
    config = pool(4.0, "fcfs", "jsq", replicas=(replica("H100", 1, kv=3_000),), kv_fraction=1.0)
    rep = run_sample(config, draw_sample(config, np.random.SeedSequence(3)))
    rows, _ = replication_metrics(rep)
    assert sum(r["rejected_too_large"] for r in rows) > 0


def test_waiting_heaps_grow_under_a_deep_queue():
    """Far past saturation with no 429s, one replica's queue outgrows the initial heap arrays."""
    config = pool(30.0, "wspt", "jsq", replicas=(replica("H100", 1),), max_wait_scale=1e6, duration=60.0)
    sample = draw_sample(config, np.random.SeedSequence(9))
    state, hkey, hid = engine_state(config, sample)
    fresh, _, _ = engine_state(config, sample)
    grown_keys, _ = run_pool(state, hkey, hid)
    assert grown_keys.shape[1] > hkey.shape[1]
    expected = Reference(fresh).run().arrays()
    got = outputs(state)
    for name, value in expected.items():
        assert np.array_equal(got[name], value, equal_nan=True), name

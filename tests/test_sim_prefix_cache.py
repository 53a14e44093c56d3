"""The prefix cache of the replica engine (planner/sim/replica/prefix.py) against its oracles.

* one replica, a cache that never evicts, the Mooncake slice replayed slowly enough that each
  request has left before the next arrives: the tokens served from the cache equal the ideal
  reuse, counted here by brute force over the trace's own hash lists;
* with caching off, with no prefix data, or with no prefix shared: the same times, request for
  request, as the engine at the branch point (digests stored below) and as without prefix data;
* the hit rate never falls as the cache grows;
* the cache-aware router finds at least random routing's hit rate on multi-turn sessions;
* per request, prefill tokens computed + tokens served from the cache = prompt tokens.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st_
from prefix_fixtures import mooncake_frame, mooncake_sample, one_class_pool
from replica_fixtures import matches_reference, outputs, pool, run
from sim_replica_reference import Reference

from planner.sim.class_reuse import ClassReuse, session_sample
from planner.sim.jit import njit
from planner.sim.prefix_workload import SharedPrompt
from planner.sim.replica import state as engine_state_layout
from planner.sim.replica.engine import run_pool
from planner.sim.replica.metrics import replication_metrics
from planner.sim.replica.pool import draw_sample, engine_state, run_sample
from planner.sim.replica.prefix import evict, register, release
from planner.sim.replica.routing import ROUTERS
from planner.sim.replica.run import simulate_pool
from planner.sim.replica.state import (
    DONE,
    F_ADMIT,
    F_EXIT,
    I_COMPUTED,
    I_GEN,
    I_HIT,
    I_PRE_KV,
    I_PRE_POL,
    I_PROMPT,
    I_REP,
    I_SAVED,
    I_STATUS,
    K_BLOCK,
    K_NEXT,
    K_PREV,
    K_REF,
    P_BLOCK,
    P_CAP,
    P_CFREE,
    P_HASHED,
    P_KV,
    P_LRU_HEAD,
    P_LRU_TAIL,
    P_MAXKV,
    P_SLOTS,
    REJECTED,
)
from planner.sim.workload import default_workload

BLOCK = 512


def brute_force_ideal(frame) -> int:
    """Σ over requests (arrival order) of the longest leading run of its full blocks that some earlier
    request's list starts with, at most ⌊(prompt − 1)/512⌋ blocks, × 512: pair by pair."""
    order = np.argsort(frame["timestamp"].to_numpy(), kind="stable")
    lists = [list(frame["hash_ids"].iloc[i])[: int(frame["input_length"].iloc[i]) // BLOCK] for i in order]
    prompts = [int(frame["input_length"].iloc[i]) for i in order]
    total = 0
    for j, mine in enumerate(lists):
        best = 0
        for earlier in lists[:j]:
            h = 0
            while h < min(len(mine), len(earlier)) and mine[h] == earlier[h]:
                h += 1
            best = max(best, h)
        total += min(best, (prompts[j] - 1) // BLOCK) * BLOCK
    return total


def test_one_replica_that_never_evicts_serves_the_ideal_reuse_of_the_mooncake_slice():
    """Blocks are cached once the step that computes them ends, so a running request's computed
    blocks are visible, as in vLLM. The trace has bursts of requests at the same millisecond, which
    a time scaling keeps together; the exact oracle therefore replays the trace's order one request
    a minute, and every request has left before the next arrives (checked): each sees every block
    of every earlier one."""
    scaled = mooncake_sample(rate_rps=0.02)
    sample = replace(scaled, arrival_s=60.0 * np.arange(scaled.n))
    rep = run_sample(one_class_pool(sample, kv=50_000_000), sample)
    st = rep.state
    assert (st.req_i[:, I_STATUS] == DONE).all()
    assert (st.req_f[1:, F_ADMIT] >= np.maximum.accumulate(st.req_f[:-1, F_EXIT])).all()  # one at a time
    ideal = brute_force_ideal(mooncake_frame())
    assert ideal > 0.1 * sample.prompt_tokens.sum()  # the slice does share prefixes
    assert int(st.req_i[:, I_HIT].sum()) == ideal
    rows, pool_figures = replication_metrics(rep)
    assert rows[0]["prefix_hit_rate"] == pytest.approx(ideal / sample.prompt_tokens.sum(), rel=1e-12)
    assert pool_figures["prefix_hit_rate_by_replica"] == (pool_figures["prefix_hit_rate"],)
    # the trace's own times at 0.02 req/s: a request of a burst cannot see blocks not yet computed
    bursty = run_sample(one_class_pool(scaled, kv=50_000_000), scaled).state
    assert 0.9 * ideal <= int(bursty.req_i[:, I_HIT].sum()) <= ideal


# outputs() of replica_fixtures.run(pool(...), 7) with the engine at the branch point (commit 919c90e)
BRANCH_POINT = [
    ((25.0, "fcfs", "jsq", {}), "6a5c07a2b246880f"),
    ((12.0, "srpt", "round-robin", {"kv": 40_000, "kv_fraction": 1.0, "reserve": 0.3}), "ee2641103ffc3bbd"),
    ((20.0, "drr-wspt", "power-of-d", {"chunk_cap": 512}), "d9b8ccf4b5699fc6"),
    ((14.0, "cmu", "least-tokens", {}), "79836abea1d55da2"),
    ((10.0, "wspt", "random", {}), "01077925580cf093"),
]


BRANCH_POINT_OUTPUTS = ("status", "reason", "rep", "gen", "pre_kv", "pre_pol", "admit", "first", "exit", "busy",
                        "kv_area", "batch_area", "steps", "max_kv", "tokens_win", "area")
"""The outputs the digests cover (``outputs()`` at the branch point, in its order)."""


def _digest(st) -> str:
    h = hashlib.sha256()
    got = outputs(st)
    for name in BRANCH_POINT_OUTPUTS:
        value = got[name]
        h.update(name.encode())
        h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize(("case", "digest"), BRANCH_POINT)
def test_without_prefix_data_the_engine_is_the_one_at_the_branch_point(case, digest):
    rate, policy, router, kwargs = case
    _, st = run(pool(rate, policy, router, **kwargs), 7)
    assert _digest(st) == digest


def _same_times(a, b) -> None:
    """Every output of the engine without a cache (times, decisions, accounting) agrees."""
    got, expected = outputs(a), outputs(b)
    for name in BRANCH_POINT_OUTPUTS:
        assert np.array_equal(got[name], expected[name], equal_nan=True), name


@pytest.mark.parametrize("policy", ["fcfs", "srpt", "drr-wspt"])
def test_caching_off_gives_the_times_of_a_sample_without_blocks(policy):
    config = pool(12.0, policy, "jsq", kv=40_000, kv_fraction=1.0, reserve=0.3)  # preemptions by recompute
    plain = draw_sample(config, np.random.SeedSequence(7))
    with_blocks = draw_sample(replace(config, prefix=SharedPrompt(1024, 2)), np.random.SeedSequence(7))
    assert np.array_equal(with_blocks.prompt_tokens, plain.prompt_tokens)  # the other streams are untouched
    off = run_sample(replace(config, prefix_caching=False), with_blocks).state
    base = run_sample(config, plain).state
    _same_times(off, base)
    assert base.req_i[:, I_PRE_KV].sum() > 0
    assert (off.req_i[:, I_HIT] == 0).all()


def test_no_shared_prefix_gives_the_same_times_as_no_cache():
    """Every block unique: nothing hits (no request is preempted, so none recomputes its own blocks),
    and the unique blocks left cached are evicted before anyone would be preempted."""
    config = pool(14.0, "fcfs", "jsq", kv=120_000, kv_fraction=1.0)
    plain = draw_sample(config, np.random.SeedSequence(3))
    unique = draw_sample(replace(config, prefix=SharedPrompt(0, 1)), np.random.SeedSequence(3))
    on = run_sample(config, unique).state
    base = run_sample(config, plain).state
    assert base.req_i[:, I_PRE_KV].sum() == 0
    _same_times(on, base)
    assert (on.rep_i[:, P_CFREE] > 0).all()  # blocks did stay cached


@pytest.mark.parametrize("kv", [20_000, 28_000])
def test_prefill_computed_plus_cached_is_the_prompt(kv):
    """A shared 2k-token system prompt in 3 variants on a small KV cache: hits, evictions and preemptions."""
    config = replace(pool(12.0, "srpt", "jsq", kv=kv, kv_fraction=1.0, reserve=0.3),
                     prefix=SharedPrompt(2048, 3, block_tokens=16))
    st = run_sample(config, draw_sample(config, np.random.SeedSequence(5))).state
    done = st.req_i[:, I_STATUS] == DONE
    never = done & (st.req_i[:, I_PRE_KV] + st.req_i[:, I_PRE_POL] == 0)
    again = done & ~never
    assert never.sum() > 0 and again.sum() > 0 and st.req_i[:, I_HIT].sum() > 0
    np.testing.assert_array_equal(st.req_i[never, I_COMPUTED] + st.req_i[never, I_HIT], st.req_i[never, I_PROMPT])
    np.testing.assert_array_equal(st.req_i[never, I_SAVED], st.req_i[never, I_HIT])
    # recompute counts apart: every admission's prefill is computed or cached, so the prompt at least
    assert (st.req_i[again, I_COMPUTED] + st.req_i[again, I_SAVED] >= st.req_i[again, I_PROMPT]).all()
    assert (st.req_i[again, I_SAVED] >= st.req_i[again, I_HIT]).all()
    assert (st.rep_i[:, P_MAXKV] <= st.rep_i[:, P_CAP]).all()
    assert (st.rep_i[:, P_CFREE] <= st.rep_i[:, P_CAP]).all()
    _cache_is_consistent(st)  # every request left: only unused cached blocks remain


def test_the_hit_rate_never_falls_as_the_cache_grows():
    sample = mooncake_sample(rate_rps=0.05)
    rates = []
    for kv in (140_000, 200_000, 400_000, 1_000_000, 4_000_000):
        st = run_sample(one_class_pool(sample, kv=kv), sample).state
        assert (st.req_i[:, I_STATUS] == DONE).all()
        rates.append(st.req_i[:, I_HIT].sum() / st.req_i[:, I_PROMPT].sum())
    assert all(b >= a for a, b in zip(rates, rates[1:], strict=False)), rates
    assert rates[-1] > rates[0]


def _sessions(seed: int = 1):
    workload = default_workload("interactive", "llama-3.1-8b")
    return session_sample(2.5, 600.0, workload, ClassReuse(130_048, turns=5, think_s=20.0), 16,
                          np.random.SeedSequence(seed))


def test_cache_aware_routing_finds_at_least_random_routings_hits_on_sessions():
    sample = _sessions()
    hits = {}
    for router in ("random", "jsq", "cache-aware", "session-affinity"):
        config = one_class_pool(sample, replicas=4, router=router, kv=200_000)
        st = run_sample(config, sample).state
        hits[router] = st.req_i[:, I_HIT].sum() / st.req_i[:, I_PROMPT].sum()
    assert hits["cache-aware"] >= hits["random"], hits
    assert hits["session-affinity"] >= hits["random"], hits
    assert hits["cache-aware"] > 0.5  # a session's turns mostly hit their previous turn's blocks


def test_session_affinity_keeps_every_turn_on_its_first_turns_replica():
    sample = _sessions(2)
    st = run_sample(one_class_pool(sample, replicas=3, router="session-affinity"), sample).state
    assert sample.session is not None
    for s in np.unique(sample.session):
        assert np.unique(st.req_i[sample.session == s, I_REP]).size == 1
    assert np.unique(st.req_i[:, I_REP]).size == 3


def test_cache_aware_routing_reads_the_cache_at_the_arrival_instant():
    """Request 0 (long) takes replica 0; request 1, with a prefix, goes to the idle replica 1; both
    leave; request 2 shares request 1's prefix: JSQ sends it to replica 0 (a tie, lowest index), the
    cache-aware router to replica 1, where its prefix is."""
    base = mooncake_sample()
    ids = np.arange(100, dtype=np.int64)
    sample = replace(base, arrival_s=np.array([0.0, 0.001, 500.0]), cls=np.zeros(3, dtype=np.int64),
                     prompt_tokens=np.array([8192, 8192, 8192]), output_tokens=np.array([400, 10, 10]),
                     predicted_output_tokens=np.array([400.0, 10.0, 10.0]), route_u=np.zeros((3, 1)),
                     block_ptr=np.array([0, 16, 32, 48]),
                     block_ids=np.concatenate([ids[50:66], ids[:16], ids[:16]]), block_tokens=BLOCK)
    chosen = {}
    for router in ("jsq", "cache-aware"):
        config = one_class_pool(sample, replicas=2, router=router)
        state, hkey, hid = engine_state(config, sample)
        run_pool(state, hkey, hid)
        chosen[router] = state.req_i[:, I_REP].tolist()
        hit = state.req_i[2, I_HIT]
        assert hit == (15 * BLOCK if router == "cache-aware" else 0)  # at most (8192 - 1) // 512 blocks
    assert chosen == {"jsq": [0, 1, 0], "cache-aware": [0, 1, 1]}


def test_the_pool_summary_reports_hit_rates_per_class_and_per_replica():
    config = replace(pool(6.0, "fcfs", "cache-aware", duration=60.0), prefix=SharedPrompt(1024, 4))
    result = simulate_pool(config, replications=2, seed=np.random.SeedSequence(1))
    frame = result.per_class
    assert (frame["prefix_hit_rate"] > 0).all() and (frame["prefix_hit_rate"] < 1).all()
    assert (frame["prefill_tokens_saved"] > 0).all()
    assert len(result.pool["prefix_hit_rate_by_replica"]) == config.n_replicas
    assert 0 < result.pool["prefix_hit_rate"] < 1
    plain = simulate_pool(replace(config, prefix=None), replications=1, seed=np.random.SeedSequence(1))
    assert "prefix_hit_rate" not in plain.per_class.columns and "prefix_hit_rate" not in plain.pool


@contextlib.contextmanager
def table_layout(layout: str):
    """Within it, every replica's prefix cache has the layout named: ``direct`` (a slot per distinct
    block, as the engine chooses for these small samples) or ``hashed`` (the hash table it uses when
    that would not fit)."""
    if layout == "direct":
        yield
        return
    def hashed(n_blocks, kv_capacity_tokens, block_tokens):
        return engine_state_layout.hashed_slots(n_blocks, kv_capacity_tokens, block_tokens), True
    with mock.patch.object(engine_state_layout, "cache_layout", hashed):
        yield


def _cache_is_consistent(st) -> None:
    """At the end of a run no request holds KV; every cached block is in its replica's LRU list, once,
    in a list whose links agree both ways, and P_CFREE counts them."""
    size = st.rep_i[:, P_BLOCK]
    users = st.cache[:, :, K_REF]
    held = st.cache[:, :, K_BLOCK]
    assert (users <= 0).all() and (st.rep_i[:, P_KV] == 0).all()
    assert ((users == 0) == (held >= 0)).all()  # a slot holds a block exactly when the block is cached
    for r in range(st.rep_i.shape[0]):
        blocks = held[r][held[r] >= 0]
        assert np.unique(blocks).size == blocks.size  # one slot per cached block
        walked, s, prev = [], st.rep_i[r, P_LRU_HEAD], -1
        while s >= 0:
            assert st.cache[r, s, K_PREV] == prev
            walked.append(int(s))
            prev, s = s, st.cache[r, s, K_NEXT]
        assert prev == st.rep_i[r, P_LRU_TAIL]
        assert sorted(walked) == np.flatnonzero(users[r] == 0).tolist()
        assert st.rep_i[r, P_CFREE] == size[r] * len(walked)
        if st.rep_i[r, P_HASHED]:
            assert st.rep_i[r, P_SLOTS] == (held[r] != -1).sum()  # live and deleted slots
        else:
            assert (held[r] == np.where(users[r] == 0, np.arange(held.shape[1]), -1)).all()  # slot b holds b


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st_.sampled_from(["fcfs", "srpt", "drr-wspt", "cmu"]),
    router=st_.sampled_from(sorted(ROUTERS)),
    rate=st_.floats(4.0, 20.0),
    kv=st_.integers(15_000, 120_000),
    system=st_.integers(0, 4096),
    variants=st_.integers(1, 4),
    block=st_.sampled_from([16, 64, 256]),
    seed=st_.integers(0, 10_000),
    layout=st_.sampled_from(["direct", "hashed"]),
)
def test_the_cache_stays_consistent_under_any_pool(policy, router, rate, kv, system, variants, block, seed, layout):
    config = replace(pool(rate, policy, router, kv=kv, kv_fraction=1.0, reserve=0.3, duration=40.0),
                     prefix=SharedPrompt(system, variants, block_tokens=block))
    sample = draw_sample(config, np.random.SeedSequence(seed))
    with table_layout(layout):
        st = run_sample(config, sample).state
    status = st.req_i[:, I_STATUS]
    done = status == DONE
    assert set(np.unique(status)) <= {DONE, REJECTED}
    assert np.array_equal(st.req_i[done, I_GEN], sample.output_tokens[done])
    never = done & (st.req_i[:, I_PRE_KV] + st.req_i[:, I_PRE_POL] == 0)
    np.testing.assert_array_equal(st.req_i[never, I_COMPUTED] + st.req_i[never, I_HIT], st.req_i[never, I_PROMPT])
    assert (st.rep_i[:, P_MAXKV] <= st.rep_i[:, P_CAP]).all()
    _cache_is_consistent(st)


def test_eviction_takes_the_least_recently_released_block_and_a_requests_tail_first():
    """One replica of 1,000 tokens, blocks of 100, prompts of 400 tokens (4 blocks) with one output token,
    one request at a time. A then B leave their blocks cached (LRU list 4 3 2 1 8 7 6 5: each released last
    block first); C, all new, evicts A's 4 and 3; D (A's prompt) finds 1 2 and evicts B's 8 7 to compute
    3 4; E (B's prompt) finds 5 6 and evicts C's 12 11; F (C's prompt) finds 9 10."""
    base = mooncake_sample()
    lists = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    n = len(lists)
    sample = replace(base, arrival_s=10.0 * np.arange(n), cls=np.zeros(n, dtype=np.int64),
                     prompt_tokens=np.full(n, 400), output_tokens=np.ones(n, dtype=np.int64),
                     predicted_output_tokens=np.ones(n), route_u=np.zeros((n, 1)),
                     block_ptr=np.arange(0, 4 * n + 1, 4), block_ids=np.array(lists).ravel(), block_tokens=100)
    state, hkey, hid = engine_state(one_class_pool(sample, kv=1000), sample)
    state.reserve[:] = 1
    run_pool(state, hkey, hid)
    assert (state.req_i[:, I_STATUS] == DONE).all()
    assert state.req_i[:, I_HIT].tolist() == [0, 0, 0, 200, 200, 200]
    assert state.rep_i[0, P_CFREE] == 1000
    _cache_is_consistent(state)


@pytest.mark.parametrize("layout", ["direct", "hashed"])
@pytest.mark.parametrize("router", sorted(ROUTERS))
@pytest.mark.parametrize("policy", ["fcfs", "srpt", "drr-wspt"])
def test_compiled_equals_the_reference_with_a_prefix_cache(policy, router, layout):
    """Shared prompts on a small KV cache (hits, evictions, preemptions): every output of the compiled engine,
    the cache figures included, equals the pure-Python reference's, in either table layout."""
    config = replace(pool(12.0, policy, router, kv=16_000, kv_fraction=1.0, reserve=0.3, duration=60.0),
                     prefix=SharedPrompt(2048, 3, block_tokens=64))
    with table_layout(layout):
        st = matches_reference(config)
    assert st.req_i[:, I_HIT].sum() > 0
    if router == "jsq":
        assert st.req_i[:, I_PRE_KV].sum() > 0


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st_.sampled_from(["fcfs", "srpt", "drr-wspt", "wspt"]),
    router=st_.sampled_from(sorted(ROUTERS)),
    rate=st_.floats(4.0, 20.0),
    kv=st_.integers(12_000, 80_000),
    system=st_.integers(0, 4096),
    variants=st_.integers(1, 4),
    block=st_.sampled_from([16, 64, 256]),
    chunk_cap=st_.sampled_from([0, 256]),
    seed=st_.integers(0, 10_000),
    layout=st_.sampled_from(["direct", "hashed"]),
)
def test_compiled_equals_the_reference_with_a_prefix_cache_property(policy, router, rate, kv, system, variants,
                                                                     block, chunk_cap, seed, layout):
    config = replace(pool(rate, policy, router, kv=kv, kv_fraction=1.0, reserve=0.3, duration=30.0,
                          chunk_cap=chunk_cap), prefix=SharedPrompt(system, variants, block_tokens=block))
    with table_layout(layout):
        matches_reference(config, seed)


@pytest.mark.parametrize("layout", ["direct", "hashed"])
@pytest.mark.parametrize("router", ["random", "cache-aware", "session-affinity"])
def test_compiled_equals_the_reference_on_sessions(router, layout):
    sample = _sessions(3)
    config = one_class_pool(sample, replicas=3, router=router, kv=60_000)
    with table_layout(layout):
        state, hkey, hid = engine_state(config, sample)
        fresh, _, _ = engine_state(config, sample)
    run_pool(state, hkey, hid)
    expected = Reference(fresh).run().arrays()
    got = outputs(state)
    for name, value in expected.items():
        assert np.array_equal(got[name], value, equal_nan=True), name
    assert state.req_i[:, I_HIT].sum() > 0


def test_a_small_table_under_churn_rehashes_and_still_matches_the_reference():
    """One replica of 10 blocks (a 64-slot hash table) and 60 requests of 4 blocks, a third of them repeats of
    earlier prompts: some 160 blocks enter and most are evicted, so deleted slots force the table to be laid
    out again many times. Hits, evictions and times equal the pure-Python reference's dict and LRU list."""
    base = mooncake_sample()
    rng = np.random.default_rng(3)
    n = 60
    lists = [[4 * i + k for k in range(4)] for i in range(n)]
    for i in range(n // 3, n, 3):
        lists[i] = lists[int(rng.integers(0, i))]
    sample = replace(base, arrival_s=np.cumsum(rng.exponential(2.0, n)), cls=np.zeros(n, dtype=np.int64),
                     prompt_tokens=np.full(n, 400), output_tokens=np.full(n, 3, dtype=np.int64),
                     predicted_output_tokens=np.full(n, 3.0), route_u=np.zeros((n, 1)),
                     block_ptr=np.arange(0, 4 * n + 1, 4), block_ids=np.array(lists).ravel(), block_tokens=100)
    with table_layout("hashed"):
        state, hkey, hid = engine_state(one_class_pool(sample, kv=1000), sample)
        fresh, _, _ = engine_state(one_class_pool(sample, kv=1000), sample)
    assert state.cache.shape[1] == 64
    run_pool(state, hkey, hid)
    expected = Reference(fresh).run().arrays()
    got = outputs(state)
    for name, value in expected.items():
        assert np.array_equal(got[name], value, equal_nan=True), name
    assert state.req_i[:, I_HIT].sum() > 0 and (state.req_i[:, I_STATUS] == DONE).all()
    _cache_is_consistent(state)


@njit
def _churn(req_i, rep_i, blk_ids, cache, slots_after):
    """Request j's one block enters replica 0's cache, is released and evicted; P_SLOTS after each."""
    for j in range(req_i.shape[0]):
        rep_i[0, P_KV] += rep_i[0, P_BLOCK]  # j computed its block: its KV, cached once register runs
        register(req_i, rep_i, blk_ids, cache, 0, j, 1)
        release(req_i, rep_i, blk_ids, cache, 0, j)
        evict(rep_i, cache, 0, rep_i[0, P_CAP])
        slots_after[j] = rep_i[0, P_SLOTS]


def test_deleted_slots_are_cleared_by_laying_the_table_out_again():
    """200 blocks pass one at a time through a 64-slot hash table: every eviction leaves a deleted slot, and
    the count of slots not empty falls back when it reaches half the table."""
    n = 200
    base = mooncake_sample()
    sample = replace(base, arrival_s=np.arange(n, dtype=float), cls=np.zeros(n, dtype=np.int64),
                     prompt_tokens=np.full(n, 100), output_tokens=np.ones(n, dtype=np.int64),
                     predicted_output_tokens=np.ones(n), route_u=np.zeros((n, 1)),
                     block_ptr=np.arange(n + 1), block_ids=np.arange(n), block_tokens=100)
    with table_layout("hashed"):
        state, _, _ = engine_state(one_class_pool(sample, kv=1000), sample)
    assert state.cache.shape[1] == 64
    slots_after = np.zeros(n, dtype=np.int64)
    _churn(state.req_i, state.rep_i, state.blk_ids, state.cache, slots_after)
    assert slots_after.max() <= 32 and (np.diff(slots_after) < 0).any()
    assert state.rep_i[0, P_LRU_HEAD] == -1 and state.rep_i[0, P_CFREE] == 0
    _cache_is_consistent(state)

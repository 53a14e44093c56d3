"""Requests with their prompt's blocks (planner/sim/prefix_workload.py): trace, shared prompt, sessions."""

from __future__ import annotations

import numpy as np
import pytest
from prefix_fixtures import mooncake_frame, mooncake_sample

from planner.errors import InputError
from planner.sim.class_reuse import ClassReuse, session_sample
from planner.sim.prefix_workload import SharedPrompt, TraceReplay, ideal_cached_tokens, trace_sample
from planner.sim.workload import default_workload, sample_requests


def _blocks(sample, j):
    return sample.block_ids[sample.block_ptr[j]:sample.block_ptr[j + 1]]


def test_a_trace_lists_its_full_blocks_and_keeps_its_times():
    frame = mooncake_frame()
    sample = mooncake_sample()
    assert sample.n == len(frame) and sample.block_tokens == 512
    assert sample.arrival_s[0] == 0.0 and np.all(np.diff(sample.arrival_s) >= 0)
    np.testing.assert_allclose(sample.arrival_s, (frame["timestamp"] - frame["timestamp"].min()) / 1000.0)
    for j in (0, 1, 500, 999):
        full = int(frame["input_length"].iloc[j]) // 512
        assert _blocks(sample, j).tolist() == list(frame["hash_ids"].iloc[j])[:full]


def test_a_trace_scaled_to_a_rate_has_that_mean_rate():
    sample = mooncake_sample(rate_rps=2.0)
    span = sample.arrival_s[-1] * sample.n / (sample.n - 1)
    assert sample.n / span == pytest.approx(2.0)
    with pytest.raises(InputError):
        trace_sample(np.zeros(3), np.ones(3), np.ones(3), [[1], [2], [3]], np.random.SeedSequence(0), rate_rps=1.0)


def _sampled(prefix, seed=3):
    workload = default_workload("interactive", "llama-3.1-8b")
    return sample_requests(np.array([5.0]), [workload], 100.0, np.random.SeedSequence(seed), prefix=prefix)


def test_a_shared_prompt_gives_each_request_its_variants_leading_blocks():
    law = SharedPrompt(system_tokens=1000, variants=3, block_tokens=64)
    sample = _sampled(law)
    plain = _sampled(None)
    np.testing.assert_array_equal(sample.prompt_tokens, plain.prompt_tokens)
    np.testing.assert_array_equal(sample.arrival_s, plain.arrival_s)
    per_variant = 1000 // 64
    starts = set()
    own: list[int] = []
    for j in range(sample.n):
        blocks = _blocks(sample, j)
        assert blocks.size == sample.prompt_tokens[j] // 64
        shared = min(per_variant, blocks.size)
        head = blocks[:shared]
        assert shared == 0 or head.tolist() == list(range(head[0], head[0] + shared))
        if shared == per_variant:
            starts.add(int(head[0]))
        own.extend(blocks[shared:].tolist())
    assert starts == {0, per_variant, 2 * per_variant}  # three variants, all drawn
    assert len(own) == len(set(own)) and min(own) >= 3 * per_variant  # the rest is unique to each request
    again = _sampled(law)
    np.testing.assert_array_equal(again.block_ids, sample.block_ids)


def test_a_sessions_next_turn_starts_with_the_previous_turns_prompt_and_answer():
    workload = default_workload("interactive", "llama-3.1-8b")
    reuse = ClassReuse(130_048, turns=4, think_s=30.0)
    sample = session_sample(0.8, 900.0, workload, reuse, 16, np.random.SeedSequence(4))
    assert sample.session is not None and np.all(np.diff(sample.arrival_s) >= 0)
    assert (sample.arrival_s < 900.0).all()
    later_turns = 0
    for s in np.unique(sample.session):
        turns = np.flatnonzero(sample.session == s)
        for a, b in zip(turns, turns[1:], strict=False):
            later_turns += 1
            assert sample.prompt_tokens[b] > sample.prompt_tokens[a] + sample.output_tokens[a]
            prev, nxt = _blocks(sample, a), _blocks(sample, b)
            assert prev.size == (sample.prompt_tokens[a] + sample.output_tokens[a]) // 16
            assert nxt[:prev.size].tolist() == prev.tolist()
    assert later_turns > 50
    other = session_sample(0.8, 900.0, workload, reuse, 16, np.random.SeedSequence(4))
    np.testing.assert_array_equal(other.block_ids, sample.block_ids)


def test_the_ideal_reuse_counts_leading_runs_seen_before_and_leaves_one_token():
    sample = trace_sample(np.array([0, 1, 2, 3]), np.array([40, 40, 33, 30]), np.ones(4, dtype=np.int64),
                          [[1, 2, 3, 4, 5], [1, 2, 9, 9], [1, 2, 3, 4], [7, 2, 3]], np.random.SeedSequence(0),
                          block_tokens=10)
    # request 1: blocks 1, 2 seen; request 2: 1, 2, 3 (its fourth block is partial, not listed);
    # request 3: block 7 never seen. Request 0 would be capped at (40 - 1) // 10 = 3 blocks.
    assert ideal_cached_tokens(sample).tolist() == [0, 20, 30, 0]


def test_a_trace_replay_source_follows_the_pools_rates_and_repeats_with_ids_of_its_own():
    frame = mooncake_frame()
    source = TraceReplay.from_records(frame["timestamp"], frame["input_length"], frame["output_length"],
                                      frame["hash_ids"])
    sample = source.draw(np.array([6.0, 2.0]), [], 400.0, np.random.SeedSequence(1), route_draws=2)
    assert sample.n == int(np.searchsorted(np.sort(sample.arrival_s), 400.0))
    assert sample.n / 400.0 == pytest.approx(8.0, rel=0.05)  # 1,000 requests at 8 req/s, then the loop
    assert np.all(np.diff(sample.arrival_s) >= 0) and sample.arrival_s[-1] < 400.0
    assert 0.7 < np.mean(sample.cls == 0) < 0.8  # class 0 has 6 of the 8 req/s
    first, second = _blocks(sample, 0), _blocks(sample, 1000)
    assert first.size == second.size and not set(first) & set(second)  # the repetition shares nothing
    assert sample.route_u.shape == (sample.n, 2)


def test_a_pool_draws_its_replications_from_its_source():
    from dataclasses import replace

    from replica_fixtures import pool

    from planner.sim.replica.run import simulate_pool

    frame = mooncake_frame()
    source = TraceReplay.from_records(frame["timestamp"], frame["input_length"], frame["output_length"],
                                      frame["hash_ids"])
    config = replace(pool(0.4, "fcfs", "cache-aware", duration=300.0), source=source)
    result = simulate_pool(config, replications=2, seed=np.random.SeedSequence(2))
    frame = result.per_class
    assert (frame["prefix_hit_rate"] > 0.0).all()  # the trace's shared prefixes are found on the replicas
    np.testing.assert_allclose(frame["arrival_rate_rps"], frame["offered_rps"], rtol=0.5)

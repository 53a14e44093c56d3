"""Declared prefix reuse per class: the scenario's `reuse`, the pool's prefix law, and its effect in the simulator."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.profiles import load_profiles
from planner.scenario import parse_scenario
from planner.scenario.loading import read_scenario_data
from planner.sim.class_reuse import ClassReuse, PoolReuse
from planner.sim.prefix_workload import ideal_cached_tokens
from planner.sim.simulate import simulate_plan
from planner.sim.workload import default_workload, sample_requests
from planner.workloads import resolve_workloads

CHAT = default_workload("interactive", "llama-3.1-8b")
CODE = default_workload("standard", "llama-3.1-8b")
RATES = (4.0, 2.0)
DURATION = 600.0


def pool(first: ClassReuse | None, second: ClassReuse | None = None) -> PoolReuse:
    cap = 130_048
    return PoolReuse((first, second), (CHAT, CODE), RATES, (cap, cap), DURATION, 16)


def sampled(law: PoolReuse, seed: int = 3):
    return sample_requests(np.array(RATES), [CHAT, CODE], DURATION, np.random.SeedSequence(seed), prefix=law)


def test_a_class_without_reuse_keeps_its_requests_and_no_blocks():
    plain = sample_requests(np.array(RATES), [CHAT, CODE], DURATION, np.random.SeedSequence(3))
    sample = sampled(pool(ClassReuse(130_048, turns=4, think_s=20.0)))
    assert sample.block_ptr is not None and sample.session is not None
    code, plain_code = sample.cls == 1, plain.cls == 1
    for name in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert np.array_equal(getattr(sample, name)[code], getattr(plain, name)[plain_code])
    sizes = np.diff(sample.block_ptr)
    assert (sizes[code] == 0).all() and (sample.session[code] == -1).all()
    assert np.all(np.diff(sample.arrival_s) >= 0)


def test_sessions_keep_about_the_class_rate_and_extend_the_last_turn():
    sample = sampled(pool(ClassReuse(130_048, turns=4, think_s=20.0)))
    chat = np.flatnonzero(sample.cls == 0)
    assert chat.size == pytest.approx(RATES[0] * DURATION, rel=0.15)  # the turns that start inside the run
    assert sample.session is not None and sample.block_ptr is not None and sample.block_ids is not None
    by_session: dict[int, list[int]] = {}
    for j in chat:
        by_session.setdefault(int(sample.session[j]), []).append(int(j))
    later = [turns for turns in by_session.values() if len(turns) > 1]
    assert later
    for turns in later:
        for a, b in zip(turns, turns[1:], strict=False):
            first = sample.block_ids[sample.block_ptr[a]:sample.block_ptr[a + 1]]
            second = sample.block_ids[sample.block_ptr[b]:sample.block_ptr[b + 1]]
            assert np.array_equal(second[:first.size], first)  # each turn starts with every block of the last
            assert sample.prompt_tokens[b] > sample.prompt_tokens[a]


def test_a_shared_system_prompt_is_shared_within_a_variant_only():
    reuse = ClassReuse(130_048, system_tokens=1600, variants=3)
    sample = sampled(pool(None, reuse))
    assert sample.block_ptr is not None and sample.block_ids is not None
    heads = {tuple(sample.block_ids[sample.block_ptr[j]:sample.block_ptr[j] + 100])
             for j in np.flatnonzero(sample.cls == 1) if sample.prompt_tokens[j] >= 1600}
    assert len(heads) == 3  # 1,600 tokens = 100 blocks of 16, one run per variant
    ideal = ideal_cached_tokens(sample)
    assert ideal[sample.cls == 0].sum() == 0  # no reuse declared for class 0: its requests never hit
    assert ideal[sample.cls == 1].sum() > 0


def test_class_ids_never_collide_and_the_draws_are_seeded():
    both = pool(ClassReuse(130_048, system_tokens=320, variants=2, turns=3, think_s=10.0),
                ClassReuse(130_048, system_tokens=320, variants=2))
    first, again = sampled(both, 7), sampled(both, 7)
    assert first.block_ids is not None and again.block_ids is not None and first.block_ptr is not None
    assert np.array_equal(first.block_ids, again.block_ids) and np.array_equal(first.arrival_s, again.arrival_s)
    ids = [set(first.block_ids[first.block_ptr[j]:first.block_ptr[j + 1]].tolist()) for j in range(first.n)]
    of_class = [set().union(*(ids[j] for j in np.flatnonzero(first.cls == k))) for k in (0, 1)]
    assert not of_class[0] & of_class[1]


def demo_with_reuse(caching: bool = True) -> dict:
    data = copy.deepcopy(read_scenario_data(REPO_ROOT / "scenarios" / "demo.toml"))
    for klass in data["classes"]:
        if klass["name"] == "interactive":
            klass["reuse"] = {"system_prompt_tokens": 1500, "variants": 4, "turns": 4, "think_time_s": 60}
    for model in data["models"]:
        model["prefix_caching"] = caching
    return data


def test_the_scenario_declares_reuse_and_validate_shows_it():
    scenario = parse_scenario(demo_with_reuse())
    workloads = resolve_workloads(scenario, {"llama-3.1-8b": {"interactive": 1.0}})
    chat = workloads[("llama-3.1-8b", "interactive")]
    assert chat.reuse is not None and chat.reuse.turns == 4 and chat.reuse.system_tokens == 1500
    assert chat.describe()["reuse_source"] == ("scenario classes[interactive].reuse: system prompt of 1500 tokens "
                                               "in 4 variant(s); sessions of 4 turns, 60 s apart")
    for bad in ({}, {"variants": 2}, {"turns": 0}, {"system_prompt_tokens": 10, "user_tokens": 5}):
        data = demo_with_reuse()
        data["classes"][0]["reuse"] = bad
        with pytest.raises(InputError, match="reuse"):
            parse_scenario(data)


@pytest.mark.slow
def test_the_cache_shortens_ttft_and_reports_its_hits_per_class():
    period = "2026-11-02T18:00:00Z"
    plan = pd.DataFrame([{"period": period, "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-8b",
                          "tier": "on_demand", "replicas": 2, "gpus": 2, "usd": 0.0}])
    demand = pd.DataFrame([{"region": "aws:us-east-1", "model": "llama-3.1-8b", "traffic_class": k, "rps": r}
                           for k, r in (("interactive", 8.0), ("standard", 4.0))])
    runs = {}
    for caching in (True, False):
        result = simulate_plan(parse_scenario(demo_with_reuse(caching)), plan, demand, load_profiles(),
                               load_catalog(), duration_s=300.0, replications=2, seed=1)
        runs[caching] = result.per_class.set_index("traffic_class")
    on, off = runs[True], runs[False]
    assert on.loc["interactive", "prefix_hit_rate"] > 0.3 and off.loc["interactive", "prefix_hit_rate"] == 0
    assert on.loc["standard", "prefix_hit_rate"] == 0  # declares no reuse
    assert on.loc["interactive", "ttft_p99_ms"] < off.loc["interactive", "ttft_p99_ms"]
    assert on.loc["interactive", "arrived"] == off.loc["interactive", "arrived"]  # the same requests


def test_a_higher_rate_adds_conversations_and_keeps_the_others():
    """Common random numbers for calibration's bisection: the sessions at rate r start at r' / r times the same
    points at rate r', in the same order, with the same turns."""
    reuse = ClassReuse(130_048, turns=3, think_s=20.0)
    slow = sample_requests(np.array([2.0]), [CHAT], DURATION, np.random.SeedSequence(5),
                           prefix=PoolReuse((reuse,), (CHAT,), (2.0,), (130_048,), DURATION, 16))
    fast = sample_requests(np.array([6.0]), [CHAT], DURATION, np.random.SeedSequence(5),
                           prefix=PoolReuse((reuse,), (CHAT,), (6.0,), (130_048,), DURATION, 16))
    assert slow.session is not None and fast.session is not None

    def first_turns(sample):
        firsts = {}
        for j in range(sample.n):
            firsts.setdefault(int(sample.session[j]), (sample.arrival_s[j], int(sample.prompt_tokens[j])))
        return [firsts[s] for s in sorted(firsts)]

    a, b = first_turns(slow), first_turns(fast)
    assert len(b) > 2 * len(a) > 100
    ranks = {k: i for i, k in enumerate(sorted(range(len(b)), key=lambda i: b[i][0]))}
    assert sorted(ranks)[:10] == list(range(10))
    starts_a = np.array([t for t, _ in a[:50]])
    starts_b = np.array([t for t, _ in b[:50]])
    np.testing.assert_allclose(starts_a * 2.0, starts_b * 6.0, rtol=1e-9)
    assert [p for _, p in a[:50]] == [p for _, p in b[:50]]

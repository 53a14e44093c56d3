"""Arrival processes and token-length laws of the simulators (planner/sim/workload.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from planner.errors import InputError
from planner.sim.workload import (
    CONTEXT_TOKENS,
    EmpiricalLength,
    LognormalLength,
    default_workload,
    gamma_arrivals,
    poisson_arrivals,
    sample_requests,
    trace_arrivals,
    workloads_for,
)
from planner.workflows.inputs import read_trace_times


def rng(seed=0):
    return np.random.default_rng(seed)


def test_lognormal_through_p50_p99_reproduces_them():
    law = LognormalLength.through(129.0, 601.0, 10**9)  # Azure conversation outputs, no cut
    x = law.sample_from_uniform(rng().random(400_000))
    assert np.percentile(x, 50) == pytest.approx(129, rel=0.02)
    assert np.percentile(x, 99) == pytest.approx(601, rel=0.03)
    assert law.quantile(0.5) in (129, 130)
    assert law.mean() == pytest.approx(x.mean(), rel=0.01)


def test_lognormal_cut_at_context_is_a_conditioned_law():
    law = LognormalLength.through(1469.0, 7436.0, 3072)  # code prompts on llama-3.1-70b (4096 - 1024)
    x = law.sample_from_uniform(rng(1).random(200_000))
    assert x.min() >= 1 and x.max() <= 3072
    assert law.mean() == pytest.approx(x.mean(), rel=0.01)
    assert law.quantile(0.999) <= 3072


def test_default_laws_follow_the_trace_figures():
    inter = default_workload("interactive", "llama-3.1-8b")
    assert inter.prompt.quantile(0.5) in (1020, 1021)
    # the 1,024-token output cut conditions the law, which pulls p99 a little below 601
    assert 580 <= inter.output.quantile(0.99) <= 601
    batch = default_workload("batch", "llama-3.1-70b")
    assert batch.output.quantile(0.5) in (368, 369)
    assert batch.prompt.hi == CONTEXT_TOKENS["llama-3.1-70b"] - 1024
    unknown_model = default_workload("interactive", "some-model")
    assert "unknown" in unknown_model.source
    with pytest.raises(InputError, match="no built-in length law"):  # never the 'standard' law in its place
        default_workload("premium", "llama-3.1-8b")


def test_empirical_law_samples_the_histogram():
    lo = np.array([0, 1, 2, 4, 8, 16, 32])
    hi = np.array([1, 2, 4, 8, 16, 32, 64])
    counts = np.array([0, 5, 0, 10, 40, 30, 15], dtype=float)
    law = EmpiricalLength(lo, hi, counts)
    x = law.sample_from_uniform(rng(2).random(200_000))
    observed = np.array([((x >= a) & (x < b)).sum() for a, b in zip(lo, hi, strict=True)])
    expected = counts / counts.sum() * x.size
    keep = expected > 0
    assert observed[~keep].sum() == 0
    assert stats.chisquare(observed[keep], expected[keep]).pvalue > 1e-3
    inside = x[(x >= 16) & (x < 32)]
    assert stats.chisquare(np.bincount(inside - 16, minlength=16)).pvalue > 1e-3  # uniform within a bin
    assert 8 <= law.quantile(0.3) < 16
    assert law.mean() == pytest.approx(x.mean(), rel=0.02)


def test_workloads_from_ingest_histogram_and_fallback():
    hist = pd.DataFrame({
        "model": "llama-3.1-8b", "traffic_class": "interactive",
        "measure": ["prompt_tokens"] * 3 + ["output_tokens"] * 3,
        "bin_lo_tokens": [256, 512, 1024, 16, 32, 64], "bin_hi_tokens": [512, 1024, 2048, 32, 64, 128],
        "count": [1, 2, 1, 3, 3, 0],
    })
    laws = workloads_for("llama-3.1-8b", ("interactive", "batch"), hist)
    assert laws["interactive"].source == "ingest histogram"
    assert 16 <= laws["interactive"].output.quantile(0.99) < 64
    assert "Mooncake" in laws["batch"].source
    with pytest.raises(InputError, match="lacks column"):
        workloads_for("llama-3.1-8b", ("interactive",), hist.drop(columns=["count"]))
    with pytest.raises(InputError, match="count 0"):
        workloads_for("llama-3.1-8b", ("interactive",), hist.assign(count=0))


def test_poisson_rate_and_exponential_gaps():
    t = poisson_arrivals(50.0, 2000.0, rng(3))
    assert t.size == pytest.approx(100_000, rel=0.02)
    assert np.all(np.diff(t) >= 0) and t.max() < 2000.0
    assert stats.kstest(np.diff(t), "expon", args=(0, 1 / 50.0)).pvalue > 1e-3


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_gamma_arrivals_have_the_requested_cv(cv):
    gaps = np.diff(gamma_arrivals(20.0, cv, 5000.0, rng(4)))
    assert gaps.mean() == pytest.approx(1 / 20.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)


def test_trace_replay_rescales_and_loops():
    stamps = np.array([10.0, 10.5, 12.0, 13.0, 14.0])  # 5 arrivals, mean gap 1 s
    t = trace_arrivals(stamps, 12.0)
    assert list(t[:5]) == [0.0, 0.5, 2.0, 3.0, 4.0] and t[5] == pytest.approx(5.0)
    fast = trace_arrivals(stamps, 100.0, rate_rps=10.0)
    assert fast.size == pytest.approx(1000, rel=0.01)
    with pytest.raises(InputError):
        trace_arrivals(np.array([1.0]), 10.0)


def test_sample_requests_is_deterministic_and_uses_common_random_numbers():
    laws = [default_workload(k, "llama-3.1-70b") for k in ("interactive", "standard", "batch")]
    seq = np.random.SeedSequence(42)
    a = sample_requests(np.array([5.0, 3.0, 1.0]), laws, 600.0, seq, prediction_sigma=0.5)
    b = sample_requests(np.array([5.0, 3.0, 1.0]), laws, 600.0, np.random.SeedSequence(42), prediction_sigma=0.5)
    for name in ("arrival_s", "cls", "prompt_tokens", "output_tokens", "predicted_output_tokens", "route_u"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    # noise is multiplicative lognormal with the requested sigma
    ratio = np.log(a.predicted_output_tokens / a.output_tokens)
    assert ratio.std() == pytest.approx(0.5, rel=0.05)
    exact = sample_requests(np.array([5.0, 3.0, 1.0]), laws, 600.0, np.random.SeedSequence(42))
    assert np.array_equal(exact.predicted_output_tokens, exact.output_tokens.astype(float))
    # the i-th interactive request has the same lengths whatever the batch rate
    c = sample_requests(np.array([5.0, 3.0, 4.0]), laws, 600.0, np.random.SeedSequence(42))
    n = min((a.cls == 0).sum(), (c.cls == 0).sum())
    assert n > 100
    assert np.array_equal(a.prompt_tokens[a.cls == 0][:n], c.prompt_tokens[c.cls == 0][:n])


def test_trace_times_from_the_azure_sample(repo_root):
    path = repo_root / "data" / "samples" / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv"
    t = read_trace_times(path)
    assert t.size == 8819 and t[0] == 0.0 and np.all(np.diff(t) >= 0)
    assert 3000 < t[-1] < 3700  # about one hour
    replay = trace_arrivals(t, 7200.0)
    span = t[-1] * t.size / (t.size - 1)  # one mean gap after the last arrival, then it loops
    assert np.array_equal(replay[: t.size], t)
    assert replay[t.size] == pytest.approx(span) and replay.max() < 7200.0
    assert replay.size == int((t[None, :] + span * np.arange(3)[:, None] < 7200.0).sum())
    with pytest.raises(InputError, match="no column"):
        read_trace_times(path, column="ts")


def test_a_class_s_max_prompt_tokens_cuts_its_default_prompts_below_the_context():
    free = workloads_for("llama-3.1-8b", ("long-context", "interactive"))
    capped = workloads_for("llama-3.1-8b", ("long-context", "interactive"), max_prompt_tokens={"long-context": 31744})
    assert free["long-context"].prompt.hi == 131072 - 1024 and capped["long-context"].prompt.hi == 31744
    assert "max_prompt_tokens 31744" in capped["long-context"].source
    assert capped["long-context"].prompt.mean() < free["long-context"].prompt.mean()
    assert capped["interactive"] == free["interactive"]  # other classes keep the model's context
    # a cap above what the context leaves changes nothing
    loose = workloads_for("qwen3-32b", ("long-context",), max_prompt_tokens={"long-context": 10**6})
    assert loose["long-context"].prompt.hi == 40960 - 1024


def test_longest_is_the_most_tokens_a_draw_can_have():
    u = np.concatenate([np.linspace(0.0, 1.0, 10_000, endpoint=False), [np.nextafter(1.0, 0.0)]])  # as rng.random()
    lognormal = LognormalLength.through(p50=900.0, p99=5000.0, hi=8000)
    assert lognormal.longest() == 8000 and lognormal.sample_from_uniform(u).max() == 8000
    fixed = EmpiricalLength.points(np.array([1024]), np.array([1.0]), "fixed")
    assert fixed.longest() == 1024 and set(fixed.sample_from_uniform(u)) == {1024}
    binned = EmpiricalLength(np.array([1, 64, 4096]), np.array([64, 4096, 8192]), np.array([5.0, 3.0, 0.0]))
    assert binned.longest() == 4095 and binned.sample_from_uniform(u).max() == 4095  # an empty last bin never draws

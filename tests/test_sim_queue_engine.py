"""Queue engine: determinism, conservation, Little's law, routing, sampling and invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import InputError
from planner.sim.queue import (
    ArrivalProcess,
    QueueClass,
    QueueModel,
    ServiceDist,
    draw_jobs,
    rate_for_load,
    simulate_queue,
    summarize,
)
from planner.sim.queue.engine import run_queue_loop
from planner.sim.queue.run import loop_arguments

E1 = (
    QueueClass("interactive", 8.0, 0.50, ServiceDist("lognormal", 0.30, 1.05)),
    QueueClass("standard", 2.0, 0.35, ServiceDist("lognormal", 1.00, 1.05)),
    QueueClass("batch", 0.5, 0.15, ServiceDist("lognormal", 4.00, 1.05)),
)
WORK_CONSERVING = ("fcfs", "cmu", "wspt", "srpt", "priority-aging", "drr-fcfs", "drr-wspt")


def _model(policy: str = "fcfs", rho: float = 0.8, n: int = 20_000, **kw) -> QueueModel:
    kw.setdefault("warmup", n // 10)
    return QueueModel(E1, ArrivalProcess("poisson", rate_for_load(E1, rho)), policy=policy, n_jobs=n, **kw)


def test_same_seed_gives_identical_runs_and_another_seed_does_not() -> None:
    a = simulate_queue(_model("wspt", prediction_sigma=1.0), seed=7)
    b = simulate_queue(_model("wspt", prediction_sigma=1.0), seed=7)
    c = simulate_queue(_model("wspt", prediction_sigma=1.0), seed=8)
    for field in ("arrival", "start", "finish", "server", "busy"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.finish, c.finish)
    assert summarize(a).per_class.equals(summarize(b).per_class)


@pytest.mark.parametrize("routing", ["central", "jsq"])
def test_lanes_that_fill_up_and_get_room_change_no_result(routing: str) -> None:
    """Lanes of one slot fill at almost every arrival: the loop stops, the lanes are compacted or
    grown, and it resumes; every record must match a run whose lanes never fill."""
    for policy in WORK_CONSERVING:
        model = _model(policy, rho=0.95, n=3_000, speeds=(1.0, 1.5), routing=routing)
        args = loop_arguments(model, draw_jobs(model, seed=3))
        roomy, tight = run_queue_loop(*args, 1 << 20), run_queue_loop(*args, 1)
        for a, b in zip(roomy, tight, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=policy)


def test_busy_time_is_identical_across_work_conserving_policies() -> None:
    """Same arrivals and sizes on one server: every work-conserving order has the same busy
    periods, so total busy time and the last departure agree to rounding."""
    model = _model()
    sample = draw_jobs(model, seed=4)
    runs = {p: simulate_queue(_model(p), sample=sample) for p in WORK_CONSERVING}
    base = runs["fcfs"]
    assert base.busy[0] == pytest.approx(sample.size.sum(), rel=1e-12)
    for policy, run in runs.items():
        assert run.busy[0] == pytest.approx(base.busy[0], rel=1e-12), policy
        assert np.nanmax(run.finish) == pytest.approx(np.nanmax(base.finish), rel=1e-12), policy


@pytest.mark.parametrize("policy", WORK_CONSERVING)
@pytest.mark.parametrize("routing", ["central", "jsq"])
def test_littles_law_holds_on_every_run(policy: str, routing: str) -> None:
    """Stable runs: the residual is an edge effect of size O(max T / window), well under 1%."""
    speeds = (1.0,) if routing == "central" else (0.7, 1.0, 1.3)
    model = QueueModel(E1, ArrivalProcess("poisson", rate_for_load(E1, 0.8, sum(speeds))), policy=policy,
                       n_jobs=20_000, warmup=2_000, speeds=speeds, routing=routing)
    summ = summarize(simulate_queue(model, seed=2))
    assert abs(summ.little.relative_residual) < 0.01


def test_srpt_preempts_and_non_preemptive_policies_never_do() -> None:
    assert simulate_queue(_model("srpt"), seed=1).preemptions > 0
    run = simulate_queue(_model("cmu"), seed=1)
    assert run.preemptions == 0
    np.testing.assert_allclose(run.finish - run.start, run.size, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("routing", ["random", "round-robin", "jsq", "power-of-d", "least-work", "central"])
def test_every_routing_serves_every_job_on_a_valid_server(routing: str) -> None:
    speeds = tuple(np.linspace(0.6, 1.4, 8))
    model = QueueModel(E1, ArrivalProcess("poisson", rate_for_load(E1, 0.5, sum(speeds))), n_jobs=5_000,
                       speeds=speeds, routing=routing, power_d=2)
    run = simulate_queue(model, seed=9)
    assert np.all((run.server >= 0) & (run.server < 8))
    assert np.all(np.isfinite(run.finish))
    np.testing.assert_allclose(run.finish - run.start, run.size / np.asarray(speeds)[run.server], rtol=1e-9)
    if routing == "round-robin":
        np.testing.assert_array_equal(run.server, np.arange(5_000) % 8)


def test_jsq_is_stable_where_random_splitting_is_not() -> None:
    """Speeds 0.6..1.4 at rho = 0.8: the slowest server's equal share is 0.8/0.6 > 1 of its capacity."""
    speeds = tuple(np.linspace(0.6, 1.4, 8))
    out = {}
    for routing in ("random", "jsq"):
        model = QueueModel(E1, ArrivalProcess("poisson", rate_for_load(E1, 0.8, sum(speeds))), n_jobs=30_000,
                           warmup=3_000, speeds=speeds, routing=routing)
        out[routing] = summarize(simulate_queue(model, seed=1)).overall
    assert out["random"]["utilisation_max"] > 0.99
    assert out["jsq"]["mean_sojourn"] * 20 < out["random"]["mean_sojourn"]


def test_sampling_laws_and_arrival_processes() -> None:
    dists = (ServiceDist("exponential", 2.0), ServiceDist("lognormal", 2.0, 1.0), ServiceDist("deterministic", 2.0),
             ServiceDist("empirical", values=(1.0, 3.0)))
    classes = tuple(QueueClass(f"k{i}", 1.0, 0.25, d) for i, d in enumerate(dists))
    model = QueueModel(classes, ArrivalProcess("gamma", rate=2.0, cv=2.0), n_jobs=200_000)
    s = draw_jobs(model, seed=0)
    gaps = np.diff(s.arrival)
    assert gaps.mean() == pytest.approx(0.5, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.03)
    for k in range(4):
        assert s.size[s.cls == k].mean() == pytest.approx(2.0, rel=0.03)
        assert (s.cls == k).mean() == pytest.approx(0.25, abs=0.005)
    assert np.all(s.size[s.cls == 2] == 2.0)
    trace = (0.0, 0.5, 0.5, 2.0)
    replay = QueueModel((QueueClass("only", 1.0, 1.0, dists[2]),), ArrivalProcess("trace", times=trace), n_jobs=4)
    run = simulate_queue(replay)
    np.testing.assert_array_equal(run.arrival, trace)
    np.testing.assert_array_equal(run.finish, [2.0, 4.0, 6.0, 8.0])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"policy": "lifo"}, "policy.name"),
        ({"routing": "hash"}, "routing"),
        ({"speeds": (1.0, 0.0)}, "speeds"),
        ({"warmup": 20_000}, "warmup"),
        ({"routing": "power-of-d", "power_d": 3, "speeds": (1.0, 1.0)}, "power_d"),
    ],
)
def test_bad_models_are_input_errors_naming_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        _model(**kwargs)
    assert field in str(err.value)


def test_bad_laws_and_shares_are_input_errors() -> None:
    with pytest.raises(InputError, match="share"):
        QueueModel(E1[:2], ArrivalProcess("poisson", 1.0))
    with pytest.raises(InputError, match="non-decreasing"):
        ArrivalProcess("trace", times=(1.0, 0.5))
    with pytest.raises(InputError, match="mean"):
        ServiceDist("lognormal", -1.0, 1.0)


@settings(max_examples=40, deadline=None)
@given(
    rho=st.floats(0.05, 0.98),
    policy=st.sampled_from(WORK_CONSERVING),
    servers=st.integers(1, 4),
    routing=st.sampled_from(["central", "random", "jsq", "power-of-d", "least-work"]),
    cv=st.floats(0.3, 3.0),
    seed=st.integers(0, 2**31),
)
def test_invariants_hold_for_any_configuration(rho, policy, servers, routing, cv, seed) -> None:
    speeds = tuple(0.5 + 0.5 * i for i in range(servers))
    model = QueueModel(E1, ArrivalProcess("gamma", rate_for_load(E1, rho, sum(speeds)), cv=cv), policy=policy,
                       n_jobs=600, speeds=speeds, routing=routing, power_d=min(2, servers))
    run = simulate_queue(model, seed=seed)
    summ = summarize(run)
    t_end = np.nanmax(run.finish)
    assert np.all(run.arrival <= run.start) and np.all(run.start <= run.finish)
    assert np.all(run.busy <= t_end + 1e-9)
    assert 0.0 <= summ.overall["utilisation"] <= 1.0 and summ.overall["utilisation_max"] <= 1.0 + 1e-12
    if not (policy == "srpt" and routing == "central" and servers > 1):
        # every job ran on one server only, so busy time is exactly its work at that speed
        assert run.busy.sum() == pytest.approx(np.sum(run.size / np.asarray(speeds)[run.server]), rel=1e-9)

"""The compiled queue loop against a plain-Python heapq implementation of the same
single-server model: identical start and finish times on shared samples, for every
policy (same keys, same tie-breaks, same preemption rule, same DRR arbiter)."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from planner.sim.policies import get_policy
from planner.sim.policies.drr import drr_select_class_reference
from planner.sim.queue import ArrivalProcess, QueueClass, QueueModel, ServiceDist, draw_jobs, simulate_queue


def _key(policy: str, j: int, k: int, s, model: QueueModel) -> float:
    """Each policy's textbook key, written out independently of its KeyForm."""
    c = model.classes[k]
    mu = 1.0 / c.service.first_moment
    if policy == "fcfs":
        return -s.arrival[j]
    if policy == "cmu":
        return c.weight * mu
    if policy == "wspt":
        p = s.predicted[j]
        return c.weight / (p if p > 0 else 1e-300)
    if policy == "srpt":
        return -s.size[j]
    if policy == "priority-aging":
        return c.priority_jump + dict(model.policy_params).get("aging_rate", 0.1) * (0.0 - s.arrival[j])
    if policy == "drr-fcfs":
        return c.priority_jump - s.arrival[j]
    assert policy == "drr-wspt"
    tok = s.tokens[j]
    return (1.0 + c.priority_jump) / (tok if tok > 1.0 else 1.0)


def reference_single_server(model: QueueModel, s) -> tuple[np.ndarray, np.ndarray, float]:
    """Event loop with heapq: one heap per class of (−key, arrival, id); departures before arrivals."""
    spec = get_policy(model.policy)
    use_drr = spec.drr if model.class_arbiter is None else model.class_arbiter
    speed = model.speeds[0]
    n, n_cls = s.n, len(model.classes)
    heaps: list[list] = [[] for _ in range(n_cls)]
    remaining = [float(x) for x in s.size]
    start = [math.nan] * n
    finish = [math.nan] * n
    deficits = [0.0] * n_cls
    quanta = [c.quantum_tokens for c in model.classes]
    pointer = -1
    running, comp, seg, busy, nxt = -1, math.inf, 0.0, 0.0, 0

    def begin(j: int, now: float) -> None:
        nonlocal running, comp, seg
        if math.isnan(start[j]):
            start[j] = now
        running, seg, comp = j, now, now + remaining[j] / speed

    while True:
        t_arr = s.arrival[nxt] if nxt < n else math.inf
        if running < 0 and nxt >= n:
            break
        if running >= 0 and comp <= t_arr:
            now = comp
            finish[running] = now
            busy += now - seg
            remaining[running] = 0.0
            running, comp = -1, math.inf
            if any(heaps):
                if use_drr:
                    nonempty = [bool(h) for h in heaps]
                    costs = [max(1.0, s.tokens[h[0][2]]) if h else 0.0 for h in heaps]
                    k, pointer = drr_select_class_reference(deficits, quanta, costs, nonempty, pointer)
                else:
                    k = min((h[0], i) for i, h in enumerate(heaps) if h)[1]
                j = heapq.heappop(heaps[k])[2]
                if use_drr and not heaps[k]:
                    deficits[k] = 0.0
                begin(j, now)
            continue
        now, j = t_arr, nxt
        nxt += 1
        k = int(s.cls[j])
        key = _key(spec.name, j, k, s, model)
        if running < 0:
            begin(j, now)
            continue
        rem = (comp - now) * speed
        r = running
        if spec.preemptive and (key, -s.arrival[j], -j) > (-rem, -s.arrival[r], -r):
            busy += now - seg
            remaining[r] = max(rem, 0.0)
            heapq.heappush(heaps[int(s.cls[r])], (remaining[r], s.arrival[r], r))
            running = -1
            begin(j, now)
        else:
            heapq.heappush(heaps[k], (-key, s.arrival[j], j))
    return np.array(start), np.array(finish), busy


def _model(policy: str, **kw) -> QueueModel:
    tokens = ServiceDist("lognormal", 600.0, 1.0, integer=True)
    classes = (
        QueueClass("interactive", 8.0, 0.5, ServiceDist("lognormal", 0.3, 1.05), priority_jump=3.0,
                   quantum_tokens=400, tokens=tokens),
        QueueClass("standard", 2.0, 0.35, ServiceDist("exponential", 1.0), priority_jump=1.0, quantum_tokens=600,
                   tokens=tokens),
        QueueClass("batch", 0.5, 0.15, ServiceDist("empirical", values=(0.5, 2.0, 4.0, 9.5)), quantum_tokens=300,
                   tokens=ServiceDist("deterministic", 2000.0)),
    )
    return QueueModel(classes, ArrivalProcess("gamma", rate=0.8, cv=1.5), policy=policy, n_jobs=4000, **kw)


@pytest.mark.parametrize("policy", ["fcfs", "cmu", "wspt", "srpt", "priority-aging", "drr-fcfs", "drr-wspt"])
def test_compiled_loop_matches_heapq_reference_exactly(policy: str) -> None:
    model = _model(policy, prediction_sigma=0.7 if policy == "wspt" else 0.0, speeds=(1.3,))
    sample = draw_jobs(model, seed=11)
    run = simulate_queue(model, sample=sample)
    start, finish, busy = reference_single_server(model, sample)
    np.testing.assert_array_equal(run.start, start)
    np.testing.assert_array_equal(run.finish, finish)
    assert run.busy[0] == pytest.approx(busy, rel=1e-12)


def test_reference_matches_without_the_class_arbiter() -> None:
    model = _model("drr-wspt", class_arbiter=False)
    sample = draw_jobs(model, seed=5)
    run = simulate_queue(model, sample=sample)
    start, finish, _ = reference_single_server(model, sample)
    np.testing.assert_array_equal(run.finish, finish)
    np.testing.assert_array_equal(run.start, start)

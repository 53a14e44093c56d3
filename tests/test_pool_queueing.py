"""Why a pool carries more per replica than one replica: N identical exponential servers under JSQ against the
closed forms, at the same load per server.

For N servers each at utilisation ρ, Erlang C (one shared queue, M/M/N) is the least mean wait any routing can
reach, and N independent M/M/1 queues (random routing) the most a sensible router does: JSQ lies between, equals
both at N = 1, and its mean wait falls as N grows. So at a fixed waiting-time target the load per server a pool
sustains rises with N, which is what ``planner calibrate --pool-sizes`` measures on the replica simulator and the
placement program charges (``planner/calibrate/pools.py``). Tolerances follow ``test_sim_queue_analytic.py``.
"""

from __future__ import annotations

import numpy as np

from planner.analytics import erlang_c_mean_wait
from planner.sim.queue import ArrivalProcess, QueueClass, QueueModel, ServiceDist, simulate_queue
from planner.sim.stats import replication_ci

R = 12
RHO = 0.8


def jsq_wait(servers: int) -> tuple[float, float]:
    """(mean, 95 % half-width) over R replications of the mean wait of N exponential servers under JSQ at RHO."""
    model = QueueModel((QueueClass("only", 1.0, 1.0, ServiceDist("exponential", 1.0)),),
                       ArrivalProcess("poisson", RHO * servers), speeds=(1.0,) * servers, routing="jsq",
                       n_jobs=40_000, warmup=4_000)
    waits = []
    for seed in range(R):
        run = simulate_queue(model, seed)
        waits.append(float(run.wait[run.kept].mean()))
    ci = replication_ci(np.asarray(waits))
    return ci.mean, ci.half_width


def test_jsq_lies_between_erlang_c_and_independent_queues_and_improves_with_the_pool():
    mm1 = erlang_c_mean_wait(RHO, 1.0, 1)  # ρ / (1 − ρ) = 4
    previous = np.inf
    for servers in (1, 2, 4, 8):
        mean, half = jsq_wait(servers)
        erlang = erlang_c_mean_wait(RHO * servers, 1.0, servers)
        assert half < 0.1 * mm1
        if servers == 1:  # one server: JSQ is M/M/1
            assert abs(mean - mm1) <= max(3 * half, 0.01 * mm1), (mean, half, mm1)
        else:
            assert erlang - 3 * half <= mean <= mm1 + 3 * half, (servers, erlang, mean, mm1)
            assert mean < 0.75 * mm1  # a real gain over one queue, not noise
        assert mean < previous + 3 * half
        previous = mean


def test_the_load_per_server_at_a_wait_target_rises_with_the_pool_in_erlang_c():
    """Square-root staffing's economy of scale in the closed form the simulator is bounded by."""
    target = 1.0  # mean wait of one service time

    def sustained(servers: int) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if erlang_c_mean_wait(mid * servers, 1.0, servers) <= target else (lo, mid)
        return lo

    loads = [sustained(n) for n in (1, 2, 4, 8, 16, 32)]
    assert loads == sorted(loads)
    assert abs(loads[0] - 0.5) < 1e-9  # M/M/1: ρ / (1 − ρ) = 1
    assert loads[-1] > 0.9

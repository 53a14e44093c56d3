"""The compiled event loop of the multiclass queue (one or many servers).

State: per server the running job, its completion epoch and the start of its current
service segment; per queue (one shared queue when routing is ``central``, else one per
server) one lane per class. Two event kinds: a departure (the earliest completion over
servers) and the next arrival (from the pre-drawn, sorted arrival array). Same-time
events are ordered (time, kind, sequence): departures before arrivals, servers by
index, arrivals by job id, so a freed server can take a job arriving at that instant.

Lanes: per queue, one lane per class in one flat array (lane (q, k) starts at
q·n + offset_k and can hold every job of class k). A free server takes the top of its
queue: without DRR the job first in the order (key desc, arrival asc, id asc) among
the lane heads; with DRR the class is chosen by
:func:`~planner.sim.policies.drr.drr_select_class` (cost max(1, tokens)) and its lane
gives the head. When the within-class order is arrival order (fcfs, cmu,
priority-aging, drr-fcfs, all non-preemptive) a lane is a plain FIFO, since jobs enter
it in arrival order; otherwise (wspt, drr-wspt, srpt) it is a binary heap on the
same total order. Keys are fixed when a job is enqueued (priority-aging's key
priority_jump + r·(now − a) orders waiting jobs the same at every instant, so it is
evaluated at now = 0). SRPT is preemptive-resume: an arriving job whose size is below
the running job's remaining work displaces it, and the displaced job re-enters its
lane with key −remaining. All other policies are non-preemptive. A server of speed v
serves work at rate v.

Speed: heap sift-up/sift-down are written out inside the loop rather than called.
Calls that pass arrays from the hot loop cost about 3× in throughput here (reference
counting and lost register allocation); with one push site and one pop site the
loop runs at tens of millions of jobs per second (benchmarks/sim_queue_speed.py).

Routing (dispatch at arrival, one queue per server): random (uniform server),
round-robin, JSQ (fewest jobs present, ties from a random rotation), power-of-d
(d distinct servers sampled by partial Fisher–Yates, fewest present, ties to the first
sampled), least-work (earliest FCFS finish: (outstanding work + own work)/speed).
``central`` keeps one queue; an arrival takes the fastest idle server.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from planner.sim.policies.base import CMU, DRR_FCFS, FCFS, PRIORITY_AGING, SRPT
from planner.sim.policies.drr import drr_select_class
from planner.sim.policies.keys import precedes, priority_key

ROUTE_CENTRAL = 0
ROUTE_RANDOM = 1
ROUTE_ROUND_ROBIN = 2
ROUTE_JSQ = 3
ROUTE_POWER_OF_D = 4
ROUTE_LEAST_WORK = 5


@njit(cache=True)
def _route(j, now, routing, power_d, route_u, size, speeds, running, comp, nwait, qwork, perm, rr):
    """Server index for arriving job j under a dispatch rule (see module doc)."""
    m = speeds.shape[0]
    if routing == ROUTE_RANDOM:
        s = int(route_u[j, 0] * m)
        return s if s < m else m - 1
    if routing == ROUTE_ROUND_ROBIN:
        return rr % m
    if routing == ROUTE_POWER_OF_D:
        best = -1
        best_n = 0
        for t in range(power_d):
            r = t + int(route_u[j, t] * (m - t))
            if r >= m:
                r = m - 1
            tmp = perm[t]
            perm[t] = perm[r]
            perm[r] = tmp
            s = perm[t]
            cnt = nwait[s] + (1 if running[s] >= 0 else 0)
            if best < 0 or cnt < best_n:
                best = s
                best_n = cnt
        return best
    start = int(route_u[j, 0] * m)
    best = -1
    best_v = 0.0
    for i in range(m):
        s = (start + i) % m
        if routing == ROUTE_JSQ:
            v = float(nwait[s] + (1 if running[s] >= 0 else 0))
        else:
            w = qwork[s]
            if running[s] >= 0:
                w += (comp[s] - now) * speeds[s]
            v = (w + size[j]) / speeds[s]
        if best < 0 or v < best_v:
            best = s
            best_v = v
    return best


@njit(cache=True)
def run_queue_loop(
    arrival: np.ndarray,
    cls: np.ndarray,
    size: np.ndarray,
    predicted: np.ndarray,
    tokens: np.ndarray,
    route_u: np.ndarray,
    weight: np.ndarray,
    mu: np.ndarray,
    jump: np.ndarray,
    quanta: np.ndarray,
    aging_rate: float,
    code: int,
    preemptive: bool,
    use_drr: bool,
    speeds: np.ndarray,
    routing: int,
    power_d: int,
):
    """Simulate every job to completion. Returns (start, finish, server, busy, preemptions).

    ``start`` is the first time a job entered service, ``server`` the last server that
    served it, ``busy[s]`` the total time server s spent serving. Each event either
    frees a server (which then pops the head of the chosen lane) or brings an arrival
    (which starts, preempts, or is pushed onto its lane): one pop site, one push site.
    """
    n = arrival.shape[0]
    n_cls = weight.shape[0]
    m = speeds.shape[0]
    central = routing == ROUTE_CENTRAL
    nq = 1 if central else m
    counts = np.zeros(n_cls, np.int64)
    for j in range(n):
        counts[cls[j]] += 1
    offs = np.zeros(n_cls, np.int64)
    acc = 0
    for k in range(n_cls):
        offs[k] = acc
        acc += counts[k]
    heap = np.empty(nq * n, np.int64)
    hsize = np.zeros((nq, n_cls), np.int64)
    lhead = np.zeros((nq, n_cls), np.int64)
    fifo = (not preemptive) and (code == FCFS or code == CMU or code == PRIORITY_AGING or code == DRR_FCFS)
    key = np.empty(n)
    remaining = size.copy() if preemptive else size  # written only when a job is preempted
    start = np.full(n, np.nan) if preemptive else np.empty(n)  # every job starts and finishes
    finish = np.empty(n)
    server = np.full(n, -1, np.int64)
    running = np.full(m, -1, np.int64)
    comp = np.full(m, np.inf)
    seg = np.zeros(m)
    busy = np.zeros(m)
    nwait = np.zeros(nq, np.int64)
    qwork = np.zeros(nq)
    deficits = np.zeros((nq, n_cls))
    ptr = np.full(nq, -1, np.int64)
    head_costs = np.zeros(n_cls)
    nonempty = np.zeros(n_cls, np.bool_)
    perm = np.arange(m)
    rr = 0
    nxt = 0
    preemptions = 0
    while True:
        s_dep = -1
        t_dep = np.inf
        for s in range(m):
            if comp[s] < t_dep:
                t_dep = comp[s]
                s_dep = s
        t_arr = arrival[nxt] if nxt < n else np.inf
        if s_dep < 0 and nxt >= n:
            break
        begin = -1
        target = -1
        push = -1
        q = 0
        if s_dep >= 0 and t_dep <= t_arr:
            now = t_dep
            target = s_dep
            j = running[target]
            finish[j] = now
            busy[target] += now - seg[target]
            running[target] = -1
            comp[target] = np.inf
            q = 0 if central else target
            if nwait[q] == 0:
                continue
            # ---- choose the lane
            chosen = -1
            if use_drr:
                for k in range(n_cls):
                    nonempty[k] = hsize[q, k] > 0
                    if nonempty[k]:
                        tok = tokens[heap[q * n + offs[k] + lhead[q, k]]]
                        head_costs[k] = tok if tok > 1.0 else 1.0
                chosen, ptr[q] = drr_select_class(deficits[q], quanta, head_costs, nonempty, ptr[q])
            else:
                best = -1
                for k in range(n_cls):
                    if hsize[q, k] > 0:
                        h = heap[q * n + offs[k] + lhead[q, k]]
                        if best < 0 or precedes(key[h], arrival[h], h, key[best], arrival[best], best):
                            best = h
                            chosen = k
            # ---- pop its head
            base = q * n + offs[chosen] + lhead[q, chosen]
            size_l = hsize[q, chosen]
            begin = heap[base]
            if fifo:
                lhead[q, chosen] += 1
            else:
                last = size_l - 1
                heap[base] = heap[base + last]
                i = 0
                while True:
                    left = 2 * i + 1
                    if left >= last:
                        break
                    bi = left
                    if left + 1 < last:
                        rj = heap[base + left + 1]
                        lj = heap[base + left]
                        if precedes(key[rj], arrival[rj], rj, key[lj], arrival[lj], lj):
                            bi = left + 1
                    c = heap[base + bi]
                    p = heap[base + i]
                    if precedes(key[c], arrival[c], c, key[p], arrival[p], p):
                        heap[base + bi] = p
                        heap[base + i] = c
                        i = bi
                    else:
                        break
            hsize[q, chosen] = size_l - 1
            if use_drr and size_l == 1:
                deficits[q, chosen] = 0.0
            nwait[q] -= 1
            qwork[q] -= remaining[begin]
        else:
            now = t_arr
            j = nxt
            nxt += 1
            k = cls[j]
            if code == SRPT:
                key[j] = -size[j]
            else:
                key[j] = priority_key(code, weight[k], mu[k], predicted[j], arrival[j], 0.0, jump[k],
                                      tokens[j], aging_rate)
            if central:
                for s in range(m):
                    if running[s] < 0 and (target < 0 or speeds[s] > speeds[target]):
                        target = s
                if target < 0 and preemptive:
                    for s in range(m):
                        if target < 0:
                            target = s
                        else:
                            r = running[s]
                            w = running[target]
                            if precedes(-(comp[target] - now) * speeds[target], arrival[w], w,
                                        -(comp[s] - now) * speeds[s], arrival[r], r):
                                target = s
                if target < 0:
                    push = j
            else:
                target = _route(j, now, routing, power_d, route_u, size, speeds, running, comp, nwait, qwork,
                                perm, rr)
                rr += 1
                q = target
            if push < 0:
                if running[target] < 0:
                    begin = j
                else:
                    r = running[target]
                    rem = (comp[target] - now) * speeds[target]
                    if preemptive and precedes(key[j], arrival[j], j, -rem, arrival[r], r):
                        busy[target] += now - seg[target]
                        remaining[r] = rem if rem > 0.0 else 0.0
                        key[r] = -remaining[r]
                        preemptions += 1
                        running[target] = -1
                        push = r
                        begin = j
                    else:
                        push = j
            if push >= 0:
                kp = cls[push]
                base = q * n + offs[kp] + lhead[q, kp]
                i = hsize[q, kp]
                heap[base + i] = push
                if not fifo:
                    while i > 0:
                        parent = (i - 1) >> 1
                        a = heap[base + i]
                        b = heap[base + parent]
                        if precedes(key[a], arrival[a], a, key[b], arrival[b], b):
                            heap[base + i] = b
                            heap[base + parent] = a
                            i = parent
                        else:
                            break
                hsize[q, kp] += 1
                nwait[q] += 1
                qwork[q] += remaining[push]
        if begin >= 0:
            if not preemptive or np.isnan(start[begin]):
                start[begin] = now
            server[begin] = target
            running[target] = begin
            seg[target] = now
            comp[target] = now + remaining[begin] / speeds[target]
    return start, finish, server, busy, preemptions

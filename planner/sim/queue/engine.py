"""The compiled event loop of the multiclass queue (one or many servers).

State: per server the running job, its completion epoch and the start of its current
service segment; per queue (one shared queue when routing is ``central``, else one per
server) one lane per class. Two event kinds: a departure (the earliest completion over
servers) and the next arrival (from the pre-drawn, sorted arrival array). Same-time
events are ordered (time, kind, sequence): departures before arrivals, servers by
index, arrivals by job id, so a freed server can take a job arriving at that instant.

Lanes: lane (q, k) is row q·K + k of the shared waiting-queue arrays of the replica engine
(:mod:`planner.sim.replica.heap`: keys and job ids per row). When a row fills, the event loop
returns and its caller, which owns the arrays, compacts that FIFO row or grows every row, and
calls it again: inside the loop the arrays never change, and a return is rare. A free
server takes the top of its queue: without DRR the job first in the order (key desc,
arrival asc, id asc) among the lane heads; with DRR the class is chosen by
:func:`~planner.sim.policies.drr.drr_select_class` (cost max(1, tokens)) and its lane gives
the head. When the policy is FIFO within a class and not preemptive, a lane is a plain
FIFO (jobs enter it in arrival order, which is then the policy's order); otherwise it is
the shared binary heap on the same total order. Keys are fixed when a job is enqueued,
evaluated at now = 0 (a key that grows with the time waited grows alike for every waiting
job, so the order is the same at every instant). A preemptive policy is preemptive-resume:
an arriving job whose key beats the running job's (evaluated at its remaining work)
displaces it, and the displaced job re-enters its lane with that key. A server of speed v
serves work at rate v.

The helpers are inlined into the loop (a real call passing its arrays costs the loop
several times its run time; docs/decisions/0013-sim-queue-engine-shares-the-heap.md).

Routing (dispatch at arrival, one queue per server): random (uniform server),
round-robin, JSQ (fewest jobs present, ties from a random rotation), power-of-d
(d distinct servers sampled by partial Fisher–Yates, fewest present, ties to the first
sampled), least-work (earliest FCFS finish: (outstanding work + own work)/speed).
``central`` keeps one queue; an arrival takes the fastest idle server.
"""

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import numpy as np

from planner.sim.jit import compiled_only, njit
from planner.sim.policies.drr import drr_select_class
from planner.sim.policies.keys import KeyFormValues, class_part, form_values, key_from_class_part, precedes
from planner.sim.replica.borrow import borrow
from planner.sim.replica.heap import grow, heap_pop, heap_push
from planner.sim.replica.inline import inlined

ROUTE_CENTRAL = 0
ROUTE_RANDOM = 1
ROUTE_ROUND_ROBIN = 2
ROUTE_JSQ = 3
ROUTE_POWER_OF_D = 4
ROUTE_LEAST_WORK = 5

# the policy's traits, as run_queue_loop receives them
T_FIFO, T_PREEMPTIVE, T_REMAINING, T_DRR = range(4)
INITIAL_LANE_CAP = 4096
# the event loop's counters, kept in an array while the loop stops to make room in a lane
C_NEXT_ARRIVAL, C_ROUND_ROBIN, C_PREEMPTIONS, N_COUNTERS = range(4)


@compiled_only
def _route(j: int, now: float, routing: int, power_d: int, route_u: np.ndarray, size: np.ndarray,
           speeds: np.ndarray, running: np.ndarray, comp: np.ndarray, nwait: np.ndarray, qwork: np.ndarray,
           perm: np.ndarray, rr: int) -> int:
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


@inlined
def _job_key(form: KeyFormValues, j: int, work: float, remaining_sized: bool, cls: np.ndarray, class_key: np.ndarray,
             predicted: np.ndarray, arrival: np.ndarray, tokens: np.ndarray) -> float:
    """Job j's key with ``work`` left: the policy's key sized by ``work`` or by the prediction."""
    sized = work if remaining_sized else predicted[j]
    return key_from_class_part(form, class_key[cls[j]], sized, arrival[j], 0.0, tokens[j])


@inlined
def _next_departure(comp: np.ndarray) -> tuple[int, float]:
    """(server, time) of the earliest completion; (−1, inf) when every server is idle."""
    s_dep = -1
    t_dep = np.inf
    for s in range(comp.shape[0]):
        if comp[s] < t_dep:
            t_dep = comp[s]
            s_dep = s
    return s_dep, t_dep


@inlined
def _choose_lane(q: int, n_cls: int, keys: np.ndarray, ids: np.ndarray, lsize: np.ndarray, lhead: np.ndarray,
                 arrival: np.ndarray, tokens: np.ndarray, use_drr: bool, deficits: np.ndarray, quanta: np.ndarray,
                 head_costs: np.ndarray, nonempty: np.ndarray, ptr: np.ndarray) -> int:
    """The class whose head queue q serves next (DRR arbiter, or the best lane head)."""
    chosen = -1
    if use_drr:
        for k in range(n_cls):
            h = q * n_cls + k
            nonempty[k] = lsize[h] > 0
            if nonempty[k]:
                tok = tokens[ids[h, lhead[h]]]
                head_costs[k] = tok if tok > 1.0 else 1.0
        chosen, ptr[q] = drr_select_class(deficits[q], quanta, head_costs, nonempty, ptr[q])
        return chosen
    best = -1
    best_key = 0.0
    for k in range(n_cls):
        h = q * n_cls + k
        if lsize[h] > 0:
            c = ids[h, lhead[h]]
            key = keys[h, lhead[h]]
            if best < 0 or precedes(key, arrival[c], c, best_key, arrival[best], best):
                best = c
                best_key = key
                chosen = k
    return chosen


@inlined
def _pop_lane(h: int, fifo: bool, keys: np.ndarray, ids: np.ndarray, lsize: np.ndarray, lhead: np.ndarray,
              arrival: np.ndarray) -> int:
    """Remove and return the head of lane h."""
    if fifo:
        top = ids[h, lhead[h]]
        lhead[h] += 1
        lsize[h] -= 1
        return top
    return heap_pop(keys, ids, lsize, arrival, h)


@inlined
def _take_next(q: int, n_cls: int, fifo: bool, keys: np.ndarray, ids: np.ndarray, lsize: np.ndarray,
               lhead: np.ndarray, arrival: np.ndarray, tokens: np.ndarray, remaining: np.ndarray, use_drr: bool,
               deficits: np.ndarray, quanta: np.ndarray, head_costs: np.ndarray, nonempty: np.ndarray,
               ptr: np.ndarray, nwait: np.ndarray, qwork: np.ndarray) -> int:
    """Remove and return the job queue q serves next (queue q is not empty); an emptied DRR lane
    forfeits its deficit."""
    k = _choose_lane(q, n_cls, keys, ids, lsize, lhead, arrival, tokens, use_drr, deficits, quanta, head_costs,
                     nonempty, ptr)
    h = q * n_cls + k
    job = _pop_lane(h, fifo, keys, ids, lsize, lhead, arrival)
    if use_drr and lsize[h] == 0:
        deficits[q, k] = 0.0
    nwait[q] -= 1
    qwork[q] -= remaining[job]
    return job


@inlined
def _push_lane(h: int, key: float, j: int, fifo: bool, keys: np.ndarray, ids: np.ndarray, lsize: np.ndarray,
               lhead: np.ndarray, arrival: np.ndarray) -> None:
    """Append job j to lane h (the caller made room: :func:`_lane_room`)."""
    if fifo:
        pos = lhead[h] + lsize[h]
        keys[h, pos] = key
        ids[h, pos] = j
        lsize[h] += 1
    else:
        heap_push(keys, ids, lsize, arrival, h, key, j)


@compiled_only
def _lane_room(h: int, keys: np.ndarray, ids: np.ndarray, lsize: np.ndarray,
               lhead: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lane arrays with room for one more job in full lane h: a FIFO lane with room behind its head
    is compacted in place, else every lane is grown to twice the capacity."""
    cap = keys.shape[1]
    if lhead[h] > 0 and 2 * lsize[h] < cap:
        for i in range(lsize[h]):
            keys[h, i] = keys[h, lhead[h] + i]
            ids[h, i] = ids[h, lhead[h] + i]
        lhead[h] = 0
        return keys, ids
    return grow(keys, ids, 2 * cap)


@inlined
def _central_server(now: float, preemptive: bool, speeds: np.ndarray, running: np.ndarray, comp: np.ndarray,
                    arrival: np.ndarray, form: KeyFormValues, remaining_sized: bool, cls: np.ndarray,
                    class_key: np.ndarray, predicted: np.ndarray, tokens: np.ndarray) -> int:
    """The server a central queue gives an arrival: the fastest idle one, else (preemptive) the one
    running the job last in the policy's order at its remaining work, else −1."""
    m = speeds.shape[0]
    target = -1
    for s in range(m):
        if running[s] < 0 and (target < 0 or speeds[s] > speeds[target]):
            target = s
    if target >= 0 or not preemptive:
        return target
    worst_key = 0.0
    for s in range(m):
        r = running[s]
        key = _job_key(form, r, (comp[s] - now) * speeds[s], remaining_sized, cls, class_key, predicted, arrival,
                       tokens)
        if target < 0 or precedes(worst_key, arrival[running[target]], running[target], key, arrival[r], r):
            target = s
            worst_key = key
    return target


@inlined
def _admit_arrival(j: int, now: float, target: int, preemptive: bool, key_j: float, running: np.ndarray,
                   comp: np.ndarray, speeds: np.ndarray, arrival: np.ndarray, remaining: np.ndarray,
                   busy: np.ndarray, seg: np.ndarray, form: KeyFormValues, remaining_sized: bool, cls: np.ndarray,
                   class_key: np.ndarray, predicted: np.ndarray, tokens: np.ndarray) -> tuple[int, int, float, int]:
    """Arrival j at server ``target``: (job to start, job to enqueue, key of that job, preempted 0/1).

    j starts on an idle server, or displaces the running job of a preemptive policy when its key
    beats that job's key at its remaining work; otherwise j waits.
    """
    if target < 0:
        return -1, j, key_j, 0
    if running[target] < 0:
        return j, -1, key_j, 0
    r = running[target]
    if preemptive:
        rem = (comp[target] - now) * speeds[target]
        key_r = _job_key(form, r, rem, remaining_sized, cls, class_key, predicted, arrival, tokens)
        if precedes(key_j, arrival[j], j, key_r, arrival[r], r):
            busy[target] += now - seg[target]
            running[target] = -1
            if rem > 0.0:
                remaining[r] = rem
            else:  # finished at this instant to rounding: it waits with no work left
                remaining[r] = 0.0
                key_r = _job_key(form, r, 0.0, remaining_sized, cls, class_key, predicted, arrival, tokens)
            return j, r, key_r, 1
    return -1, j, key_j, 0


@njit(cache=True)
def run_queue_loop(
    arrival: np.ndarray, cls: np.ndarray, size: np.ndarray, predicted: np.ndarray, tokens: np.ndarray,
    route_u: np.ndarray, weight: np.ndarray, mu: np.ndarray, jump: np.ndarray, quanta: np.ndarray,
    key_form: np.ndarray, traits: np.ndarray, speeds: np.ndarray, routing: int, power_d: int,
    lane_cap: int = INITIAL_LANE_CAP,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Simulate every job to completion. Returns (start, finish, server, busy, preemptions).

    ``key_form`` is the policy's packed :class:`~planner.sim.policies.base.KeyForm` and
    ``traits`` its flags indexed by ``T_FIFO``, ``T_PREEMPTIVE``, ``T_REMAINING``, ``T_DRR``.
    ``start`` is the first time a job entered service, ``server`` the last server that
    served it, ``busy[s]`` the total time server s spent serving. ``lane_cap`` changes no result.
    """
    n = arrival.shape[0]
    m = speeds.shape[0]
    nq = 1 if routing == ROUTE_CENTRAL else m
    preemptive = traits[T_PREEMPTIVE] != 0
    remaining = size.copy() if preemptive else size  # written only when a job is preempted
    start = np.full(n, np.nan) if preemptive else np.empty(n)  # every job starts and finishes
    finish = np.empty(n)
    server = np.full(n, -1, np.int64)
    busy = np.zeros(m)
    servers = (np.full(m, -1, np.int64), np.full(m, np.inf), np.zeros(m))  # running job, completion, segment start
    queues = (np.zeros(nq, np.int64), np.zeros(nq))  # jobs waiting, work waiting
    n_cls = weight.shape[0]
    class_key = np.empty(n_cls)  # the part of every key that depends on the class only
    for k in range(n_cls):
        class_key[k] = class_part(key_form, weight[k], mu[k], jump[k])
    drr = (np.zeros((nq, n_cls)), np.full(nq, -1, np.int64), np.zeros(n_cls), np.zeros(n_cls, np.bool_))
    cap = max(1, min(lane_cap, n))  # the lanes' first capacity (a FIFO lane never holds more than every job)
    keys, ids = np.empty((nq * n_cls, cap)), np.empty((nq * n_cls, cap), np.int64)
    lsize, lhead = np.zeros(nq * n_cls, np.int64), np.zeros(nq * n_cls, np.int64)
    counters, perm = np.zeros(N_COUNTERS, np.int64), np.arange(m)
    while True:  # the event loop stops when a lane fills up, so that the lanes are reallocated here, by their owner
        full = _event_loop(arrival, cls, size, predicted, tokens, route_u, class_key, quanta, key_form, traits,
                           speeds, routing, power_d, remaining, start, finish, server, busy, servers[0], servers[1],
                           servers[2], queues[0], queues[1], drr[0], drr[1], drr[2], drr[3], perm, keys,
                           ids, lsize, lhead, counters)
        if full < 0:
            break
        keys, ids = _lane_room(full, keys, ids, lsize, lhead)
    preemptions = counters[C_PREEMPTIONS]
    return start, finish, server, busy, preemptions


@compiled_only
def _event_loop(  # the arrays are owned by the caller
    arrival_o: np.ndarray, cls_o: np.ndarray, size_o: np.ndarray, predicted_o: np.ndarray, tokens_o: np.ndarray,
    route_u_o: np.ndarray, class_key_o: np.ndarray, quanta_o: np.ndarray,
    key_form_o: np.ndarray, traits: np.ndarray, speeds_o: np.ndarray, routing: int, power_d: int,
    remaining_o: np.ndarray, start_o: np.ndarray, finish_o: np.ndarray, server_o: np.ndarray, busy_o: np.ndarray,
    running_o: np.ndarray, comp_o: np.ndarray, seg_o: np.ndarray, nwait_o: np.ndarray, qwork_o: np.ndarray,
    deficits_o: np.ndarray, ptr_o: np.ndarray, head_costs_o: np.ndarray, nonempty_o: np.ndarray, perm_o: np.ndarray,
    keys_o: np.ndarray, ids_o: np.ndarray, lsize_o: np.ndarray, lhead_o: np.ndarray, counters_o: np.ndarray,
) -> int:
    """The events of :func:`run_queue_loop` on borrowed views of its arrays (no reference counting per access).
    An event frees a server (which takes the next job of its queue) or brings an arrival (which starts, preempts,
    or waits): one pop site, one push site. Runs until every job is done (returns −1) or until a lane fills up
    (returns that lane, for the caller to make room; the counters let the next call resume)."""
    arrival, cls, size, predicted, tokens = borrow(arrival_o), borrow(cls_o), borrow(size_o), borrow(predicted_o), \
        borrow(tokens_o)
    class_key, key_form = borrow(class_key_o), form_values(key_form_o)
    route_u, quanta, speeds = borrow(route_u_o), borrow(quanta_o), borrow(speeds_o)
    remaining, start, finish, server, busy = borrow(remaining_o), borrow(start_o), borrow(finish_o), \
        borrow(server_o), borrow(busy_o)
    running, comp, seg, nwait, qwork = borrow(running_o), borrow(comp_o), borrow(seg_o), borrow(nwait_o), \
        borrow(qwork_o)
    n, n_cls = arrival.shape[0], class_key.shape[0]
    central = routing == ROUTE_CENTRAL
    preemptive, remaining_sized, use_drr = traits[T_PREEMPTIVE] != 0, traits[T_REMAINING] != 0, traits[T_DRR] != 0
    fifo = traits[T_FIFO] != 0 and not preemptive
    keys, ids, lsize, lhead, counters = borrow(keys_o), borrow(ids_o), borrow(lsize_o), borrow(lhead_o), \
        borrow(counters_o)
    cap = keys.shape[1]
    deficits, ptr, head_costs, nonempty, perm = borrow(deficits_o), borrow(ptr_o), borrow(head_costs_o), \
        borrow(nonempty_o), borrow(perm_o)
    rr, nxt, preemptions = counters[C_ROUND_ROBIN], counters[C_NEXT_ARRIVAL], counters[C_PREEMPTIONS]
    full = -1
    while full < 0:
        s_dep, t_dep = _next_departure(comp)
        t_arr = arrival[nxt] if nxt < n else np.inf
        if s_dep < 0 and nxt >= n:
            break
        begin = -1
        if s_dep >= 0 and t_dep <= t_arr:
            now, target = t_dep, s_dep
            finish[running[target]], busy[target] = now, busy[target] + (now - seg[target])
            running[target], comp[target] = -1, np.inf
            q = 0 if central else target
            if nwait[q] == 0:
                continue
            begin = _take_next(q, n_cls, fifo, keys, ids, lsize, lhead, arrival, tokens, remaining, use_drr, deficits,
                               quanta, head_costs, nonempty, ptr, nwait, qwork)
        else:
            now, j = t_arr, nxt
            nxt += 1
            key_j = _job_key(key_form, j, remaining[j], remaining_sized, cls, class_key, predicted, arrival, tokens)
            if central:
                q = 0
                target = _central_server(now, preemptive, speeds, running, comp, arrival, key_form, remaining_sized,
                                         cls, class_key, predicted, tokens)
            else:
                target = _route(j, now, routing, power_d, route_u, size, speeds, running, comp, nwait, qwork,
                                perm, rr)
                rr += 1
                q = target
            begin, push, key_p, preempted = _admit_arrival(j, now, target, preemptive, key_j, running, comp, speeds,
                                                           arrival, remaining, busy, seg, key_form, remaining_sized,
                                                           cls, class_key, predicted, tokens)
            preemptions += preempted
            if push >= 0:
                h = q * n_cls + cls[push]
                _push_lane(h, key_p, push, fifo, keys, ids, lsize, lhead, arrival)
                if lhead[h] + lsize[h] == cap:
                    full = h
                nwait[q] += 1
                qwork[q] += remaining[push]
        if begin >= 0:
            if not preemptive or np.isnan(start[begin]):
                start[begin] = now
            server[begin] = target
            running[target] = begin
            seg[target] = now
            comp[target] = now + remaining[begin] / speeds[target]
    counters[C_ROUND_ROBIN], counters[C_NEXT_ARRIVAL], counters[C_PREEMPTIONS] = rr, nxt, preemptions
    return full

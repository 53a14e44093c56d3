"""The compiled event loop of a replica pool: arrivals, routing, steps, expiry, accounting.

Events are arrivals (kind 0) and step completions (kind 1), processed in order of
(time, kind, replica index): at equal times arrivals come first, so a step formed at t
sees every request that arrived at t. A request routed to an idle replica schedules a
zero-length "step" at its arrival time, which forms the first real step after all
same-time arrivals are queued (a static batch of B simultaneous requests therefore
starts as one batch).

Before each event the loop rejects (HTTP 429) every request whose queue wait reached its
class's ``max_queue_wait_ms`` and that has never been admitted. Per class, deadlines
arrival + max wait are in arrival order, so one pointer per class finds them in O(1)
amortised. A rejection is recorded at its deadline, whatever time the loop notices it;
no decision is taken between the two, so nothing depends on the delay. Requests that were
admitted and then preempted are never rejected: they already hold a first token.

A request whose prompt plus reserved output cannot fit the admission limit of the replica
it was routed to is rejected on arrival ("too large"). Both kinds of rejection are
reported per class.

Little's law: the loop integrates N(t), the number of requests present, event by event
(area += N · Δt), independently of the per-request records, and the wrapper compares
(1/T)∫N dt with λ·E[T] computed from those records.
"""

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import math

import numpy as np

from planner.sim.jit import njit
from planner.sim.replica.batching import finish_step, start_step
from planner.sim.replica.borrow import borrow
from planner.sim.replica.heap import grow
from planner.sim.replica.inline import inlined
from planner.sim.replica.prefix import cache_scores
from planner.sim.replica.requests import enqueue, outstanding
from planner.sim.replica.routing import CACHE_AWARE, SESSION_AFFINITY, choose_replica
from planner.sim.replica.state import (
    A_AREA,
    A_LAST,
    B_NSYS,
    B_RR,
    C_MAXWAIT,
    F_ADMIT,
    F_EXIT,
    G_D,
    G_ROUTER,
    H_W0,
    H_W1,
    I_CLS,
    I_PROMPT,
    I_REASON,
    I_REP,
    I_SESS,
    I_STATUS,
    NO_INDEX,
    P_KV,
    P_KVLIM,
    P_MAXB,
    P_NRUN,
    P_NWAIT,
    P_STEPS,
    PENDING,
    Q_BATCHAREA,
    Q_BUSY,
    Q_END,
    Q_KVAREA,
    Q_WORK,
    REASON_TOO_LARGE,
    REASON_WAIT,
    REJECTED,
    WAITING,
    State,
)


@inlined
def _advance(st: State, now: float) -> None:
    """Integrate N(t) up to ``now``, then reject every request whose wait deadline has passed."""
    req_i = st.req_i
    req_f = st.req_f
    rep_i = st.rep_i
    rep_f = st.rep_f
    acc_f = st.acc_f
    acc_i = st.acc_i
    arrival = st.arrival
    cls_f = st.cls_f
    order = st.class_order
    start = st.class_start
    exp_ptr = st.exp_ptr
    acc_f[A_AREA] += float(acc_i[B_NSYS]) * (now - acc_f[A_LAST])
    acc_f[A_LAST] = now
    for k in range(cls_f.shape[0]):
        wait = cls_f[k, C_MAXWAIT]
        ptr = exp_ptr[k]
        stop = start[k + 1] - start[k]
        while ptr < stop:
            j = order[start[k] + ptr]
            deadline = arrival[j] + wait
            if deadline > now or req_i[j, I_STATUS] == PENDING:
                break
            if req_i[j, I_STATUS] == WAITING and math.isnan(req_f[j, F_ADMIT]):
                r = req_i[j, I_REP]
                req_i[j, I_STATUS] = REJECTED
                req_i[j, I_REASON] = REASON_WAIT
                req_f[j, F_EXIT] = deadline
                rep_i[r, P_NWAIT] -= 1
                rep_f[r, Q_WORK] -= outstanding(req_i, req_f, j)
                acc_i[B_NSYS] -= 1
                acc_f[A_AREA] -= now - deadline
            ptr += 1
        exp_ptr[k] = ptr


@inlined
def _arrive(st: State, hkey: np.ndarray, hid: np.ndarray, j: int, now: float) -> None:
    req_i = st.req_i
    rep_i = st.rep_i
    rep_f = st.rep_f
    present = st.present
    for r in range(rep_i.shape[0]):
        present[r] = rep_i[r, P_NWAIT] + rep_i[r, P_NRUN]
    code = st.pol_i[G_ROUTER]
    s = req_i[j, I_SESS]
    if code == SESSION_AFFINITY and s >= 0 and st.sess_rep[s] >= 0:
        r = st.sess_rep[s]
    else:
        if code == CACHE_AWARE:
            cache_scores(st, j)
        r = choose_replica(code, st.pol_i[G_D], st.route_u[j], st.acc_i[B_RR:B_RR + 1], present, rep_f[:, Q_WORK],
                           st.tmp_score)
        if s >= 0:
            st.sess_rep[s] = r
    if req_i[j, I_PROMPT] + st.reserve[req_i[j, I_CLS]] > rep_i[r, P_KVLIM]:
        req_i[j, I_REP] = r
        req_i[j, I_STATUS] = REJECTED
        req_i[j, I_REASON] = REASON_TOO_LARGE
        st.req_f[j, F_EXIT] = now
        return
    st.acc_i[B_NSYS] += 1
    enqueue(st, hkey, hid, j, r)
    rep_f[r, Q_WORK] += outstanding(req_i, st.req_f, j)
    if rep_f[r, Q_END] == np.inf:
        rep_f[r, Q_END] = now  # kick an idle replica once the same-time arrivals are in


@inlined
def _account(st: State, r: int, start: float, end: float) -> None:
    """Busy time, KV token-seconds and batch-seconds of one step, clipped to the measurement window."""
    rep_f = st.rep_f
    w0 = st.pol_f[H_W0]
    w1 = st.pol_f[H_W1]
    lo = start if start > w0 else w0
    hi = end if end < w1 else w1
    st.rep_i[r, P_STEPS] += 1
    if hi > lo:
        rep_f[r, Q_BUSY] += hi - lo
        rep_f[r, Q_KVAREA] += float(st.rep_i[r, P_KV]) * (hi - lo)
        rep_f[r, Q_BATCHAREA] += float(st.rep_i[r, P_NRUN]) * (hi - lo)


@inlined
def _fullest(st: State, r: int) -> int:
    """Entries in the fullest waiting heap of replica r."""
    heap_n = st.heap_n
    n_cls = st.cls_f.shape[0]
    fullest = 0
    for h in range(r * n_cls, (r + 1) * n_cls):
        if heap_n[h] > fullest:
            fullest = heap_n[h]
    return fullest


@inlined
def _borrowed(s: State) -> State:
    """The state with every array borrowed (:mod:`.borrow`): valid while ``s`` is alive."""
    return State(
        borrow(s.arrival), borrow(s.route_u), borrow(s.req_i), borrow(s.req_f), borrow(s.rep_i),
        borrow(s.rep_f), borrow(s.rep_step), borrow(s.run_ids), borrow(s.run_kind), borrow(s.run_tok), borrow(s.mu),
        borrow(s.drr_def), borrow(s.cls_f), borrow(s.reserve), borrow(s.class_order), borrow(s.class_start),
        borrow(s.exp_ptr), borrow(s.pol_i), borrow(s.pol_f), borrow(s.pol_key), borrow(s.acc_f), borrow(s.acc_i),
        borrow(s.tokens_win), borrow(s.heap_n), borrow(s.tmp_def), borrow(s.tmp_cost), borrow(s.tmp_mask),
        borrow(s.tmp_mark), borrow(s.present), borrow(s.blk_ids), borrow(s.cache), borrow(s.sess_rep), borrow(s.pfx_f),
        borrow(s.tmp_score),
    )


@njit(cache=True)
def run_pool(owner: State, hkey_owner: np.ndarray, hid_owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Simulate until every request has left; return the (possibly regrown) heap arrays."""
    st = _borrowed(owner)
    hkey = borrow(hkey_owner)
    hid = borrow(hid_owner)
    arrival = st.arrival
    rep_i = st.rep_i
    rep_f = st.rep_f
    n = arrival.shape[0]
    n_rep = rep_i.shape[0]
    margin = 1
    for r in range(n_rep):
        if rep_i[r, P_MAXB] + 1 > margin:
            margin = rep_i[r, P_MAXB] + 1
    nxt = NO_INDEX + 1  # request 0, an int64 and not a literal (see NO_INDEX): it is passed to cache_scores
    while True:
        r_min = NO_INDEX
        t_min = np.inf
        for r in range(n_rep):
            if rep_f[r, Q_END] < t_min:
                t_min = rep_f[r, Q_END]
                r_min = r
        t_arr = arrival[nxt] if nxt < n else np.inf
        if nxt >= n and r_min < 0:
            break
        arriving = t_arr <= t_min
        now = t_arr if arriving else t_min
        _advance(st, now)
        if arriving:
            _arrive(st, hkey, hid, nxt, now)
            r_touched = st.req_i[nxt, I_REP]
            nxt += 1
        else:
            finish_step(st, r_min, now)
            dt = start_step(st, hkey, hid, r_min, now)
            if dt < 0.0:
                rep_f[r_min, Q_END] = np.inf
            else:
                rep_f[r_min, Q_END] = now + dt
                _account(st, r_min, now, now + dt)
            r_touched = r_min
        if r_touched >= 0:
            fullest = _fullest(st, r_touched)
            if fullest + margin > hkey.shape[1]:  # one of its heaps could overflow during the next event
                hkey_owner, hid_owner = grow(hkey_owner, hid_owner, 2 * (fullest + margin))
                hkey = borrow(hkey_owner)
                hid = borrow(hid_owner)
    return hkey_owner, hid_owner

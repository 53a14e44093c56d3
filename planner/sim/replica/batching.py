"""One replica's iteration: continuous batching with chunked prefill, KV budget, admission.

A step is formed at time t (:func:`start_step`), runs for the profile's step time
(:mod:`.step_time`: dense work of its decodes plus prefill tokens, decode attention over the
KV the decodes read, prefill attention over the chunks' causal query-key pairs) and is
completed at t + t_step (:func:`finish_step`). Forming a step, in order:

1. **Decodes** (running requests whose prefill is done), oldest admission first: one token
   each, one KV slot each. The budget of ``token_budget`` tokens per step is charged 1.
2. **Ongoing prefills**, oldest first: a chunk of min(tokens left, budget left, chunk cap).
   The chunk cap is vLLM's ``--long-prefill-token-threshold`` (0: none): with it a long prompt
   takes at most that many tokens of each step, and the rest of the budget goes on to admit
   new requests, whose first chunk is capped alike.
3. Whenever a request needs KV the cache does not have, cached blocks no running request uses
   are evicted first (:mod:`.prefix`, least recently used first); if that is not enough, the
   **most recently admitted** running request is preempted by recompute (vLLM's default): its KV is freed, its
   reservation released, and it goes back to the waiting queue with prompt + generated
   tokens to prefill again; generated tokens are kept.
4. **Admission** from the waiting queues in the policy's order (DRR picks the class first)
   while budget is left, the batch is below ``max_batch``, the admission reservation fits,
   reserved + prompt + max(reserve_k, generated + 1) ≤ kv_fraction · KV capacity, and the
   first chunk fits the free KV. The first request that does not fit stops admission
   (head-of-line blocking keeps the policy's order honest). Under ``srpt`` a candidate that
   does not fit may preempt running requests with a larger predicted remaining output
   p̂ − generated, but only those that have generated fewer than trail_c · p̂ tokens
   (Trail: Shahout et al., arXiv:2410.01035): the worst first, and only if that makes it fit.
   With a prefix cache, a candidate whose first h blocks (B tokens each) are cached on the
   replica uses them: its prefill starts at h·B tokens, its reservation and its KV need drop
   by h·B (the cached blocks no one uses count as free KV it may reclaim, those it takes
   excepted), and h·B tokens count as saved (:mod:`.prefix`).

KV tokens read: a decode reads its whole context (prompt + generated); a prefill chunk of q
tokens after p already prefilled (or found cached) for its request attends to q·(p + (q + 1)/2)
query-key pairs: a cached prefix is context, not prefill tokens.
At the end of a step every decode yields one token, and a prefill that reaches its target
yields one (the first token, or the next one after a recompute). A request leaves when it
has generated its output length.

Implementation note: every function reads the :class:`~planner.sim.replica.state.State`
fields it needs into locals on entry, and the per-step ones are inlined into the event
loop (:mod:`.inline`); the rare paths (preemption, Trail's victim search) are plain
calls. The arrays are borrowed views (:mod:`.borrow`), so neither costs reference counting.
Each helper is inlined at as few places as the logic allows (one pass over the class
heaps in :func:`_candidate`, one removal loop in :func:`_admit`): every inlined copy is
compiled again, and the event loop's one-time compile grows with them.
"""

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import math

import numpy as np

from planner.sim.policies.drr import drr_cost, drr_note_dequeue, drr_select_class
from planner.sim.policies.keys import precedes
from planner.sim.replica.heap import heap_clean_top, heap_remove_top
from planner.sim.replica.inline import inlined
from planner.sim.replica.prefix import evict, leading_run, register, release, take
from planner.sim.replica.requests import outstanding, preempt
from planner.sim.replica.state import (
    B_NSYS,
    C_QUANTUM,
    DONE,
    F_ADMIT,
    F_EXIT,
    F_FIRST,
    G_DRR,
    G_PREEMPTIVE,
    H_W0,
    H_W1,
    I_CLS,
    I_COMPUTED,
    I_CREF,
    I_FILL,
    I_GEN,
    I_HELD,
    I_HIT,
    I_NBLK,
    I_OUT,
    I_PRE_KV,
    I_PREFILLED,
    I_PROMPT,
    I_RESERVED,
    I_SAVED,
    I_STATUS,
    I_TARGET,
    NO_INDEX,
    P_BLOCK,
    P_BUDGET,
    P_CAP,
    P_CFREE,
    P_CHUNK,
    P_DRRPTR,
    P_KV,
    P_KVLIM,
    P_MAXB,
    P_MAXKV,
    P_NRUN,
    P_NWAIT,
    P_RES,
    Q_WORK,
    RUNNING,
    SLOT_DECODE,
    SLOT_IDLE,
    SLOT_PREFILL,
    WAITING,
    State,
)
from planner.sim.replica.step_time import step_ms
from planner.sim.replica.trail import make_room


@inlined
def _schedule_running(st: State, hkey: np.ndarray, hid: np.ndarray, r: int) -> int:
    """Give running requests their tokens, decodes first, then ongoing prefills, oldest first;
    evict the newest when KV runs out. Returns the budget left for admissions."""
    req_i = st.req_i
    rep_i = st.rep_i
    run_ids = st.run_ids
    run_kind = st.run_kind
    run_tok = st.run_tok
    cap = rep_i[r, P_CAP]
    budget = rep_i[r, P_BUDGET]
    chunk_cap = rep_i[r, P_CHUNK]
    for phase in range(2):
        want_prefill = phase == 1
        i = 0
        while i < rep_i[r, P_NRUN]:
            j = run_ids[r, i]
            prefilling = req_i[j, I_PREFILLED] < req_i[j, I_TARGET]
            if prefilling != want_prefill:
                i += 1
                continue
            need = 1
            if prefilling:
                need = req_i[j, I_TARGET] - req_i[j, I_PREFILLED]
                if need > budget:
                    need = budget
                if 0 < chunk_cap < need:
                    need = chunk_cap
            if need <= 0:
                i += 1
                continue
            evicted_self = False
            while rep_i[r, P_KV] + rep_i[r, P_CFREE] + need > cap:
                if rep_i[r, P_CFREE] > 0:  # unused cached blocks go before anyone is preempted
                    evict(rep_i, st.cache, r, need)
                    continue
                last = rep_i[r, P_NRUN] - 1
                req_i[run_ids[r, last], I_PRE_KV] += 1
                budget += preempt(st, hkey, hid, r, last)
                if last == i:
                    evicted_self = True
                    break
            if evicted_self:
                break
            req_i[j, I_HELD] += need
            rep_i[r, P_KV] += need
            budget -= need
            run_kind[r, i] = SLOT_PREFILL if prefilling else SLOT_DECODE
            run_tok[r, i] = need
            i += 1
    return budget


@inlined
def _candidate(st: State, hkey: np.ndarray, hid: np.ndarray, r: int) -> tuple[int, int]:
    """(request, class) next in the policy's order at replica r, or (−1, −1); DRR charges deficits."""
    req_i = st.req_i
    arrival = st.arrival
    heap_n = st.heap_n
    tmp_mask = st.tmp_mask
    tmp_cost = st.tmp_cost
    tmp_def = st.tmp_def
    deficits = st.drr_def[r]
    status = req_i[:, I_STATUS]
    n_cls = st.cls_f.shape[0]
    is_drr = st.pol_i[G_DRR] != 0
    best = NO_INDEX
    best_k = NO_INDEX
    for k in range(n_cls):  # one pass over the class heaps serves both rules (one inlined copy of the heap code)
        h = r * n_cls + k
        top = heap_clean_top(hkey, hid, heap_n, arrival, status, WAITING, h)
        if is_drr:
            tmp_mask[k] = top >= 0
            tmp_cost[k] = drr_cost(float(req_i[top, I_TARGET])) if top >= 0 else 1.0
            tmp_def[k] = deficits[k]
        elif top >= 0 and (best < 0 or precedes(hkey[h, 0], arrival[top], top,
                                                hkey[r * n_cls + best_k, 0], arrival[best], best)):
            best = top
            best_k = k
    if not is_drr:
        return best, best_k
    k, ptr = drr_select_class(deficits, st.cls_f[:, C_QUANTUM], tmp_cost, tmp_mask, st.rep_i[r, P_DRRPTR])
    if k < 0:
        return NO_INDEX, NO_INDEX
    st.rep_i[r, P_DRRPTR] = ptr
    return hid[r * n_cls + k, 0], k


@inlined
def _reservation(req_i: np.ndarray, reserve: np.ndarray, j: int) -> int:
    """KV reserved at admission: prompt + max(class reserve, generated + 1)."""
    out = reserve[req_i[j, I_CLS]]
    if req_i[j, I_GEN] + 1 > out:
        out = req_i[j, I_GEN] + 1
    return req_i[j, I_PROMPT] + out


@inlined
def _admit(st: State, hkey: np.ndarray, hid: np.ndarray, r: int, k: int, cand: int, need_res: int, chunk: int,
           hit: int, now: float) -> None:
    """Move ``cand`` (the head of class k's queue) into the batch with a first chunk, using its
    first ``hit`` blocks from the prefix cache."""
    req_i = st.req_i
    rep_i = st.rep_i
    h = r * st.cls_f.shape[0] + k
    top = heap_remove_top(hkey, hid, st.heap_n, st.arrival, req_i[:, I_STATUS], WAITING, h)
    if st.pol_i[G_DRR] != 0:
        drr_note_dequeue(st.drr_def[r], k, top < 0)
    rep_i[r, P_NWAIT] -= 1
    req_i[cand, I_STATUS] = RUNNING
    req_i[cand, I_RESERVED] = need_res
    rep_i[r, P_RES] += need_res
    if hit > 0:
        take(req_i, rep_i, st.blk_ids, st.cache, r, cand, hit)
        cached = req_i[cand, I_HELD]
        req_i[cand, I_PREFILLED] = cached
        req_i[cand, I_SAVED] += cached
        st.rep_f[r, Q_WORK] -= float(cached)  # prefill it no longer needs (``outstanding``)
        if math.isnan(st.req_f[cand, F_ADMIT]):
            req_i[cand, I_HIT] = cached
    if rep_i[r, P_CFREE] > 0:
        evict(rep_i, st.cache, r, chunk)
    if math.isnan(st.req_f[cand, F_ADMIT]):
        st.req_f[cand, F_ADMIT] = now
    slot = rep_i[r, P_NRUN]
    st.run_ids[r, slot] = cand
    st.run_kind[r, slot] = SLOT_PREFILL
    st.run_tok[r, slot] = chunk
    rep_i[r, P_NRUN] = slot + 1
    req_i[cand, I_HELD] += chunk
    rep_i[r, P_KV] += chunk


@inlined
def _step_cost(st: State, r: int) -> tuple[int, int, int, float]:
    """(decodes, KV tokens the decodes read, prefill tokens, prefill query-key pairs) of the step just formed."""
    req_i = st.req_i
    run_ids = st.run_ids
    run_kind = st.run_kind
    run_tok = st.run_tok
    decodes = 0
    decode_kv = 0
    prefill = 0
    pairs = 0.0
    for i in range(st.rep_i[r, P_NRUN]):
        kind = run_kind[r, i]
        if kind == SLOT_IDLE:
            continue
        j = run_ids[r, i]
        if kind == SLOT_DECODE:
            decodes += 1
            decode_kv += req_i[j, I_HELD]
        else:
            chunk = run_tok[r, i]
            prefill += chunk
            pairs += float(chunk) * (float(req_i[j, I_HELD] - chunk) + (float(chunk) + 1.0) / 2.0)
    return decodes, decode_kv, prefill, pairs


@inlined
def start_step(st: State, hkey: np.ndarray, hid: np.ndarray, r: int, now: float) -> float:
    """Form replica r's next step at ``now``; return its duration in seconds (−1 when idle)."""
    req_i = st.req_i
    rep_i = st.rep_i
    drr_def = st.drr_def
    tmp_def = st.tmp_def
    reserve = st.reserve
    n_cls = st.cls_f.shape[0]
    is_drr = st.pol_i[G_DRR] != 0
    is_preemptive = st.pol_i[G_PREEMPTIVE] != 0
    budget = _schedule_running(st, hkey, hid, r)
    while budget > 0:
        old_ptr = rep_i[r, P_DRRPTR]
        cand, k = _candidate(st, hkey, hid, r)
        if cand < 0:
            break
        hit = 0
        hit_free = 0
        if rep_i[r, P_BLOCK] > 0 and req_i[cand, I_NBLK] > 0:
            hit, hit_free = leading_run(req_i, rep_i, st.blk_ids, st.cache, r, cand,
                                        (req_i[cand, I_TARGET] - 1) // rep_i[r, P_BLOCK])
        skip = hit * rep_i[r, P_BLOCK]
        need_res = _reservation(req_i, reserve, cand) - skip
        chunk = req_i[cand, I_TARGET] - skip
        if chunk > budget:
            chunk = budget
        if 0 < rep_i[r, P_CHUNK] < chunk:
            chunk = rep_i[r, P_CHUNK]
        fits_batch = rep_i[r, P_NRUN] < rep_i[r, P_MAXB]
        fits_res = rep_i[r, P_RES] + need_res <= rep_i[r, P_KVLIM]
        # the cached blocks it uses need no new KV; unused cached blocks it does not use can be evicted
        if fits_batch and fits_res and rep_i[r, P_KV] + hit_free * rep_i[r, P_BLOCK] + chunk <= rep_i[r, P_CAP]:
            _admit(st, hkey, hid, r, k, cand, need_res, chunk, hit, now)
            budget -= chunk
            continue
        if is_drr:  # not dispatched: undo the arbiter's charge
            for kk in range(n_cls):
                drr_def[r, kk] = tmp_def[kk]
            rep_i[r, P_DRRPTR] = old_ptr
        if is_preemptive and not (fits_batch and fits_res):
            if make_room(st, hkey, hid, r, cand, hkey[r * n_cls + k, 0], need_res):
                budget = _budget_left(st, r)
                continue
        break
    decodes, decode_kv, prefill, pairs = _step_cost(st, r)
    if decodes + prefill == 0:
        return -1.0
    if rep_i[r, P_KV] > rep_i[r, P_MAXKV]:
        rep_i[r, P_MAXKV] = rep_i[r, P_KV]
    return step_ms(st.rep_step, r, decodes, decode_kv, prefill, pairs) / 1000.0


@inlined
def _budget_left(st: State, r: int) -> int:
    """Tokens of replica r's step budget not yet given to a slot (a decode slot holds 1)."""
    run_kind = st.run_kind
    run_tok = st.run_tok
    budget = st.rep_i[r, P_BUDGET]
    for i in range(st.rep_i[r, P_NRUN]):
        if run_kind[r, i] != SLOT_IDLE:
            budget -= run_tok[r, i]
    return budget


@inlined
def finish_step(st: State, r: int, now: float) -> None:
    """Apply the step that ends at ``now``: tokens produced, requests completed, KV freed."""
    req_i = st.req_i
    req_f = st.req_f
    rep_i = st.rep_i
    rep_f = st.rep_f
    run_ids = st.run_ids
    run_kind = st.run_kind
    run_tok = st.run_tok
    tokens_win = st.tokens_win
    acc_i = st.acc_i
    w0 = st.pol_f[H_W0]
    w1 = st.pol_f[H_W1]
    write = 0
    for i in range(rep_i[r, P_NRUN]):
        j = run_ids[r, i]
        kind = run_kind[r, i]
        keep = True
        if kind != SLOT_IDLE:
            before = outstanding(req_i, req_f, j)
            produced = False
            if kind == SLOT_DECODE:
                req_i[j, I_GEN] += 1
                produced = True
            else:
                req_i[j, I_PREFILLED] += run_tok[r, i]
                req_i[j, I_COMPUTED] += run_tok[r, i]
                if req_i[j, I_PREFILLED] == req_i[j, I_TARGET]:
                    req_i[j, I_GEN] += 1
                    produced = True
                    if math.isnan(req_f[j, F_FIRST]):
                        req_f[j, F_FIRST] = now
            rep_f[r, Q_WORK] += outstanding(req_i, req_f, j) - before
            if produced and w0 <= now < w1:
                tokens_win[req_i[j, I_CLS]] += 1
            if req_i[j, I_HELD] >= req_i[j, I_FILL] and rep_i[r, P_BLOCK] > 0:  # it filled a listed block
                full = req_i[j, I_HELD] // rep_i[r, P_BLOCK]
                if full > req_i[j, I_NBLK]:
                    full = req_i[j, I_NBLK]
                register(req_i, rep_i, st.blk_ids, st.cache, r, j, full)
            if req_i[j, I_GEN] == req_i[j, I_OUT]:
                keep = False
                req_i[j, I_STATUS] = DONE
                req_f[j, F_EXIT] = now
                if req_i[j, I_CREF] > 0:  # its cached blocks stay cached
                    release(req_i, rep_i, st.blk_ids, st.cache, r, j)
                rep_i[r, P_KV] -= req_i[j, I_HELD]
                req_i[j, I_HELD] = 0
                rep_i[r, P_RES] -= req_i[j, I_RESERVED]
                req_i[j, I_RESERVED] = 0
                rep_f[r, Q_WORK] -= outstanding(req_i, req_f, j)
                acc_i[B_NSYS] -= 1
        if keep:
            run_ids[r, write] = j
            run_kind[r, write] = SLOT_IDLE
            run_tok[r, write] = 0
            write += 1
    rep_i[r, P_NRUN] = write

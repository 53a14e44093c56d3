"""Moving one request between the waiting queues and a replica's batch.

* :func:`waiting_key` — its policy key at a replica (:func:`~planner.sim.policies.keys.priority_key`
  of the policy's key form; larger is served first). Keys are evaluated with ``now = 0``: a key
  that grows with the time waited grows alike for every waiting request, so the order is the
  same at any evaluation time.
* :func:`enqueue` — into its class's heap at a replica.
* :func:`preempt` — out of the batch by recompute: KV freed (its blocks in the prefix cache
  stay cached), reservation released, prompt + generated tokens to prefill again, generated
  tokens kept, back into the queue.
* :func:`outstanding` — the tokens it still needs (the ``least-tokens`` router's measure).

See :mod:`.batching` for why these take the state tuple but read its fields into locals.
"""

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import numpy as np

from planner.sim.jit import njit
from planner.sim.policies.keys import priority_key
from planner.sim.replica.heap import heap_push
from planner.sim.replica.inline import inlined
from planner.sim.replica.prefix import release
from planner.sim.replica.state import (
    C_JUMP,
    C_WEIGHT,
    F_PRED,
    G_REMAINING,
    I_CLS,
    I_CREF,
    I_GEN,
    I_HELD,
    I_PREFILLED,
    I_PROMPT,
    I_REP,
    I_RESERVED,
    I_STATUS,
    I_TARGET,
    P_KV,
    P_NRUN,
    P_NWAIT,
    P_RES,
    Q_WORK,
    SLOT_IDLE,
    WAITING,
    State,
)


@inlined
def outstanding(req_i: np.ndarray, req_f: np.ndarray, j: int) -> float:
    """Tokens request j still needs: prefill left plus max(0, p̂ − generated)."""
    left = req_f[j, F_PRED] - req_i[j, I_GEN]
    return float(req_i[j, I_TARGET] - req_i[j, I_PREFILLED]) + (left if left > 0.0 else 0.0)


@inlined
def waiting_key(st: State, j: int, r: int) -> float:
    """Policy key of request j waiting at (or running on) replica r; larger is served first."""
    req_i = st.req_i
    req_f = st.req_f
    cls_f = st.cls_f
    k = req_i[j, I_CLS]
    size = req_f[j, F_PRED]
    if st.pol_i[G_REMAINING] != 0:
        size = req_f[j, F_PRED] - req_i[j, I_GEN]
    return priority_key(st.pol_key, cls_f[k, C_WEIGHT], st.mu[r, k], size, st.arrival[j], 0.0,
                        cls_f[k, C_JUMP], float(req_i[j, I_TARGET]))


@inlined
def enqueue(st: State, hkey: np.ndarray, hid: np.ndarray, j: int, r: int) -> None:
    req_i = st.req_i
    n_cls = st.cls_f.shape[0]
    req_i[j, I_STATUS] = WAITING
    req_i[j, I_REP] = r
    key = waiting_key(st, j, r)
    heap_push(hkey, hid, st.heap_n, st.arrival, r * n_cls + req_i[j, I_CLS], key, j)
    st.rep_i[r, P_NWAIT] += 1


@njit(cache=True)
def preempt(st: State, hkey: np.ndarray, hid: np.ndarray, r: int, slot: int) -> int:
    """Evict the running request in ``slot`` (recompute); return the step tokens it gives back.

    The caller counts the preemption (``I_PRE_KV`` or ``I_PRE_POL``): a constant flag argument
    would make numba compile this function once per value.
    """
    req_i = st.req_i
    req_f = st.req_f
    rep_i = st.rep_i
    run_ids = st.run_ids
    run_kind = st.run_kind
    run_tok = st.run_tok
    j = run_ids[r, slot]
    before = outstanding(req_i, req_f, j)
    given_back = run_tok[r, slot] if run_kind[r, slot] != SLOT_IDLE else 0
    if req_i[j, I_CREF] > 0:  # its cached blocks stay cached
        release(req_i, rep_i, st.blk_ids, st.cache, r, j)
    rep_i[r, P_KV] -= req_i[j, I_HELD]
    req_i[j, I_HELD] = 0
    rep_i[r, P_RES] -= req_i[j, I_RESERVED]
    req_i[j, I_RESERVED] = 0
    req_i[j, I_PREFILLED] = 0
    req_i[j, I_TARGET] = req_i[j, I_PROMPT] + req_i[j, I_GEN]
    st.rep_f[r, Q_WORK] += outstanding(req_i, req_f, j) - before
    n = rep_i[r, P_NRUN]
    for i in range(slot, n - 1):
        run_ids[r, i] = run_ids[r, i + 1]
        run_kind[r, i] = run_kind[r, i + 1]
        run_tok[r, i] = run_tok[r, i + 1]
    rep_i[r, P_NRUN] = n - 1
    enqueue(st, hkey, hid, j, r)
    return given_back



"""Array layout of the compiled replica engine, and its constructor from Python objects.

The engine keeps everything in a few numpy arrays held by one :class:`State` named
tuple, so the compiled loop and the Python wrapper share memory and the results need no
copying. Column indices are module constants (numba folds them into the code).

Per request j (rows of ``req_i``/``req_f``, ids in arrival order):

* ``target`` is the number of tokens the next prefill must process: the prompt at first,
  prompt + generated tokens after a preemption (recompute).
* ``held`` is the KV cache the request occupies: the tokens prefilled so far plus one per
  decode step (prompt + generated − 1 between steps; the token being fed is counted while
  its step runs).
* ``reserved`` is its admission reservation: prompt + max(reserve_k, generated + 1), with
  reserve_k the class's output-length quantile (``output_quantile_reserve``).

Per replica r (rows of ``rep_i``/``rep_f``/``rep_step``): KV capacity and admission limit
(tokens), max batch, token budget per step, the cap on one request's prefill chunk, live
counters, the time-integrals used for utilisation (measured on the window [w0, w1)), and
the step model packed as :mod:`.step_time` reads it.
"""

from __future__ import annotations

import collections
from typing import cast

import numpy as np

from planner.sim.policies.base import KeyForm

NO_INDEX = cast(int, np.int64(-1))
"""No replica, request or class. A numpy integer, not ``-1``: numba types a literal ``-1`` as
a type of its own, and while it infers the types of a variable that starts as one it
compiles every function the variable is passed to twice, for the literal and for int64."""
# request status
PENDING, WAITING, RUNNING, DONE, REJECTED = 0, 1, 2, 3, 4
# rejection reasons
REASON_NONE, REASON_WAIT, REASON_TOO_LARGE = 0, 1, 2
# req_i columns
I_CLS, I_PROMPT, I_OUT, I_REP, I_STATUS, I_PREFILLED, I_TARGET, I_GEN, I_HELD, I_RESERVED = range(10)
I_PRE_KV, I_PRE_POL, I_REASON = 10, 11, 12
N_REQ_I = 13
# req_f columns
F_PRED, F_ADMIT, F_FIRST, F_EXIT = range(4)
N_REQ_F = 4
# rep_i columns
P_NRUN, P_KV, P_RES, P_NWAIT, P_CAP, P_KVLIM, P_MAXB, P_BUDGET, P_DRRPTR, P_STEPS, P_MAXKV, P_CHUNK = range(12)
N_REP_I = 12
# rep_f columns
Q_END, Q_WORK, Q_BUSY, Q_KVAREA, Q_BATCHAREA = range(5)
N_REP_F = 5
# running-slot kinds in one step
SLOT_IDLE, SLOT_DECODE, SLOT_PREFILL = 0, 1, 2
# cls_f columns
C_WEIGHT, C_JUMP, C_QUANTUM, C_MAXWAIT = range(4)
N_CLS_F = 4
# pol_i: the policy's traits (DRR class arbiter, Trail-limited preemption, key sized by remaining
# work), router code, router d
G_DRR, G_PREEMPTIVE, G_REMAINING, G_ROUTER, G_D = range(5)
# pol_f: (unused), the policy's preemption limit (Trail's c), window start, window end; pol_key: its packed
# KeyForm. Column 0 is unused: callers that build these arrays themselves (static_batch) pass four columns.
H_TRAIL, H_W0, H_W1 = 1, 2, 3
# acc_f: area under N(t), time of the last event; acc_i: requests present, round-robin counter
A_AREA, A_LAST = 0, 1
B_NSYS, B_RR = 0, 1

State = collections.namedtuple(
    "State",
    [
        "arrival", "route_u", "req_i", "req_f",
        "rep_i", "rep_f", "rep_step", "run_ids", "run_kind", "run_tok", "mu", "drr_def",
        "cls_f", "reserve", "class_order", "class_start", "exp_ptr",
        "pol_i", "pol_f", "pol_key", "acc_f", "acc_i", "tokens_win", "heap_n",
        "tmp_def", "tmp_cost", "tmp_mask", "tmp_mark", "present",
    ],
)

INITIAL_HEAP_CAP = 256
FCFS_KEY = KeyForm(waited=1.0).packed()


def build_state(
    *,
    arrival: np.ndarray,
    cls: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    predicted: np.ndarray,
    route_u: np.ndarray,
    replica_steps: np.ndarray,
    replica_ints: np.ndarray,
    mu: np.ndarray,
    class_f: np.ndarray,
    reserve: np.ndarray,
    policy_i: np.ndarray,
    policy_f: np.ndarray,
    policy_key: np.ndarray | None = None,
) -> tuple[State, np.ndarray, np.ndarray]:
    """Fresh engine state and empty heaps for one replication of one pool.

    ``replica_steps[r]`` = replica r's packed step model (``StepModel.packed``), ``replica_ints[r] =
    (kv_capacity_tokens, admission limit, max_batch, token budget, prefill chunk cap)``, the chunk cap being the
    most prompt tokens one request prefills in a step (0: the budget left); ``policy_key`` is the policy's packed
    key form (FCFS's when not given).
    """
    n = int(arrival.size)
    n_rep = int(replica_steps.shape[0])
    n_cls = int(class_f.shape[0])
    req_i = np.zeros((n, N_REQ_I), dtype=np.int64)
    req_i[:, I_CLS] = cls
    req_i[:, I_PROMPT] = prompt
    req_i[:, I_OUT] = output
    req_i[:, I_TARGET] = prompt
    req_i[:, I_REP] = -1
    req_f = np.full((n, N_REQ_F), np.nan)
    req_f[:, F_PRED] = predicted
    rep_i = np.zeros((n_rep, N_REP_I), dtype=np.int64)
    rep_i[:, [P_CAP, P_KVLIM, P_MAXB, P_BUDGET, P_CHUNK]] = replica_ints[:, :5]
    rep_i[:, P_DRRPTR] = -1
    rep_f = np.zeros((n_rep, N_REP_F))
    rep_f[:, Q_END] = np.inf
    max_batch = int(replica_ints[:, 2].max())
    order = np.argsort(cls, kind="stable").astype(np.int64)
    start = np.zeros(n_cls + 1, dtype=np.int64)
    start[1:] = np.cumsum(np.bincount(cls, minlength=n_cls))
    state = State(
        arrival=np.ascontiguousarray(arrival, dtype=np.float64),
        route_u=np.ascontiguousarray(route_u, dtype=np.float64),
        req_i=req_i,
        req_f=req_f,
        rep_i=rep_i,
        rep_f=rep_f,
        rep_step=np.ascontiguousarray(replica_steps, dtype=np.float64),
        run_ids=np.full((n_rep, max_batch), -1, dtype=np.int64),
        run_kind=np.zeros((n_rep, max_batch), dtype=np.int64),
        run_tok=np.zeros((n_rep, max_batch), dtype=np.int64),
        mu=np.ascontiguousarray(mu, dtype=np.float64),
        drr_def=np.zeros((n_rep, n_cls)),
        cls_f=np.ascontiguousarray(class_f, dtype=np.float64),
        reserve=np.ascontiguousarray(reserve, dtype=np.int64),
        class_order=order,
        class_start=start,
        exp_ptr=np.zeros(n_cls, dtype=np.int64),
        pol_i=np.ascontiguousarray(policy_i, dtype=np.int64),
        pol_f=np.ascontiguousarray(policy_f, dtype=np.float64),
        pol_key=np.ascontiguousarray(FCFS_KEY if policy_key is None else policy_key, dtype=np.float64),
        acc_f=np.zeros(2),
        acc_i=np.zeros(2, dtype=np.int64),
        tokens_win=np.zeros(n_cls, dtype=np.int64),
        heap_n=np.zeros(n_rep * n_cls, dtype=np.int64),
        tmp_def=np.zeros(n_cls),
        tmp_cost=np.zeros(n_cls),
        tmp_mask=np.zeros(n_cls, dtype=np.bool_),
        tmp_mark=np.zeros(max_batch, dtype=np.bool_),
        present=np.zeros(n_rep, dtype=np.int64),
    )
    cap = max(INITIAL_HEAP_CAP, 2 * max_batch + 2)
    return state, np.zeros((n_rep * n_cls, cap)), np.zeros((n_rep * n_cls, cap), dtype=np.int64)

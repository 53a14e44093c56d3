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
  reserve_k the class's output-length quantile (``output_quantile_reserve``), less the tokens
  its admission found in the prefix cache.
* ``cref`` is the number of its leading blocks it references in its replica's prefix cache
  (:mod:`.prefix`); ``hit`` the tokens its first admission found cached, ``saved`` those of
  every admission (recompute included), ``computed`` the prefill tokens it ran.

Per replica r (rows of ``rep_i``/``rep_f``/``rep_step``): KV capacity and admission limit
(tokens), max batch, token budget per step, the cap on one request's prefill chunk, live
counters, the time-integrals used for utilisation (measured on the window [w0, w1)), and
the step model packed as :mod:`.step_time` reads it.

Prefix cache (:mod:`.prefix`): request j's content blocks are the ``I_NBLK`` entries of
``blk_ids`` from ``I_BLK0`` (dense indices 0..U−1); replica r's cache is a table of
slots, ``cache[r, s]`` = (running requests using the slot's block, previous and next slot in
the LRU list of cached blocks no running request uses, −1 at its ends; the block, −1 for an
empty slot, −2 for a deleted one), with the list's head ``P_LRU_HEAD`` and tail
``P_LRU_TAIL`` and ``P_SLOTS`` slots not empty (``P_HASHED`` 0: slot s holds block s), in
blocks of ``P_BLOCK`` tokens (0: caching off on that replica). ``P_KV`` counts KV used by
running requests (a shared block once), ``P_CFREE`` the tokens of cached unused blocks.
``I_SESS`` is a request's session (−1: none), ``sess_rep`` each session's replica.
``I_FILL`` is the KV a request must hold for its next listed block to be full (``NEVER``
when none is left), so the step loop tests one comparison.
The cache arrays are int32 to halve their memory (replicas × slots × 16 bytes).
"""

from __future__ import annotations

import collections
from typing import NamedTuple, cast

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
I_NBLK, I_CREF, I_HIT, I_SAVED, I_COMPUTED, I_BLK0, I_SESS, I_FILL = 13, 14, 15, 16, 17, 18, 19, 20
N_REQ_I = 21
NEVER = 2**62
"""``I_FILL`` of a request with no listed block left to fill (held KV never reaches it)."""
# req_f columns
F_PRED, F_ADMIT, F_FIRST, F_EXIT = range(4)
N_REQ_F = 4
# rep_i columns
P_NRUN, P_KV, P_RES, P_NWAIT, P_CAP, P_KVLIM, P_MAXB, P_BUDGET, P_DRRPTR, P_STEPS, P_MAXKV, P_CHUNK = range(12)
P_BLOCK, P_CFREE, P_LRU_HEAD, P_LRU_TAIL, P_SLOTS, P_HASHED = 12, 13, 14, 15, 16, 17
N_REP_I = 18
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
# pfx_f: the cache-aware router's overlap weight
X_OVERLAP = 0
# cache[r, s] columns: users (−1: no block), previous and next slot in the LRU list, the slot's block
K_REF, K_PREV, K_NEXT, K_BLOCK = 0, 1, 2, 3
EMPTY_SLOT, DELETED_SLOT = -1, -2

State = collections.namedtuple(
    "State",
    [
        "arrival", "route_u", "req_i", "req_f",
        "rep_i", "rep_f", "rep_step", "run_ids", "run_kind", "run_tok", "mu", "drr_def",
        "cls_f", "reserve", "class_order", "class_start", "exp_ptr",
        "pol_i", "pol_f", "pol_key", "acc_f", "acc_i", "tokens_win", "heap_n",
        "tmp_def", "tmp_cost", "tmp_mask", "tmp_mark", "present",
        "blk_ids", "cache", "sess_rep", "pfx_f", "tmp_score",
    ],
)

INITIAL_HEAP_CAP = 256
FCFS_KEY = KeyForm(waited=1.0).packed()
DEFAULT_OVERLAP_WEIGHT = 2.0
"""The cache-aware router's overlap weight: Dynamo's KV router's default cost function,
2 · overlap − KV usage − normalised waiting (:mod:`.routing`)."""


class PrefixInput(NamedTuple):
    """The prefix data of one sample in the engine's terms (:func:`planner.sim.replica.pool.engine_state`).

    ``block_ids`` are dense indices 0..``n_blocks``−1 (content ids mapped by ``np.unique``),
    request j's being ``block_ids[block_ptr[j]:block_ptr[j+1]]``; ``block_tokens[r]`` is replica
    r's cache block in tokens, 0 where caching is off; ``session`` dense session indices
    0..``n_sessions``−1, −1 for none.
    """

    block_ptr: np.ndarray
    block_ids: np.ndarray
    n_blocks: int
    block_tokens: np.ndarray
    session: np.ndarray
    n_sessions: int
    overlap_weight: float = DEFAULT_OVERLAP_WEIGHT


def no_prefix(n: int, n_rep: int) -> PrefixInput:
    """No prefix data: no request has blocks, no replica caches, no sessions."""
    return PrefixInput(np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), 0,
                       np.zeros(n_rep, dtype=np.int64), np.full(n, -1, dtype=np.int64), 0)


DIRECT_TABLE_CELLS = 32_000_000
"""Replicas × distinct blocks up to which each replica's cache has a slot per block (16 bytes each: 512 MB)."""


def hashed_slots(n_blocks: int, kv_capacity_tokens: np.ndarray, block_tokens: np.ndarray) -> int:
    """Slots of a replica's hash table: a power of two at least four times the most blocks one replica
    can hold at once (its KV capacity over its block size, and never more than the sample's distinct
    blocks), so that live blocks fill at most a quarter of it; 0 when no replica caches."""
    caching = block_tokens > 0
    if n_blocks == 0 or not caching.any():
        return 0
    most = min(n_blocks, int((kv_capacity_tokens[caching] // block_tokens[caching]).max()) + 1)
    return 1 << max(3, (4 * most - 1).bit_length())


def cache_layout(n_blocks: int, kv_capacity_tokens: np.ndarray, block_tokens: np.ndarray) -> tuple[int, bool]:
    """(slots per replica, hashed) of the prefix cache (:mod:`.prefix`): a slot per distinct block,
    block b in slot b, the quickest lookup, when that fits in :data:`DIRECT_TABLE_CELLS` or takes no
    more than a hash table would; else a hash table (:func:`hashed_slots`), whose size follows the
    pool, not the trace."""
    hashed = hashed_slots(n_blocks, kv_capacity_tokens, block_tokens)
    if hashed == 0 or n_blocks <= hashed or kv_capacity_tokens.size * n_blocks <= DIRECT_TABLE_CELLS:
        return (n_blocks if hashed else 0), False
    return hashed, True


def _prefix_arrays(prefix: PrefixInput, rep_i: np.ndarray) -> dict[str, np.ndarray]:
    """The prefix-cache fields of :class:`State`: nothing cached, empty LRU lists; sets ``P_HASHED``."""
    n_rep = rep_i.shape[0]
    slots, hashed = cache_layout(prefix.n_blocks, rep_i[:, P_CAP], prefix.block_tokens)
    rep_i[:, P_HASHED] = int(hashed)
    return {
        "blk_ids": np.ascontiguousarray(prefix.block_ids, dtype=np.int64),
        "cache": np.full((n_rep, slots, 4), -1, dtype=np.int32),
        "sess_rep": np.full(max(prefix.n_sessions, 0), -1, dtype=np.int64),
        "pfx_f": np.array([prefix.overlap_weight], dtype=np.float64),
        "tmp_score": np.zeros(n_rep, dtype=np.float64),
    }


def _request_ints(cls: np.ndarray, prompt: np.ndarray, output: np.ndarray, prefix: PrefixInput) -> np.ndarray:
    """``req_i`` before the run: class, lengths, the first prefill's target, no replica, its blocks, its session."""
    req_i = np.zeros((cls.size, N_REQ_I), dtype=np.int64)
    req_i[:, I_CLS] = cls
    req_i[:, I_PROMPT] = prompt
    req_i[:, I_OUT] = output
    req_i[:, I_TARGET] = prompt
    req_i[:, I_REP] = -1
    req_i[:, I_NBLK] = np.diff(prefix.block_ptr)
    req_i[:, I_BLK0] = prefix.block_ptr[:-1]
    req_i[:, I_SESS] = prefix.session
    block = int(prefix.block_tokens.max(initial=0))
    req_i[:, I_FILL] = np.where((req_i[:, I_NBLK] > 0) & (block > 0), block, NEVER)
    return req_i


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
    prefix: PrefixInput | None = None,
) -> tuple[State, np.ndarray, np.ndarray]:
    """Fresh engine state and empty heaps for one replication of one pool.

    ``replica_steps[r]`` = replica r's packed step model (``StepModel.packed``), ``replica_ints[r] =
    (kv_capacity_tokens, admission limit, max_batch, token budget, prefill chunk cap)``, the chunk cap being the
    most prompt tokens one request prefills in a step (0: the budget left); ``policy_key`` is the policy's packed
    key form (FCFS's when not given); ``prefix`` the sample's prefix data (none when not given).
    """
    n = int(arrival.size)
    n_rep = int(replica_steps.shape[0])
    n_cls = int(class_f.shape[0])
    prefix = no_prefix(n, n_rep) if prefix is None else prefix
    req_i = _request_ints(cls, prompt, output, prefix)
    req_f = np.full((n, N_REQ_F), np.nan)
    req_f[:, F_PRED] = predicted
    rep_i = np.zeros((n_rep, N_REP_I), dtype=np.int64)
    rep_i[:, [P_CAP, P_KVLIM, P_MAXB, P_BUDGET, P_CHUNK]] = replica_ints[:, :5]
    rep_i[:, P_DRRPTR] = -1
    rep_i[:, P_BLOCK] = prefix.block_tokens
    rep_i[:, P_LRU_HEAD] = -1
    rep_i[:, P_LRU_TAIL] = -1
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
        **_prefix_arrays(prefix, rep_i),
    )
    cap = max(INITIAL_HEAP_CAP, 2 * max_batch + 2)
    return state, np.zeros((n_rep * n_cls, cap)), np.zeros((n_rep * n_cls, cap), dtype=np.int64)

"""A prefix cache per replica (vLLM's automatic prefix caching), in the compiled engine's arrays.

**Blocks.** Request j's KV is cut into blocks of B tokens (``P_BLOCK`` of its replica; 0: the
replica does not cache). Its content ids are the ``I_NBLK`` entries of ``blk_ids`` from
``I_BLK0`` (dense indices; two requests whose lists start with the same ids share that
prefix). The list covers its prompt and may go on over its output (a conversation's next
turn starts with this turn's prompt and answer). Only full blocks are cached: block i of j
once j holds (i + 1)·B tokens of KV, and only the blocks its list names.

**The cache of replica r** is a table of slots: slot s holds block ``cache[r, s, K_BLOCK]``
and ``cache[r, s, K_REF]`` ≥ 0, the number of running requests that use it. When the table
has a slot per distinct block of the sample, block b is slot b. When that would not fit in
memory (a pool of many replicas on a long trace;
:func:`planner.sim.replica.state.cache_layout`), ``P_HASHED`` is set and the table is an
open-addressing hash table sized by the replica's KV capacity: linear probing from a hash
that keeps runs of 64 consecutive block ids together (a prompt's blocks are often
consecutive ids, so its lookups stay in a few cache lines) and spreads the runs. An evicted
block then leaves a deleted mark that lookups step over; when live and deleted slots reach
half the table, :func:`_rehash` lays the live blocks out again, LRU order kept. The layout
decides nothing: every outcome is the same in both.

A block enters when a running request fills it (:func:`register`, at the end of the step
that computes it: from then on a request arriving or admitted finds it) and stays after that
request leaves or is preempted, until evicted. A cached block nobody uses sits in an LRU
list (``K_PREV``/``K_NEXT``, head ``P_LRU_HEAD``, tail ``P_LRU_TAIL``), and eviction takes
the head, the least recently released. A request releases its blocks last first
(:func:`release`), so its tail blocks are evicted before its head ones, as vLLM's free-block
queue does. A block a running request completes while it is already cached (two requests
computing the same prefix at once) is used from the cache and the request's own copy freed:
the cache holds one copy of each block (vLLM may keep both for a while; this is the one
place the model departs from it).

**KV.** ``P_KV`` = tokens of running requests outside the cache + B × (cached blocks in use),
so a shared block counts once; ``P_CFREE`` = B × (cached blocks in the LRU list). Every
allocation keeps ``P_KV + P_CFREE ≤ capacity``, evicting LRU blocks before preempting anyone
(:func:`evict`): cached-but-unused blocks hold capacity that admission may reclaim.

**A hit.** When a request is admitted on its replica (first time, or again after a
preemption), it finds its longest leading run of cached blocks, at most ⌊(target − 1)/B⌋
blocks so that at least one token is computed (vLLM's rule: the last token's logits are
needed); :func:`take` makes it use them. Its prefill then starts at h·B tokens: those tokens
are its context in the step model (the prefill attention of its chunks reads them), not new
prefill tokens.

Everything here runs only for requests that have blocks on replicas that cache; without
prefix data no function of this module is called and the engine does exactly what it did.
"""

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import numpy as np

from planner.sim.jit import compiled_only
from planner.sim.replica.inline import inlined
from planner.sim.replica.state import (
    DELETED_SLOT,
    EMPTY_SLOT,
    I_BLK0,
    I_CREF,
    I_FILL,
    I_HELD,
    I_NBLK,
    I_PROMPT,
    K_BLOCK,
    K_NEXT,
    K_PREV,
    K_REF,
    NEVER,
    NO_INDEX,
    P_BLOCK,
    P_CAP,
    P_CFREE,
    P_HASHED,
    P_KV,
    P_LRU_HEAD,
    P_LRU_TAIL,
    P_NWAIT,
    P_SLOTS,
    X_OVERLAP,
    State,
)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""2⁶⁴ / φ: Fibonacci hashing spreads the runs of block ids over the table."""
RUN_BITS = 6
"""Block ids b and b' with b >> 6 == b' >> 6 hash to neighbouring slots."""


@inlined
def _home(b: int, slots: int) -> int:
    """Block b's first slot in a hash table of ``slots`` (a power of two) slots."""
    run = np.int64((np.uint64(b >> RUN_BITS) * _GOLDEN) >> np.uint64(32))
    return ((run << RUN_BITS) | (b & ((1 << RUN_BITS) - 1))) & (slots - 1)  # type: ignore[return-value]


@inlined
def _find(rep_i: np.ndarray, cache: np.ndarray, r: int, b: int) -> int:
    """The slot of block b in replica r's table, −1 when b is not cached."""
    if rep_i[r, P_HASHED] == 0:
        return b if cache[r, b, K_REF] >= 0 else NO_INDEX
    slots = cache.shape[1]
    s = _home(b, slots)
    while True:
        held = cache[r, s, K_BLOCK]
        if held == b:
            return s
        if held == EMPTY_SLOT:
            return NO_INDEX
        s = (s + 1) & (slots - 1)


@compiled_only
def _rehash(rep_i: np.ndarray, cache: np.ndarray, r: int) -> None:
    """Lay replica r's live blocks out again without deleted marks, keeping users and LRU order."""
    slots = cache.shape[1]
    old = cache[r].copy()
    moved = np.full(slots, -1, dtype=np.int32)
    cache[r, :, :] = -1  # every slot empty: no block, no users, no links
    live = 0
    for s in range(slots):
        b = old[s, K_BLOCK]
        if b < 0:
            continue
        t = _home(b, slots)
        while cache[r, t, K_BLOCK] != EMPTY_SLOT:
            t = (t + 1) & (slots - 1)
        cache[r, t, K_BLOCK] = b
        cache[r, t, K_REF] = old[s, K_REF]
        moved[s] = t
        live += 1
    for s in range(slots):
        t = moved[s]
        if t >= 0:
            if old[s, K_PREV] >= 0:
                cache[r, t, K_PREV] = moved[old[s, K_PREV]]
            if old[s, K_NEXT] >= 0:
                cache[r, t, K_NEXT] = moved[old[s, K_NEXT]]
    if rep_i[r, P_LRU_HEAD] >= 0:
        rep_i[r, P_LRU_HEAD] = moved[rep_i[r, P_LRU_HEAD]]
        rep_i[r, P_LRU_TAIL] = moved[rep_i[r, P_LRU_TAIL]]
    rep_i[r, P_SLOTS] = live


@compiled_only
def _insert(rep_i: np.ndarray, cache: np.ndarray, r: int, b: int) -> None:
    """Cache block b (not cached) on replica r with one user."""
    s = b
    if rep_i[r, P_HASHED] != 0:
        slots = cache.shape[1]
        if 2 * (rep_i[r, P_SLOTS] + 1) > slots:
            _rehash(rep_i, cache, r)
            if 4 * rep_i[r, P_SLOTS] > slots:
                raise RuntimeError("prefix cache: more blocks cached than the replica's KV capacity holds")
        s = _home(b, slots)
        while cache[r, s, K_BLOCK] >= 0:
            s = (s + 1) & (slots - 1)
        if cache[r, s, K_BLOCK] == EMPTY_SLOT:
            rep_i[r, P_SLOTS] += 1
    cache[r, s, K_BLOCK] = b
    cache[r, s, K_REF] = 1
    cache[r, s, K_PREV] = -1
    cache[r, s, K_NEXT] = -1


@inlined
def _unlink(rep_i: np.ndarray, cache: np.ndarray, r: int, s: int) -> None:
    """Take slot s out of replica r's LRU list."""
    prev = cache[r, s, K_PREV]
    nxt = cache[r, s, K_NEXT]
    if prev >= 0:
        cache[r, prev, K_NEXT] = nxt
    else:
        rep_i[r, P_LRU_HEAD] = nxt
    if nxt >= 0:
        cache[r, nxt, K_PREV] = prev
    else:
        rep_i[r, P_LRU_TAIL] = prev
    cache[r, s, K_PREV] = -1
    cache[r, s, K_NEXT] = -1


@inlined
def _append(rep_i: np.ndarray, cache: np.ndarray, r: int, s: int) -> None:
    """Put slot s at the tail of replica r's LRU list (the last to be evicted)."""
    tail = rep_i[r, P_LRU_TAIL]
    cache[r, s, K_PREV] = tail
    cache[r, s, K_NEXT] = -1
    if tail >= 0:
        cache[r, tail, K_NEXT] = s
    else:
        rep_i[r, P_LRU_HEAD] = s
    rep_i[r, P_LRU_TAIL] = s


# The compiled functions below take the arrays they use, not the State: a call copies its
# arguments, and the State is some thirty arrays (registering a block is on the decode path).
# They are calls, not inlined helpers, and their callers test whether they are needed: every
# helper inlined into the event loop adds to its one-time compile (:mod:`.inline`).


@compiled_only
def leading_run(req_i: np.ndarray, rep_i: np.ndarray, blk_ids: np.ndarray, cache: np.ndarray, r: int,
                j: int, limit: int) -> tuple[int, int]:
    """(h, free): request j's longest leading run of blocks cached on replica r, at most ``limit``
    blocks, and how many of them no running request uses (they would come out of the LRU list)."""
    start = req_i[j, I_BLK0]
    stop = req_i[j, I_NBLK]
    if limit < stop:
        stop = limit
    h = 0
    free = 0
    while h < stop:
        s = _find(rep_i, cache, r, blk_ids[start + h])
        if s < 0:
            break
        if cache[r, s, K_REF] == 0:
            free += 1
        h += 1
    return h, free


@compiled_only
def take(req_i: np.ndarray, rep_i: np.ndarray, blk_ids: np.ndarray, cache: np.ndarray, r: int, j: int,
         h: int) -> None:
    """Request j (holding no KV) starts using its first h blocks, all cached on replica r."""
    size = rep_i[r, P_BLOCK]
    start = req_i[j, I_BLK0]
    for i in range(h):
        s = _find(rep_i, cache, r, blk_ids[start + i])
        if cache[r, s, K_REF] == 0:
            _unlink(rep_i, cache, r, s)
            rep_i[r, P_CFREE] -= size
            rep_i[r, P_KV] += size
        cache[r, s, K_REF] += 1
    req_i[j, I_CREF] = h
    req_i[j, I_HELD] = h * size
    req_i[j, I_FILL] = (h + 1) * size if h < req_i[j, I_NBLK] else NEVER


@compiled_only
def evict(rep_i: np.ndarray, cache: np.ndarray, r: int, need: int) -> None:
    """Evict LRU blocks of replica r until ``need`` more tokens fit, or none is left to evict."""
    size = rep_i[r, P_BLOCK]
    while rep_i[r, P_KV] + rep_i[r, P_CFREE] + need > rep_i[r, P_CAP] and rep_i[r, P_LRU_HEAD] >= 0:
        s = rep_i[r, P_LRU_HEAD]
        _unlink(rep_i, cache, r, s)
        cache[r, s, K_REF] = -1
        cache[r, s, K_BLOCK] = DELETED_SLOT if rep_i[r, P_HASHED] != 0 else EMPTY_SLOT
        rep_i[r, P_CFREE] -= size


@compiled_only
def register(req_i: np.ndarray, rep_i: np.ndarray, blk_ids: np.ndarray, cache: np.ndarray, r: int, j: int,
             full: int) -> None:
    """Request j now holds ``full`` full blocks of its list (more than it uses): cache the new ones.
    The caller tests ``I_HELD >= I_FILL`` first, which is all the decode path pays."""
    size = rep_i[r, P_BLOCK]
    start = req_i[j, I_BLK0]
    for i in range(req_i[j, I_CREF], full):
        b = blk_ids[start + i]
        s = _find(rep_i, cache, r, b)
        if s < 0:
            _insert(rep_i, cache, r, b)
            continue
        users = cache[r, s, K_REF]
        if users == 0:  # computed twice at once: use the cached copy, free this one
            _unlink(rep_i, cache, r, s)
            rep_i[r, P_CFREE] -= size
        else:
            rep_i[r, P_KV] -= size
        cache[r, s, K_REF] = users + 1
    req_i[j, I_CREF] = full
    req_i[j, I_FILL] = (full + 1) * size if full < req_i[j, I_NBLK] else NEVER


@compiled_only
def release(req_i: np.ndarray, rep_i: np.ndarray, blk_ids: np.ndarray, cache: np.ndarray, r: int, j: int) -> None:
    """Request j, leaving the batch (done or preempted), stops using its cached blocks, last first:
    they stay cached, and those no one else uses go to the LRU tail. What it still holds is its own
    KV, which the caller frees."""
    size = rep_i[r, P_BLOCK]
    start = req_i[j, I_BLK0]
    used = req_i[j, I_CREF]
    for i in range(used - 1, -1, -1):
        s = _find(rep_i, cache, r, blk_ids[start + i])
        cache[r, s, K_REF] -= 1
        if cache[r, s, K_REF] == 0:
            _append(rep_i, cache, r, s)
            rep_i[r, P_KV] -= size
            rep_i[r, P_CFREE] += size
    req_i[j, I_CREF] = 0
    req_i[j, I_HELD] -= used * size
    req_i[j, I_FILL] = size  # used > 0, so it lists a block


@compiled_only
def cache_scores(st: State, j: int) -> None:
    """``tmp_score[r]`` for the cache-aware router (:mod:`.routing`), from the state at j's arrival:
    w · (cached leading blocks of j on r) · B / prompt − KV in use / capacity − waiting / max waiting."""
    rep_i = st.rep_i
    n_rep = rep_i.shape[0]
    most_waiting = 0
    for r in range(n_rep):
        if rep_i[r, P_NWAIT] > most_waiting:
            most_waiting = rep_i[r, P_NWAIT]
    weight = st.pfx_f[X_OVERLAP]
    prompt = float(st.req_i[j, I_PROMPT])
    for r in range(n_rep):
        overlap = 0.0
        if rep_i[r, P_BLOCK] > 0:
            h, _ = leading_run(st.req_i, rep_i, st.blk_ids, st.cache, r, j, st.req_i[j, I_NBLK])
            overlap = float(h * rep_i[r, P_BLOCK]) / prompt
        score = weight * overlap - float(rep_i[r, P_KV]) / float(rep_i[r, P_CAP])
        if most_waiting > 0:
            score -= float(rep_i[r, P_NWAIT]) / float(most_waiting)
        st.tmp_score[r] = score

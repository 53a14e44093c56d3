"""A prefix cache per replica (vLLM's automatic prefix caching), in the compiled engine's arrays.

**Blocks.** Request j's KV is cut into blocks of B tokens (``P_BLOCK`` of its replica; 0: the
replica does not cache). Its content ids are ``blk_ids[blk_ptr[j]:blk_ptr[j+1]]`` (dense
indices; two requests that share a leading run of ids share that prefix). The list covers
its prompt and may go on over its output (a conversation's next turn starts with this turn's
prompt and answer). Only full blocks are cached: block i of j once j holds (i + 1)·B tokens
of KV, and only the blocks its list names.

**The cache of replica r** is the set of blocks with ``c_in[r, b]``. A block enters when a
running request fills it (:func:`note_full_blocks`) and stays after that request leaves or is
preempted, until evicted. ``c_ref[r, b]`` counts the running requests that use it; a cached
block nobody uses sits in an LRU list (``c_prev``/``c_next``, head ``P_LRU_HEAD``, tail
``P_LRU_TAIL``), and eviction takes the head, the least recently released. A request releases
its blocks last first (:func:`free_kv`), so its tail blocks are evicted before its head ones,
as vLLM's free-block queue does. A block a running request completes while it is already
cached (two requests computing the same prefix at once) is used from the cache and the
request's own copy freed: the cache holds one copy of each block (vLLM may keep both for a
while; this is the one place the model departs from it).

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
    I_CREF,
    I_HELD,
    I_NBLK,
    I_PROMPT,
    P_BLOCK,
    P_CAP,
    P_CFREE,
    P_KV,
    P_LRU_HEAD,
    P_LRU_TAIL,
    P_NWAIT,
    X_OVERLAP,
    State,
)


@inlined
def _unlink(rep_i: np.ndarray, c_prev: np.ndarray, c_next: np.ndarray, r: int, b: int) -> None:
    """Take block b out of replica r's LRU list."""
    prev = c_prev[r, b]
    nxt = c_next[r, b]
    if prev >= 0:
        c_next[r, prev] = nxt
    else:
        rep_i[r, P_LRU_HEAD] = nxt
    if nxt >= 0:
        c_prev[r, nxt] = prev
    else:
        rep_i[r, P_LRU_TAIL] = prev
    c_prev[r, b] = -1
    c_next[r, b] = -1


@inlined
def _append(rep_i: np.ndarray, c_prev: np.ndarray, c_next: np.ndarray, r: int, b: int) -> None:
    """Put block b at the tail of replica r's LRU list (the last to be evicted)."""
    tail = rep_i[r, P_LRU_TAIL]
    c_prev[r, b] = tail
    c_next[r, b] = -1
    if tail >= 0:
        c_next[r, tail] = b
    else:
        rep_i[r, P_LRU_HEAD] = b
    rep_i[r, P_LRU_TAIL] = b


# The compiled functions below take the arrays they use, not the State: a call copies its
# arguments, and the State is some forty arrays (registering a block is on the decode path).


@compiled_only
def _leading_run(req_i: np.ndarray, blk_ptr: np.ndarray, blk_ids: np.ndarray, c_in: np.ndarray, c_ref: np.ndarray,
                 r: int, j: int, limit: int) -> tuple[int, int]:
    start = blk_ptr[j]
    stop = req_i[j, I_NBLK]
    if limit < stop:
        stop = limit
    h = 0
    free = 0
    while h < stop:
        b = blk_ids[start + h]
        if not c_in[r, b]:
            break
        if c_ref[r, b] == 0:
            free += 1
        h += 1
    return h, free


@inlined
def leading_run(st: State, r: int, j: int, limit: int) -> tuple[int, int]:
    """(h, free): request j's longest leading run of blocks cached on replica r, at most ``limit``
    blocks, and how many of them no running request uses (they would come out of the LRU list)."""
    return _leading_run(st.req_i, st.blk_ptr, st.blk_ids, st.c_in, st.c_ref, r, j, limit)


@compiled_only
def _take(req_i: np.ndarray, rep_i: np.ndarray, blk_ptr: np.ndarray, blk_ids: np.ndarray, c_ref: np.ndarray,
          c_prev: np.ndarray, c_next: np.ndarray, r: int, j: int, h: int) -> None:
    size = rep_i[r, P_BLOCK]
    start = blk_ptr[j]
    for i in range(h):
        b = blk_ids[start + i]
        if c_ref[r, b] == 0:
            _unlink(rep_i, c_prev, c_next, r, b)
            rep_i[r, P_CFREE] -= size
            rep_i[r, P_KV] += size
        c_ref[r, b] += 1
    req_i[j, I_CREF] = h
    req_i[j, I_HELD] = h * size


@inlined
def take(st: State, r: int, j: int, h: int) -> None:
    """Request j (holding no KV) starts using its first h blocks, all cached on replica r."""
    _take(st.req_i, st.rep_i, st.blk_ptr, st.blk_ids, st.c_ref, st.c_prev, st.c_next, r, j, h)


@compiled_only
def _evict(rep_i: np.ndarray, c_in: np.ndarray, c_prev: np.ndarray, c_next: np.ndarray, r: int, need: int) -> None:
    size = rep_i[r, P_BLOCK]
    while rep_i[r, P_KV] + rep_i[r, P_CFREE] + need > rep_i[r, P_CAP] and rep_i[r, P_LRU_HEAD] >= 0:
        b = rep_i[r, P_LRU_HEAD]
        _unlink(rep_i, c_prev, c_next, r, b)
        c_in[r, b] = False
        rep_i[r, P_CFREE] -= size


@inlined
def evict(st: State, r: int, need: int) -> None:
    """Evict LRU blocks of replica r until ``need`` more tokens fit, or none is left to evict."""
    _evict(st.rep_i, st.c_in, st.c_prev, st.c_next, r, need)


@compiled_only
def _register(req_i: np.ndarray, rep_i: np.ndarray, blk_ptr: np.ndarray, blk_ids: np.ndarray, c_in: np.ndarray,
              c_ref: np.ndarray, c_prev: np.ndarray, c_next: np.ndarray, r: int, j: int, full: int) -> None:
    size = rep_i[r, P_BLOCK]
    start = blk_ptr[j]
    for i in range(req_i[j, I_CREF], full):
        b = blk_ids[start + i]
        if c_in[r, b]:  # computed twice at once: use the cached copy, free this one
            if c_ref[r, b] == 0:
                _unlink(rep_i, c_prev, c_next, r, b)
                rep_i[r, P_CFREE] -= size
            else:
                rep_i[r, P_KV] -= size
        else:
            c_in[r, b] = True
        c_ref[r, b] += 1
    req_i[j, I_CREF] = full


@inlined
def note_full_blocks(st: State, r: int, j: int) -> None:
    """After a step: cache the blocks request j has just filled, up to its list (a cheap test on the
    hot path; the blocks past those it uses already are registered by a call)."""
    size = st.rep_i[r, P_BLOCK]
    if size > 0:
        full = st.req_i[j, I_HELD] // size
        if full > st.req_i[j, I_NBLK]:
            full = st.req_i[j, I_NBLK]
        if full > st.req_i[j, I_CREF]:
            _register(st.req_i, st.rep_i, st.blk_ptr, st.blk_ids, st.c_in, st.c_ref, st.c_prev, st.c_next, r, j, full)


@compiled_only
def _release(req_i: np.ndarray, rep_i: np.ndarray, blk_ptr: np.ndarray, blk_ids: np.ndarray, c_ref: np.ndarray,
             c_prev: np.ndarray, c_next: np.ndarray, r: int, j: int) -> None:
    size = rep_i[r, P_BLOCK]
    start = blk_ptr[j]
    used = req_i[j, I_CREF]
    rep_i[r, P_KV] -= req_i[j, I_HELD] - used * size
    for i in range(used - 1, -1, -1):
        b = blk_ids[start + i]
        c_ref[r, b] -= 1
        if c_ref[r, b] == 0:
            _append(rep_i, c_prev, c_next, r, b)
            rep_i[r, P_KV] -= size
            rep_i[r, P_CFREE] += size
    req_i[j, I_CREF] = 0
    req_i[j, I_HELD] = 0


@inlined
def free_kv(st: State, r: int, j: int) -> None:
    """Free request j's KV on replica r (it is done or preempted): its own tokens are freed, its cached
    blocks stay, released last first (those no one else uses go to the LRU tail)."""
    if st.req_i[j, I_CREF] > 0:
        _release(st.req_i, st.rep_i, st.blk_ptr, st.blk_ids, st.c_ref, st.c_prev, st.c_next, r, j)
    else:
        st.rep_i[r, P_KV] -= st.req_i[j, I_HELD]
        st.req_i[j, I_HELD] = 0


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
            h, _ = _leading_run(st.req_i, st.blk_ptr, st.blk_ids, st.c_in, st.c_ref, r, j, st.req_i[j, I_NBLK])
            overlap = float(h * rep_i[r, P_BLOCK]) / prompt
        score = weight * overlap - float(rep_i[r, P_KV]) / float(rep_i[r, P_CAP])
        if most_waiting > 0:
            score -= float(rep_i[r, P_NWAIT]) / float(most_waiting)
        st.tmp_score[r] = score

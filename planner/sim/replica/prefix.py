"""A prefix cache per replica (vLLM's automatic prefix caching), in the compiled engine's arrays.

**Blocks.** Request j's KV is cut into blocks of B tokens (``P_BLOCK`` of its replica; 0: the
replica does not cache). Its content ids are the ``I_NBLK`` entries of ``blk_ids`` from
``I_BLK0`` (dense indices; two requests whose lists start with the same ids share that
prefix). The list covers its prompt and may go on over its output (a conversation's next
turn starts with this turn's prompt and answer). Only full blocks are cached: block i of j
once j holds (i + 1)·B tokens of KV, and only the blocks its list names.

**The cache of replica r** is the blocks b with ``cache[r, b, K_REF]`` ≥ 0, the number of
running requests that use it. A block enters when a running request fills it
(:func:`register`, at the end of the step that computes it: from then on a request
arriving or admitted finds it) and stays after that request leaves or is preempted, until
evicted. A cached block nobody uses sits in an LRU list (``K_PREV``/``K_NEXT``, head
``P_LRU_HEAD``, tail ``P_LRU_TAIL``), and eviction takes the head, the least recently
released. A request releases its blocks last first (:func:`release`), so its tail blocks are
evicted before its head ones, as vLLM's free-block queue does. A block a running request
completes while it is already cached (two requests computing the same prefix at once) is
used from the cache and the request's own copy freed: the cache holds one copy of each block
(vLLM may keep both for a while; this is the one place the model departs from it).

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
    I_BLK0,
    I_CREF,
    I_FILL,
    I_HELD,
    I_NBLK,
    I_PROMPT,
    K_NEXT,
    K_PREV,
    K_REF,
    NEVER,
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
def _unlink(rep_i: np.ndarray, cache: np.ndarray, r: int, b: int) -> None:
    """Take block b out of replica r's LRU list."""
    prev = cache[r, b, K_PREV]
    nxt = cache[r, b, K_NEXT]
    if prev >= 0:
        cache[r, prev, K_NEXT] = nxt
    else:
        rep_i[r, P_LRU_HEAD] = nxt
    if nxt >= 0:
        cache[r, nxt, K_PREV] = prev
    else:
        rep_i[r, P_LRU_TAIL] = prev
    cache[r, b, K_PREV] = -1
    cache[r, b, K_NEXT] = -1


@inlined
def _append(rep_i: np.ndarray, cache: np.ndarray, r: int, b: int) -> None:
    """Put block b at the tail of replica r's LRU list (the last to be evicted)."""
    tail = rep_i[r, P_LRU_TAIL]
    cache[r, b, K_PREV] = tail
    cache[r, b, K_NEXT] = -1
    if tail >= 0:
        cache[r, tail, K_NEXT] = b
    else:
        rep_i[r, P_LRU_HEAD] = b
    rep_i[r, P_LRU_TAIL] = b


# The compiled functions below take the arrays they use, not the State: a call copies its
# arguments, and the State is some thirty arrays (registering a block is on the decode path).
# They are calls, not inlined helpers, and their callers test whether they are needed: every
# helper inlined into the event loop adds to its one-time compile (:mod:`.inline`).


@compiled_only
def leading_run(req_i: np.ndarray, blk_ids: np.ndarray, cache: np.ndarray, r: int, j: int,
                limit: int) -> tuple[int, int]:
    """(h, free): request j's longest leading run of blocks cached on replica r, at most ``limit``
    blocks, and how many of them no running request uses (they would come out of the LRU list)."""
    start = req_i[j, I_BLK0]
    stop = req_i[j, I_NBLK]
    if limit < stop:
        stop = limit
    h = 0
    free = 0
    while h < stop:
        users = cache[r, blk_ids[start + h], K_REF]
        if users < 0:
            break
        if users == 0:
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
        b = blk_ids[start + i]
        if cache[r, b, K_REF] == 0:
            _unlink(rep_i, cache, r, b)
            rep_i[r, P_CFREE] -= size
            rep_i[r, P_KV] += size
        cache[r, b, K_REF] += 1
    req_i[j, I_CREF] = h
    req_i[j, I_HELD] = h * size
    req_i[j, I_FILL] = (h + 1) * size if h < req_i[j, I_NBLK] else NEVER


@compiled_only
def evict(rep_i: np.ndarray, cache: np.ndarray, r: int, need: int) -> None:
    """Evict LRU blocks of replica r until ``need`` more tokens fit, or none is left to evict."""
    size = rep_i[r, P_BLOCK]
    while rep_i[r, P_KV] + rep_i[r, P_CFREE] + need > rep_i[r, P_CAP] and rep_i[r, P_LRU_HEAD] >= 0:
        b = rep_i[r, P_LRU_HEAD]
        _unlink(rep_i, cache, r, b)
        cache[r, b, K_REF] = -1
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
        users = cache[r, b, K_REF]
        if users < 0:
            cache[r, b, K_REF] = 1
            continue
        if users == 0:  # computed twice at once: use the cached copy, free this one
            _unlink(rep_i, cache, r, b)
            rep_i[r, P_CFREE] -= size
        else:
            rep_i[r, P_KV] -= size
        cache[r, b, K_REF] = users + 1
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
        b = blk_ids[start + i]
        cache[r, b, K_REF] -= 1
        if cache[r, b, K_REF] == 0:
            _append(rep_i, cache, r, b)
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
            h, _ = leading_run(st.req_i, st.blk_ids, st.cache, r, j, st.req_i[j, I_NBLK])
            overlap = float(h * rep_i[r, P_BLOCK]) / prompt
        score = weight * overlap - float(rep_i[r, P_KV]) / float(rep_i[r, P_CAP])
        if most_waiting > 0:
            score -= float(rep_i[r, P_NWAIT]) / float(most_waiting)
        st.tmp_score[r] = score

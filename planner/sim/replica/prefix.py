"""A prefix cache per replica (vLLM's automatic prefix caching), in the compiled engine's arrays.

**Blocks.** Request j's KV is cut into blocks of B tokens (``P_BLOCK`` of its replica; 0: the
replica does not cache). Its content ids are ``blk_ids[blk_ptr[j]:blk_ptr[j+1]]`` (dense
indices; two requests that share a leading run of ids share that prefix). The list covers
its prompt and may go on over its output (a conversation's next turn starts with this turn's
prompt and answer). Only full blocks are cached: block i of j once j holds (i + 1)·B tokens
of KV, and only the blocks its list names.

**The cache of replica r** is the set of blocks with ``c_in[r, b]``. A block enters when a
running request fills it (:func:`register`) and stays after that request leaves or is
preempted, until evicted. ``c_ref[r, b]`` counts the running requests that use it; a cached
block nobody uses sits in an LRU list (``c_prev``/``c_next``, head ``P_LRU_HEAD``, tail
``P_LRU_TAIL``), and eviction takes the head, the least recently released. A request releases
its blocks last first (:func:`release`), so its tail blocks are evicted before its head ones,
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
def _unlink(st: State, r: int, b: int) -> None:
    """Take block b out of replica r's LRU list."""
    prev = st.c_prev[r, b]
    nxt = st.c_next[r, b]
    if prev >= 0:
        st.c_next[r, prev] = nxt
    else:
        st.rep_i[r, P_LRU_HEAD] = nxt
    if nxt >= 0:
        st.c_prev[r, nxt] = prev
    else:
        st.rep_i[r, P_LRU_TAIL] = prev
    st.c_prev[r, b] = -1
    st.c_next[r, b] = -1


@inlined
def _append(st: State, r: int, b: int) -> None:
    """Put block b at the tail of replica r's LRU list (the last to be evicted)."""
    tail = st.rep_i[r, P_LRU_TAIL]
    st.c_prev[r, b] = tail
    st.c_next[r, b] = -1
    if tail >= 0:
        st.c_next[r, tail] = b
    else:
        st.rep_i[r, P_LRU_HEAD] = b
    st.rep_i[r, P_LRU_TAIL] = b


@compiled_only
def leading_run(st: State, r: int, j: int, limit: int) -> tuple[int, int]:
    """(h, free): request j's longest leading run of blocks cached on replica r, at most ``limit``
    blocks, and how many of them no running request uses (they would come out of the LRU list)."""
    start = st.blk_ptr[j]
    stop = st.req_i[j, I_NBLK]
    if limit < stop:
        stop = limit
    h = 0
    free = 0
    while h < stop:
        b = st.blk_ids[start + h]
        if not st.c_in[r, b]:
            break
        if st.c_ref[r, b] == 0:
            free += 1
        h += 1
    return h, free


@compiled_only
def take(st: State, r: int, j: int, h: int) -> None:
    """Request j (holding no KV) starts using its first h blocks, all cached on replica r."""
    size = st.rep_i[r, P_BLOCK]
    start = st.blk_ptr[j]
    for i in range(h):
        b = st.blk_ids[start + i]
        if st.c_ref[r, b] == 0:
            _unlink(st, r, b)
            st.rep_i[r, P_CFREE] -= size
            st.rep_i[r, P_KV] += size
        st.c_ref[r, b] += 1
    st.req_i[j, I_CREF] = h
    st.req_i[j, I_HELD] = h * size


@compiled_only
def evict(st: State, r: int, need: int) -> None:
    """Evict LRU blocks of replica r until ``need`` more tokens fit, or none is left to evict."""
    size = st.rep_i[r, P_BLOCK]
    rep_i = st.rep_i
    while rep_i[r, P_KV] + rep_i[r, P_CFREE] + need > rep_i[r, P_CAP] and rep_i[r, P_LRU_HEAD] >= 0:
        b = rep_i[r, P_LRU_HEAD]
        _unlink(st, r, b)
        st.c_in[r, b] = False
        rep_i[r, P_CFREE] -= size


@compiled_only
def register(st: State, r: int, j: int, full: int) -> None:
    """Request j now holds ``full`` full blocks (at most its list): cache those past the ones it uses."""
    size = st.rep_i[r, P_BLOCK]
    start = st.blk_ptr[j]
    for i in range(st.req_i[j, I_CREF], full):
        b = st.blk_ids[start + i]
        if st.c_in[r, b]:  # computed twice at once: use the cached copy, free this one
            if st.c_ref[r, b] == 0:
                _unlink(st, r, b)
                st.rep_i[r, P_CFREE] -= size
            else:
                st.rep_i[r, P_KV] -= size
        else:
            st.c_in[r, b] = True
        st.c_ref[r, b] += 1
    st.req_i[j, I_CREF] = full


@compiled_only
def release(st: State, r: int, j: int) -> None:
    """Request j leaves the batch (done or preempted): its own KV is freed, its cached blocks stay,
    released last first (those no one else uses go to the LRU tail)."""
    size = st.rep_i[r, P_BLOCK]
    start = st.blk_ptr[j]
    used = st.req_i[j, I_CREF]
    st.rep_i[r, P_KV] -= st.req_i[j, I_HELD] - used * size
    for i in range(used - 1, -1, -1):
        b = st.blk_ids[start + i]
        st.c_ref[r, b] -= 1
        if st.c_ref[r, b] == 0:
            _append(st, r, b)
            st.rep_i[r, P_KV] -= size
            st.rep_i[r, P_CFREE] += size
    st.req_i[j, I_CREF] = 0
    st.req_i[j, I_HELD] = 0


@inlined
def note_full_blocks(st: State, r: int, j: int) -> None:
    """After a step: cache the blocks request j has just filled (a cheap test on the hot path)."""
    size = st.rep_i[r, P_BLOCK]
    if size > 0:
        full = st.req_i[j, I_HELD] // size
        if full > st.req_i[j, I_NBLK]:
            full = st.req_i[j, I_NBLK]
        if full > st.req_i[j, I_CREF]:
            register(st, r, j, full)


@inlined
def free_kv(st: State, r: int, j: int) -> None:
    """Free request j's KV on replica r (it is done or preempted), keeping its cached blocks."""
    if st.req_i[j, I_CREF] > 0:
        release(st, r, j)
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
            h, _ = leading_run(st, r, j, st.req_i[j, I_NBLK])
            overlap = float(h * rep_i[r, P_BLOCK]) / prompt
        score = weight * overlap - float(rep_i[r, P_KV]) / float(rep_i[r, P_CAP])
        if most_waiting > 0:
            score -= float(rep_i[r, P_NWAIT]) / float(most_waiting)
        st.tmp_score[r] = score

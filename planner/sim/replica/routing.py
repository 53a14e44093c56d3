"""Routing an arriving request to one replica of a pool (one serving region and model).

Rules (``ROUTERS``; the argument names the stable integer code the compiled loop uses):

* ``random`` (0): replica ⌊u·R⌋ for a uniform u; every replica gets an equal share, which a
  slow replica in a mixed pool may not be able to serve (theory.md, "Routing").
* ``round-robin`` (1): replicas in turn, 0, 1, …, R−1, 0, …
* ``jsq`` (2): join the shortest queue, the replica with the fewest requests present
  (waiting + running); ties go to the lowest index.
* ``power-of-d`` (3): sample d distinct replicas uniformly, join the one with the fewest
  requests present (Mitzenmacher 2001); ties go to the first sampled. The default d = 2.
* ``least-tokens`` (4): the replica with the fewest outstanding tokens: prompt tokens still
  to prefill plus predicted output tokens still to generate, max(0, p̂ − generated), over
  every request present; ties go to the lowest index.
* ``cache-aware`` (5): Dynamo's KV router (its default cost function): the replica with the
  highest w · overlap − KV usage − waiting / max waiting, where overlap = (the request's
  leading blocks cached on that replica) × block tokens / prompt tokens, the share of its
  prompt that replica could serve from its prefix cache (:mod:`.prefix`), KV usage = KV held
  by running requests / capacity, and waiting = requests queued there over the most queued at
  any replica of the pool (0 when no queue); w = ``PoolConfig.router_overlap_weight``, default
  2 as Dynamo's. Ties go to the lowest index. Without prefix data it balances KV and queues.
* ``session-affinity`` (6): every turn of a session goes to the replica its first turn went
  to, chosen by ``jsq``; a request with no session is routed by ``jsq``.

The state the rules read is the replica state at the arrival instant, so routing is exact
JSQ, and the cache-aware router reads each replica's cache as it is, not a stale snapshot.
"""

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import numpy as np

from planner.errors import InputError
from planner.sim.jit import njit
from planner.sim.replica.inline import inlined

RANDOM = 0
ROUND_ROBIN = 1
JSQ = 2
POWER_OF_D = 3
LEAST_TOKENS = 4
CACHE_AWARE = 5
SESSION_AFFINITY = 6
ROUTERS: dict[str, int] = {
    "random": RANDOM,
    "round-robin": ROUND_ROBIN,
    "jsq": JSQ,
    "power-of-d": POWER_OF_D,
    "least-tokens": LEAST_TOKENS,
    "cache-aware": CACHE_AWARE,
    "session-affinity": SESSION_AFFINITY,
}


def router_code(name: str) -> int:
    key = name.strip().lower()
    if key not in ROUTERS:
        raise InputError(f"unknown routing rule {name!r}", where="routing", fix=f"use one of: {', '.join(ROUTERS)}")
    return ROUTERS[key]


@inlined
def _first_min(values: np.ndarray, n: int) -> int:
    """Index of the smallest of ``values[:n]``, the lowest index on a tie (a deterministic tie-break)."""
    best = 0
    for r in range(1, n):
        if values[r] < values[best]:
            best = r
    return best


@njit(cache=True)
def choose_replica(code: int, d: int, u: np.ndarray, counter: np.ndarray,
                   present: np.ndarray, work_tokens: np.ndarray, score: np.ndarray) -> int:
    """The replica for one arrival. ``u`` holds this request's uniforms (at least d of them),
    ``counter[0]`` is the round-robin position, ``present[r]`` the requests at replica r,
    ``work_tokens[r]`` its outstanding tokens and ``score[r]`` its cache-aware score (read by
    that rule only; a session's later turns never reach this function)."""
    n = present.shape[0]
    if n == 1:
        return 0
    if code == RANDOM:
        r = int(u[0] * n)
        return r if r < n else n - 1
    if code == ROUND_ROBIN:
        r = counter[0] % n
        counter[0] += 1
        return r
    if code == JSQ or code == SESSION_AFFINITY:
        return _first_min(present, n)
    if code == CACHE_AWARE:
        best = 0
        for r in range(1, n):
            if score[r] > score[best]:
                best = r
        return best
    if code == LEAST_TOKENS:
        return _first_min(work_tokens, n)
    # power of d: the x-th replica not yet sampled, x uniform on the n - i left
    dd = d if d < n else n
    taken = np.zeros(n, dtype=np.bool_)
    best = -1
    for i in range(dd):
        x = int(u[i] * (n - i))
        if x >= n - i:
            x = n - i - 1
        r = -1
        for cand in range(n):
            if not taken[cand]:
                if x == 0:
                    r = cand
                    break
                x -= 1
        taken[r] = True
        if best < 0 or present[r] < present[best]:
            best = r
    return best

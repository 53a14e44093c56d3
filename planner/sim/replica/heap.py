"""Waiting queues of the replica model: one binary max-heap per (replica, class), in arrays.

Heap h lives in row h of ``keys``/``ids`` with ``size[h]`` entries. The order is the
policy contract's total order (:func:`planner.sim.policies.keys.precedes`): key
descending, then arrival ascending, then request id ascending, so the compiled engine
and the pure-Python reference pop the same request. Every policy's key is fixed while a
request waits (priority-aging's key changes by the same aging_rate·Δt for everyone, so its
order does not), which is what lets a heap hold it.

Removal is lazy: a request rejected while waiting stays in its heap and is dropped when
it reaches the top (:func:`heap_clean_top`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from planner.sim.policies.keys import precedes


@njit(cache=True, inline="always")
def _before(keys: np.ndarray, ids: np.ndarray, arrival: np.ndarray, h: int, i: int, j: int) -> bool:
    a = ids[h, i]
    b = ids[h, j]
    return precedes(keys[h, i], arrival[a], a, keys[h, j], arrival[b], b)


@njit(cache=True, inline="always")
def _swap(keys: np.ndarray, ids: np.ndarray, h: int, i: int, j: int) -> None:
    """Exchange entries ``i`` and ``j`` of heap ``h`` (inlined: a real call costs the hot loop)."""
    kt = keys[h, i]
    keys[h, i] = keys[h, j]
    keys[h, j] = kt
    it = ids[h, i]
    ids[h, i] = ids[h, j]
    ids[h, j] = it


@njit(cache=True, inline="always")
def heap_push(keys: np.ndarray, ids: np.ndarray, size: np.ndarray, arrival: np.ndarray,
              h: int, key: float, rid: int) -> None:
    """Insert request ``rid`` with ``key`` into heap ``h`` (capacity is the caller's concern)."""
    i = size[h]
    keys[h, i] = key
    ids[h, i] = rid
    size[h] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if _before(keys, ids, arrival, h, i, parent):
            _swap(keys, ids, h, i, parent)
            i = parent
        else:
            break


@njit(cache=True, inline="always")
def heap_pop(keys: np.ndarray, ids: np.ndarray, size: np.ndarray, arrival: np.ndarray, h: int) -> int:
    """Remove and return the top request id of heap ``h`` (−1 when empty)."""
    n = size[h]
    if n == 0:
        return -1
    top = ids[h, 0]
    n -= 1
    size[h] = n
    if n == 0:
        return top
    keys[h, 0] = keys[h, n]
    ids[h, 0] = ids[h, n]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        best = left
        right = left + 1
        if right < n and _before(keys, ids, arrival, h, right, left):
            best = right
        if _before(keys, ids, arrival, h, best, i):
            _swap(keys, ids, h, i, best)
            i = best
        else:
            break
    return top


@njit(cache=True, inline="always")
def heap_clean_top(keys: np.ndarray, ids: np.ndarray, size: np.ndarray, arrival: np.ndarray,
                   status: np.ndarray, waiting: int, h: int) -> int:
    """Drop tops that are no longer waiting; return the top id (−1 when the heap is empty)."""
    while size[h] > 0:
        top = ids[h, 0]
        if status[top] == waiting:
            return top
        heap_pop(keys, ids, size, arrival, h)
    return -1


@njit(cache=True)
def grow(keys: np.ndarray, ids: np.ndarray, new_cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Copies of ``keys``/``ids`` with ``new_cap`` columns."""
    rows, cap = keys.shape
    k2 = np.empty((rows, new_cap), dtype=keys.dtype)
    i2 = np.empty((rows, new_cap), dtype=ids.dtype)
    k2[:, :cap] = keys
    i2[:, :cap] = ids
    return k2, i2

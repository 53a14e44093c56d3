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

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import numpy as np

from planner.sim.jit import njit
from planner.sim.policies.keys import precedes
from planner.sim.replica.inline import inlined
from planner.sim.replica.state import NO_INDEX


@inlined
def _before(keys: np.ndarray, ids: np.ndarray, arrival: np.ndarray, h: int, i: int, j: int) -> bool:
    a = ids[h, i]
    b = ids[h, j]
    return precedes(keys[h, i], arrival[a], a, keys[h, j], arrival[b], b)


@inlined
def _swap(keys: np.ndarray, ids: np.ndarray, h: int, i: int, j: int) -> None:
    """Exchange entries ``i`` and ``j`` of heap ``h`` (inlined: a real call costs the hot loop)."""
    kt = keys[h, i]
    keys[h, i] = keys[h, j]
    keys[h, j] = kt
    it = ids[h, i]
    ids[h, i] = ids[h, j]
    ids[h, j] = it


@inlined
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


@inlined
def heap_pop(keys: np.ndarray, ids: np.ndarray, size: np.ndarray, arrival: np.ndarray, h: int) -> int:
    """Remove and return the top request id of heap ``h`` (−1 when empty)."""
    n = size[h]
    if n == 0:
        return NO_INDEX
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


@inlined
def heap_clean_top(keys: np.ndarray, ids: np.ndarray, size: np.ndarray, arrival: np.ndarray,
                   status: np.ndarray, waiting: int, h: int) -> int:
    """Drop tops that are no longer waiting; return the top id (−1 when the heap is empty)."""
    while size[h] > 0:
        top = ids[h, 0]
        if status[top] == waiting:
            return top
        heap_pop(keys, ids, size, arrival, h)
    return NO_INDEX


@inlined
def heap_remove_top(keys: np.ndarray, ids: np.ndarray, size: np.ndarray, arrival: np.ndarray,
                    status: np.ndarray, waiting: int, h: int) -> int:
    """Remove the top of heap ``h``, then the tops no longer waiting; return the new top (−1 when empty).

    One loop around one :func:`heap_pop`, so the inlined code holds one copy of it. Dropping
    the stale tops now rather than at the next :func:`heap_clean_top` changes no order.
    """
    drop = True  # the top itself, whatever its status
    while size[h] > 0 and (drop or status[ids[h, 0]] != waiting):
        heap_pop(keys, ids, size, arrival, h)
        drop = False
    return ids[h, 0] if size[h] > 0 else NO_INDEX


@njit(cache=True)
def grow(keys: np.ndarray, ids: np.ndarray, new_cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Copies of ``keys``/``ids`` with ``new_cap`` columns.

    Copied element by element: a slice assignment (``k2[:, :cap] = keys``) would compile
    numba's broadcast shape check and its error message formatting, several seconds of
    compile time for a path that cannot fail here.
    """
    rows, cap = keys.shape
    k2 = np.empty((rows, new_cap), dtype=np.float64)
    i2 = np.empty((rows, new_cap), dtype=np.int64)
    for h in range(rows):
        for i in range(cap):
            k2[h, i] = keys[h, i]
            i2[h, i] = ids[h, i]
    return k2, i2

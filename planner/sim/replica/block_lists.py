"""Compiled loops that build a sample's per-request block lists (CSR: request j owns ``ids[ptr[j]:ptr[j + 1]]``).

A calibration probe's sample lists every block of every prompt, millions of ids, and numpy built each list from
several temporaries the size of all of them (``np.repeat`` of the request offsets, an ``arange``, a gather index).
These loops write each id once. Each is the numpy expression in its docstring, element for element.
"""

from __future__ import annotations

import numpy as np

from planner.sim.jit import njit


@njit(cache=True)
def stream_ids(ptr: np.ndarray, first_id: np.ndarray) -> np.ndarray:
    """``np.repeat(first_id, sizes) + position``: request j's t-th block is ``first_id[j] + t``."""
    out = np.empty(ptr[-1], dtype=np.int64)
    for j in range(ptr.size - 1):
        for p in range(ptr[j], ptr[j + 1]):
            out[p] = first_id[j] + (p - ptr[j])
    return out


@njit(cache=True)
def shared_prefix_ids(ptr: np.ndarray, ids: np.ndarray, variant: np.ndarray, per_variant: int,
                      variants: int) -> np.ndarray:
    """Request j's first ``per_variant`` blocks are its variant's (``variant[j] · per_variant + t``); every
    other id moves past the variants' (``ids + variants · per_variant``)."""
    out = np.empty(ids.size, dtype=np.int64)
    shift = variants * per_variant
    for j in range(ptr.size - 1):
        for p in range(ptr[j], ptr[j + 1]):
            t = p - ptr[j]
            out[p] = variant[j] * per_variant + t if t < per_variant else ids[p] + shift
    return out


@njit(cache=True)
def gathered(ids: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, out): list i of the result is ``ids[starts[i]:starts[i] + sizes[i]]``."""
    ptr = np.zeros(sizes.size + 1, dtype=np.int64)
    for i in range(sizes.size):
        ptr[i + 1] = ptr[i] + sizes[i]
    out = np.empty(ptr[-1], dtype=np.int64)
    for i in range(sizes.size):
        for t in range(sizes[i]):
            out[ptr[i] + t] = ids[starts[i] + t]
    return ptr, out


@njit(cache=True)
def ranks_by_table(ids: np.ndarray, lo: int, span: int) -> tuple[int, np.ndarray]:
    """(distinct ids, each id's rank among them) for ids in [lo, lo + span): a presence table and its running
    count (:mod:`planner.sim.dense_ids`)."""
    present = np.zeros(span, dtype=np.bool_)
    for v in ids:
        present[v - lo] = True
    rank = np.empty(span, dtype=np.int64)
    count = 0
    for i in range(span):
        count += present[i]
        rank[i] = count - 1
    out = np.empty(ids.size, dtype=np.int64)
    for j in range(ids.size):
        out[j] = rank[ids[j] - lo]
    return count, out

"""Integer ids relabelled 0..n−1 in increasing order: what ``np.unique(ids, return_inverse=True)`` gives, without
its sort when the ids span a range not much wider than their count.

A replication's prefix blocks are millions of ids (every request lists every block of its prompt), and sorting
them was a quarter of a calibration probe's time. The ids the simulator draws are dense by construction (each
stream's blocks numbered from a running base), so a presence table over [min, max] and its running count give
each id's rank in one pass: rank(v) = #{distinct u ≤ v} − 1, which is exactly ``np.unique``'s inverse (the index
of v among the sorted distinct values). Ids from a trace (hashes) can span far more than their count; those take
the sort.
"""

from __future__ import annotations

import numpy as np

SPAN_PER_ID = 4
"""Above this many possible values per id (plus a small constant), a presence table would cost more than the sort."""


def dense_ids(ids: np.ndarray) -> tuple[int, np.ndarray]:
    """(the number of distinct ids, each id's rank among them as int64), ``ids`` flattened."""
    values = np.asarray(ids, dtype=np.int64).ravel()
    if values.size == 0:
        return 0, np.zeros(0, dtype=np.int64)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo + 1 > SPAN_PER_ID * values.size + 1024:
        distinct, inverse = np.unique(values, return_inverse=True)
        return int(distinct.size), inverse.astype(np.int64).ravel()
    from planner.sim.replica.block_lists import ranks_by_table  # compiled: only a simulation pays numba's import

    count, ranks = ranks_by_table(values, lo, hi - lo + 1)
    return int(count), ranks

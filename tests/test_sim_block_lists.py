"""The compiled block-list loops against the numpy expressions they replace, element for element."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.sim.dense_ids import dense_ids
from planner.sim.replica.block_lists import gathered, shared_prefix_ids, stream_ids

SIZES = st.lists(st.integers(0, 12), min_size=0, max_size=40)


def _ptr(sizes: np.ndarray) -> np.ndarray:
    ptr = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    return ptr


def _position(ptr: np.ndarray) -> np.ndarray:
    return np.arange(int(ptr[-1]), dtype=np.int64) - np.repeat(ptr[:-1], np.diff(ptr))


@settings(max_examples=60, deadline=None)
@given(sizes=SIZES, seed=st.integers(0, 2**32 - 1))
def test_stream_ids_is_repeat_plus_position(sizes, seed):
    sizes = np.asarray(sizes, dtype=np.int64)
    ptr = _ptr(sizes)
    first = np.random.default_rng(seed).integers(0, 1000, size=sizes.size).astype(np.int64)
    assert np.array_equal(stream_ids(ptr, first), np.repeat(first, sizes) + _position(ptr))


@settings(max_examples=60, deadline=None)
@given(sizes=SIZES, seed=st.integers(0, 2**32 - 1), per_variant=st.integers(0, 5), variants=st.integers(1, 4))
def test_shared_prefix_ids_is_the_masked_numpy_form(sizes, seed, per_variant, variants):
    sizes = np.asarray(sizes, dtype=np.int64)
    ptr = _ptr(sizes)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 10_000, size=int(ptr[-1])).astype(np.int64)
    variant = rng.integers(0, variants, size=sizes.size).astype(np.int64)
    position = _position(ptr)
    shared = position < per_variant
    expected = ids + variants * per_variant
    expected[shared] = np.repeat(variant, sizes)[shared] * per_variant + position[shared]
    assert np.array_equal(shared_prefix_ids(ptr, ids, variant, per_variant, variants), expected)


@settings(max_examples=60, deadline=None)
@given(sizes=SIZES, seed=st.integers(0, 2**32 - 1))
def test_gathered_takes_each_list_from_its_start(sizes, seed):
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes, dtype=np.int64)
    starts = np.array([rng.integers(0, 30) for _ in sizes], dtype=np.int64)
    ids = rng.integers(0, 10_000, size=int((starts + sizes).max(initial=0))).astype(np.int64)
    ptr, out = gathered(ids, starts, sizes)
    assert np.array_equal(ptr, _ptr(sizes))
    gather = np.repeat(starts, sizes) + _position(ptr)
    assert np.array_equal(out, ids[gather])


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.integers(-2**40, 2**40), max_size=60), dense=st.booleans())
def test_dense_ids_is_numpys_unique_inverse(values, dense):
    x = np.asarray(values, dtype=np.int64)
    if dense:  # the table path: a span not much wider than the count
        x = x % 97 - 40
    distinct, inverse = np.unique(x, return_inverse=True)
    n, ranks = dense_ids(x)
    assert n == distinct.size
    assert ranks.dtype == np.int64 and np.array_equal(ranks, inverse.ravel())

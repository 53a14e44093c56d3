"""Exact per-bucket token quantiles and power-of-two length bins, as aggregates of the one scan.

The quantile is ``quantile_cont`` (numpy's default "linear" method, Hyndman-Fan
type 7). For the ``n`` values of one bucket and series sorted ascending,
``x_(0) <= ... <= x_(n-1)``, and ``h = (n - 1) q``,

    Q(q) = x_(floor h) (1 - d) + x_(ceil h) d,  d = h - floor h,

rounded once (DuckDB's arithmetic; numpy's can differ in the last bit). It is
DuckDB's own exact ``quantile_cont``, one state per measure holding every value of
its group and giving both quantiles (:func:`quantiles_sql`), computed in the same
GROUP BY as the counts and sums: one pass over the logs, nothing estimated. The
states stay in memory until the scan ends (4 bytes a value); a log too large for the
memory limit is scanned in parts (:func:`planner.ingest.aggregate.scan_in_memory`).
``approx_quantile`` (a t-digest) and ``reservoir_quantile`` (a sample) would not be
exact and are not used.

The histogram's bins are the power-of-two ranges [0, 1), [1, 2), [2, 4), ...: bin
``k`` holds the lengths ``v`` with ``floor(log2 v) = k`` (``k = -1`` for 0). They are
counted in the same GROUP BY by DuckDB's ``histogram(v, boundaries)``, which puts a
value in the first boundary at or above it; with the boundaries ``2^(k+1) - 1``
(:func:`bin_counts_sql`) that is bin ``k``, in exact integer comparisons. A token
count is at most ``MAX_TOKENS``, so the bins are the fixed range -1 to
``floor(log2 MAX_TOKENS)``. (One filtered count per bin measured three times as
costly; grouping sets would hold every quantile state twice.)
"""

from __future__ import annotations

from planner.ingest.formats import LABELS
from planner.ingest.reader import MAX_TOKENS

KEY = ("bucket_us", *LABELS)
QUANTILES = (("p50", 0.5), ("p99", 0.99))
MEASURES = ("prompt_tokens", "output_tokens")
PREFIX = {"prompt_tokens": "p", "output_tokens": "o"}
BINS = tuple(range(-1, MAX_TOKENS.bit_length()))  # floor(log2 v) of every allowed length, -1 for 0


def quantiles_sql(measure: str) -> str:
    """Aggregate SQL: the list of ``measure``'s exact quantiles, in ``QUANTILES`` order, as ``<prefix>_q``.

    The values are held as INTEGER (a token count is at most ``MAX_TOKENS``), half the
    state of BIGINT; the interpolation is in DOUBLE either way.
    """
    levels = ", ".join(repr(q) for _, q in QUANTILES)
    return f"quantile_cont(CAST({measure} AS INTEGER), [{levels}]) AS {PREFIX[measure]}_q"


def quantile_columns_sql(measure: str) -> str:
    """SELECT SQL picking ``<measure>_p50`` and ``<measure>_p99`` out of the :func:`quantiles_sql` list."""
    return ", ".join(
        f"{PREFIX[measure]}_q[{index}] AS {measure}_{name}" for index, (name, _) in enumerate(QUANTILES, start=1)
    )


def bin_upper(k: int) -> int:
    """The largest length in bin ``k``: ``2^(k+1) - 1`` (0 for bin -1)."""
    return (1 << (k + 1)) - 1


def bin_counts_sql(measure: str) -> str:
    """Aggregate SQL: ``<prefix>_bins``, a MAP from :func:`bin_upper` of each bin ``k`` in ``BINS`` to its count."""
    boundaries = ", ".join(str(bin_upper(k)) for k in BINS)
    return f"histogram({measure}, [{boundaries}]) AS {PREFIX[measure]}_bins"

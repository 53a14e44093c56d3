"""Aggregated demand tables (request counts or rates per interval) -> demand history, as values.

Many fleets export tables, not request logs: per (region, model, traffic class) and
interval ``[s, e)``, a request count ``n`` or a mean rate ``r`` (requests per second, so
``n = r (e - s)``). This module spreads each interval over the history's buckets and
fills the token columns from declared mean lengths; :mod:`planner.ingest.rates_read`
reads and checks the table.

**Spreading.** Buckets are ``[kB, (k+1)B)`` with ``B`` the bucket width, aligned to the
Unix epoch as for request logs (:mod:`planner.ingest.aggregate`). An interval's requests
are taken as spread evenly over it, so bucket ``k`` gets

    n_k = n * |[s, e) ∩ [kB, (k+1)B)| / (e - s)

(overlap in microseconds): an interval longer than a bucket is split by overlap time, a
shorter one lands whole in its bucket (or is split at a bucket edge it crosses), and
``sum_k n_k = n``. Each bucket's requests are the sum of its shares over the intervals of
its series; intervals of one series may not overlap, which
:func:`planner.ingest.rates_read.check_overlaps` refuses. Every bucket an interval
covers is written, including buckets of zero requests: a table that says "0 requests" in
an interval observed that, unlike a log's silence. Counts are real numbers (``float``):
spreading and rates give fractional expected counts.

**Tokens.** A table carries no lengths, so the token sums come from declared mean
lengths per (model, class), ``(m_p, m_o)``: ``prompt_tokens_sum = n_k m_p`` and
``output_tokens_sum = n_k m_o``. The per-bucket quantile columns stay empty (NaN): no
request was seen. The means come from a source named in ``length_source``
(:func:`lengths_from_histogram` for an ingest histogram; another source can call
:func:`rates_history` with its own mapping).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from planner.contracts import HISTORY_COLUMNS, SERIES_KEY

US_PER_S = 1_000_000
Lengths = Mapping[tuple[str, str], tuple[float, float]]
"""(model, traffic_class) -> (mean prompt tokens, mean output tokens)."""


@dataclass(frozen=True)
class Interval:
    """One checked row of a rates table: its series, ``[start_us, end_us)`` in microseconds since the
    epoch (``end_us > start_us``) and its request count (a rate already multiplied by the length)."""

    region: str
    model: str
    traffic_class: str
    start_us: int
    end_us: int
    requests: float


def bucket_shares(interval: Interval, bucket_us: int) -> list[tuple[int, float]]:
    """(bucket start, requests) for every bucket the interval overlaps: ``n * overlap / (e - s)``."""
    first = interval.start_us - interval.start_us % bucket_us
    length = interval.end_us - interval.start_us
    shares = []
    for bucket in range(first, interval.end_us, bucket_us):
        overlap = min(interval.end_us, bucket + bucket_us) - max(interval.start_us, bucket)
        shares.append((bucket, interval.requests * overlap / length))
    return shares


def spread(intervals: Sequence[Interval], bucket_seconds: int) -> dict[tuple[str, str, str, int], float]:
    """(region, model, traffic_class, bucket start in microseconds) -> requests, summed over intervals."""
    bucket_us = bucket_seconds * US_PER_S
    totals: dict[tuple[str, str, str, int], float] = {}
    for interval in intervals:
        for bucket, share in bucket_shares(interval, bucket_us):
            key = (interval.region, interval.model, interval.traffic_class, bucket)
            totals[key] = totals.get(key, 0.0) + share
    return totals


def _iso(bucket_us: int) -> str:
    return str(pd.Timestamp(bucket_us, unit="us", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"))


def rates_history(intervals: Sequence[Interval], bucket_seconds: int, lengths: Lengths) -> pd.DataFrame:
    """The demand history (``HISTORY_COLUMNS``) of checked intervals, one row per covered (bucket, series),
    sorted by series then time; every (model, class) of ``intervals`` must be in ``lengths``."""
    totals = spread(intervals, bucket_seconds)
    rows = []
    for (region, model, traffic_class, bucket), requests in sorted(totals.items()):
        prompt, output = lengths[(model, traffic_class)]
        rows.append((_iso(bucket), region, model, traffic_class, requests, requests * prompt, requests * output,
                     np.nan, np.nan, np.nan, np.nan))
    frame = pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))
    numbers = [c for c in HISTORY_COLUMNS if c not in ("ts", *SERIES_KEY)]
    return frame.astype({c: "float64" for c in numbers})


def lengths_from_histogram(histogram: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """(model, traffic_class) -> (mean prompt, mean output) of a checked ingest histogram, for the pairs with
    requests in both measures. Each mean is that of the length law the simulator samples from the same
    histogram (:class:`planner.sim.workload.EmpiricalLength`): a bin by count, then an integer uniform in
    ``[lo, hi)``, at least 1, so a bin's mean is ``max((lo + hi - 1) / 2, 1)``; a power-of-two histogram
    keeps no finer detail of the lengths."""
    from planner.sim.workload import EmpiricalLength

    means: dict[tuple[str, str, str], float] = {}
    for (model, traffic_class, measure), rows in histogram.groupby(["model", "traffic_class", "measure"]):
        counts = rows["count"].to_numpy(dtype=np.float64)
        if counts.sum() > 0:
            law = EmpiricalLength(rows["bin_lo_tokens"].to_numpy(dtype=np.int64),
                                  rows["bin_hi_tokens"].to_numpy(dtype=np.int64), counts)
            means[(str(model), str(traffic_class), str(measure))] = law.mean()
    return {(model, traffic_class): (prompt, means[(model, traffic_class, "output_tokens")])
            for (model, traffic_class, measure), prompt in means.items()
            if measure == "prompt_tokens" and (model, traffic_class, "output_tokens") in means}


def lengths_summary(lengths: Lengths, used: Sequence[tuple[str, str]], source: str) -> list[dict[str, Any]]:
    """Per (model, class) used: the mean lengths and where they come from (for the terminal and JSON)."""
    return [{"model": model, "traffic_class": traffic_class, "mean_prompt_tokens": lengths[(model, traffic_class)][0],
             "mean_output_tokens": lengths[(model, traffic_class)][1], "length_source": source}
            for model, traffic_class in sorted(set(used))]

"""Clean requests -> demand history per (bucket, region, model, traffic class), and token histograms.

Buckets. With bucket width ``B`` microseconds (``freq`` from 1min to 1d, and ``B``
divides a day so buckets tile every UTC day the same way), a request at ``t``
microseconds since the Unix epoch falls in the bucket starting at
``t - (t mod B)``: buckets are aligned to 1970-01-01T00:00Z, so hourly buckets start
on the hour and daily ones at midnight UTC. Only buckets holding at least one
request are emitted; empty buckets between a series' first and last are NOT filled
in here. The forecaster fills them with zero requests and reports how many it filled,
so a gap stays visible instead of being invented at ingest.

One scan (:func:`scan`) reads the logs once and groups them by bucket and series into
the TEMP TABLE ``groups``: request count, rows with a bad token count, token sums,
the exact quantiles (:mod:`planner.ingest.quantiles`) and the histogram's bin counts.
Rows with a bad timestamp fall in the NULL bucket and rows with an empty or blank
label in a group of that label, so :func:`bad_rows` finds every bad row from the
groups alone, without checking labels row by row.

Histogram. Per (model, traffic class) and measure, requests are counted in
log-spaced integer bins with power-of-two edges: [0, 1), [1, 2), [2, 4), [4, 8), ...,
up to the bin that holds the largest value; every bin in that range is listed, empty
ones with count 0. Bin ``k >= 0`` is [2^k, 2^(k+1)) and holds the values with
``floor(log2 v) = k``. A simulator samples a length by choosing a bin with
probability count / total and then an integer uniformly in [bin_lo, bin_hi).
"""

from __future__ import annotations

import re

import duckdb
import pandas as pd

from planner.contracts import HISTOGRAM_COLUMNS, HISTORY_COLUMNS
from planner.errors import InputError
from planner.ingest.formats import LABELS
from planner.ingest.quantiles import (
    BINS,
    KEY,
    MEASURES,
    PREFIX,
    bin_counts_sql,
    bin_upper,
    quantile_columns_sql,
    quantiles_sql,
)

FREQ_UNITS_S = {"min": 60, "h": 3_600, "d": 86_400}
FREQ_EXAMPLES = ("1min", "5min", "10min", "15min", "30min", "1h", "2h", "6h", "12h", "1d")

DEMAND_COLUMNS = HISTORY_COLUMNS
MAX_PARTS = 64  # a 50M-row log fits in one part under the 1.5 GB limit, so 64 parts cover about 3 billion rows


def parse_freq(freq: str) -> int:
    """Bucket width in seconds for ``freq`` such as 1min, 15min, 1h, 6h or 1d.

    Allowed: from 1 minute to 1 day, and a whole divisor of a day (so 7min or 5h are refused).
    """
    match = re.fullmatch(r"\s*(\d+)\s*(min|h|d)\s*", str(freq).lower())
    seconds = int(match.group(1)) * FREQ_UNITS_S[match.group(2)] if match else 0
    if not (60 <= seconds <= 86_400 and 86_400 % seconds == 0):
        raise InputError(
            f"unsupported bucket size {freq!r}",
            where="--freq",
            fix=f"use a size from 1min to 1d that divides a day, e.g. {', '.join(FREQ_EXAMPLES)}",
        )
    return seconds


def binned_sql(clean: str, bucket_seconds: int) -> str:
    """The clean relation plus the start of each request's bucket."""
    width_us = bucket_seconds * 1_000_000
    return f"SELECT *, ts_us - ts_us % {width_us} AS bucket_us FROM ({clean})"


def scan(con: duckdb.DuckDBPyConnection, binned: str, parts: int = 1) -> None:
    """The one scan: TEMP TABLE ``groups``, one row per (bucket, series) with counts, sums, quantiles and bins.

    With ``parts > 1`` the logs are read ``parts`` times, each read aggregating the
    buckets whose hash falls in one part: a bucket's group is whole in one part, so the
    table is the same, and only a ``parts``-th of the quantile states is held at once.
    """
    key = ", ".join(KEY)
    aggregates = [
        "count(*) AS n",
        f"count(*) FILTER (WHERE {' OR '.join(f'{m} IS NULL' for m in MEASURES)}) AS n_bad",
        *(f"sum({m}) AS {PREFIX[m]}_sum" for m in MEASURES),
        *(quantiles_sql(m) for m in MEASURES),
        *(bin_counts_sql(m) for m in MEASURES),
    ]
    select = f"SELECT {key}, {', '.join(aggregates)} FROM ({binned})"
    if parts == 1:
        con.execute(f"CREATE OR REPLACE TEMP TABLE groups AS {select} GROUP BY {key}")
        return
    for part in range(parts):
        where = f"WHERE hash(bucket_us) % {parts} = {part} GROUP BY {key}"
        con.execute(f"CREATE OR REPLACE TEMP TABLE groups AS {select} {where}" if part == 0
                    else f"INSERT INTO groups {select} {where}")


def scan_in_memory(con: duckdb.DuckDBPyConnection, binned: str) -> None:
    """:func:`scan`, in as many parts as the memory limit needs: 1, then 2, 4, ... up to ``MAX_PARTS``.

    Exact quantiles hold every token count of a group until the scan ends; a log too
    large for the connection's memory limit is read again in parts rather than refused.
    """
    parts = 1
    while True:
        try:
            scan(con, binned, parts)
            return
        except duckdb.OutOfMemoryException:
            if parts >= MAX_PARTS:
                raise
            parts *= 2


def bad_rows(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(rows, rows with a bad value) over every file, from the scan's groups.

    A whole group is bad when its bucket is NULL (a bad timestamp) or a label is
    empty or blank; otherwise its rows with a NULL token count are.
    """
    blank = " OR ".join(f"{label} IS NULL OR trim({label}) = ''" for label in LABELS)
    row = con.execute(
        "SELECT CAST(coalesce(sum(n), 0) AS BIGINT), "
        f"CAST(coalesce(sum(CASE WHEN bucket_us IS NULL OR {blank} THEN n ELSE n_bad END), 0) AS BIGINT) FROM groups"
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def demand_frame(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per non-empty (bucket, region, model, traffic_class), sorted by series then time."""
    labels = ", ".join(LABELS)
    frame = con.execute(
        "SELECT strftime(make_timestamp(bucket_us), '%Y-%m-%dT%H:%M:%SZ') AS ts, "
        f"{labels}, CAST(n AS BIGINT) AS requests, CAST(p_sum AS BIGINT) AS prompt_tokens_sum, "
        f"CAST(o_sum AS BIGINT) AS output_tokens_sum, {', '.join(quantile_columns_sql(m) for m in MEASURES)} "
        f"FROM groups ORDER BY {labels}, bucket_us"
    ).fetchdf()
    frame = frame.astype(
        {
            "requests": "int64",
            "prompt_tokens_sum": "int64",
            "output_tokens_sum": "int64",
            **{c: "float64" for c in DEMAND_COLUMNS[-4:]},
        }
    )
    return frame.loc[:, list(DEMAND_COLUMNS)].reset_index(drop=True)


def histogram_frame(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Contiguous power-of-two bins from [0, 1) to the largest value's bin, per (model, class, measure)."""
    entries = " UNION ALL ".join(
        f"SELECT model, traffic_class, '{m}' AS measure, unnest(map_keys({PREFIX[m]}_bins)) AS upper, "
        f"unnest(map_values({PREFIX[m]}_bins)) AS n FROM groups"
        for m in MEASURES
    )
    counts = con.execute(
        f"SELECT model, traffic_class, measure, upper, CAST(sum(n) AS BIGINT) FROM ({entries}) GROUP BY ALL"
    ).fetchall()
    bin_of = {bin_upper(k): k for k in BINS}
    by_group: dict[tuple[str, str, str], dict[int, int]] = {}
    for model, traffic_class, measure, upper, count in counts:
        by_group.setdefault((str(model), str(traffic_class), str(measure)), {})[bin_of[int(upper)]] = int(count)
    rows = []
    for (model, traffic_class, measure), bins in sorted(by_group.items()):
        for k in range(BINS[0], max(k for k, count in bins.items() if count) + 1):
            lo, hi = (0, 1) if k < 0 else (2**k, 2 ** (k + 1))
            rows.append((model, traffic_class, measure, lo, hi, bins.get(k, 0)))
    frame = pd.DataFrame(rows, columns=list(HISTOGRAM_COLUMNS))
    return frame.astype({"bin_lo_tokens": "int64", "bin_hi_tokens": "int64", "count": "int64"})

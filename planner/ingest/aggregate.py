"""Clean requests -> demand history per (bucket, region, model, traffic class), and token histograms.

Buckets. With bucket width ``B`` microseconds (``freq`` from 1min to 1d, and ``B``
divides a day so buckets tile every UTC day the same way), a request at ``t``
microseconds since the Unix epoch falls in the bucket starting at
``t - (t mod B)``: buckets are aligned to 1970-01-01T00:00Z, so hourly buckets start
on the hour and daily ones at midnight UTC. Only buckets holding at least one
request are emitted; empty buckets between a series' first and last are NOT filled
in here. The forecaster fills them with zero requests and reports how many it filled,
so a gap stays visible instead of being invented at ingest.

The first scan (:func:`coarse_scan`) computes, in one pass over the logs and with
GROUPING SETS, three things into the TEMP TABLE ``coarse``: rows and bad rows per
file (for validation), and per (bucket, series) request counts and token sums by
log-linear bin of the prompt and of the output length (for totals, quantiles and the
histogram). The exact quantiles need a second scan: see :mod:`planner.ingest.quantiles`.

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
    GROUPING_OF,
    KEY,
    MEASURES,
    PREFIX,
    bin_lo_sql,
    create_fine,
    create_targets,
    floor_log2_sql,
    quantile_table,
)

FREQ_UNITS_S = {"min": 60, "h": 3_600, "d": 86_400}
FREQ_EXAMPLES = ("1min", "5min", "10min", "15min", "30min", "1h", "2h", "6h", "12h", "1d")

DEMAND_COLUMNS = HISTORY_COLUMNS
FILE_GROUPING = 0b011  # GROUPING(file, p_lo, o_lo) of the per-file set


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
    """The clean relation plus bucket start, a bad-row flag, and each token count's exponent and bin."""
    width_us = bucket_seconds * 1_000_000
    bad = " OR ".join(f"{c} IS NULL" for c in ("ts_us", *MEASURES, *LABELS))
    exponents = ", ".join(f"{floor_log2_sql(m)} AS {PREFIX[m]}_e" for m in MEASURES)
    lows = ", ".join(f"{bin_lo_sql(m, PREFIX[m] + '_e')} AS {PREFIX[m]}_lo" for m in MEASURES)
    return (
        f"SELECT *, {lows} FROM (SELECT *, ts_us - ts_us % {width_us} AS bucket_us, ({bad}) AS bad, "
        f"{exponents} FROM ({clean}))"
    )


def coarse_scan(con: duckdb.DuckDBPyConnection, binned: str) -> None:
    """First scan: TEMP TABLE ``coarse`` with per-file counts and per-(bucket, series, bin) counts and sums.

    ``g`` is GROUPING(file, p_lo, o_lo): 0b011 for the per-file rows, 0b101 for
    prompt-length bins, 0b110 for output-length bins.
    """
    key = ", ".join(KEY)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE coarse AS SELECT GROUPING(file, p_lo, o_lo) AS g, file, {key}, "
        "p_e, p_lo, o_e, o_lo, count(*) AS n, count(*) FILTER (WHERE bad) AS n_bad, "
        "sum(prompt_tokens) AS p_sum, sum(output_tokens) AS o_sum "
        f"FROM ({binned}) GROUP BY GROUPING SETS ((file), ({key}, p_e, p_lo), ({key}, o_e, o_lo))"
    )


def file_counts(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, int]]:
    """File -> (rows, rows with a bad value), from the first scan."""
    rows = con.execute(f"SELECT file, n, n_bad FROM coarse WHERE g = {FILE_GROUPING}").fetchall()
    return {str(file): (int(n), int(n_bad)) for file, n, n_bad in rows}


def demand_frame(con: duckdb.DuckDBPyConnection, binned: str) -> pd.DataFrame:
    """One row per non-empty (bucket, region, model, traffic_class), sorted by series then time.

    Runs the second scan (exact quantiles), then joins the totals from the first.
    """
    create_targets(con)
    create_fine(con, binned)
    quantile_table(con)
    key = ", ".join(KEY)
    labels = ", ".join(LABELS)
    stats = ", ".join(f"q.{m}_{name}" for m in MEASURES for name in ("p50", "p99"))
    frame = con.execute(
        f"WITH totals AS (SELECT {key}, CAST(sum(n) AS BIGINT) AS requests, "
        "CAST(sum(p_sum) AS BIGINT) AS prompt_tokens_sum, CAST(sum(o_sum) AS BIGINT) AS output_tokens_sum "
        f"FROM coarse WHERE g = {GROUPING_OF['prompt_tokens']} GROUP BY {key}) "
        "SELECT strftime(make_timestamp(t.bucket_us), '%Y-%m-%dT%H:%M:%SZ') AS ts, "
        f"{', '.join('t.' + c for c in LABELS)}, "
        f"t.requests, t.prompt_tokens_sum, t.output_tokens_sum, {stats} "
        f"FROM totals t JOIN quantiles q USING ({key}) ORDER BY {labels}, t.bucket_us"
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
    """Contiguous power-of-two bins from [0, 1) to the largest value's bin, per (model, class, measure).

    A log-linear bin of the first scan lies inside one power-of-two bin (its exponent
    ``e``), so the histogram is a sum over the first scan's bins.
    """
    parts = " UNION ALL ".join(
        f"SELECT model, traffic_class, '{m}' AS measure, {PREFIX[m]}_e AS k, n FROM coarse WHERE g = {GROUPING_OF[m]}"
        for m in MEASURES
    )
    counts = con.execute(
        f"SELECT model, traffic_class, measure, k, CAST(sum(n) AS BIGINT) FROM ({parts}) GROUP BY ALL"
    ).fetchall()
    by_group: dict[tuple[str, str, str], dict[int, int]] = {}
    for model, traffic_class, measure, k, count in counts:
        by_group.setdefault((str(model), str(traffic_class), str(measure)), {})[int(k)] = int(count)
    rows = []
    for (model, traffic_class, measure), bins in sorted(by_group.items()):
        for k in range(-1, max(bins) + 1):
            lo, hi = (0, 1) if k < 0 else (2**k, 2 ** (k + 1))
            rows.append((model, traffic_class, measure, lo, hi, bins.get(k, 0)))
    frame = pd.DataFrame(rows, columns=list(HISTOGRAM_COLUMNS))
    return frame.astype({"bin_lo_tokens": "int64", "bin_hi_tokens": "int64", "count": "int64"})

"""Exact per-bucket token quantiles in bounded memory, by refining fine-grained bin counts.

The quantile is ``quantile_cont`` (numpy's default "linear" method, Hyndman-Fan
type 7). For the ``n`` values of one bucket and series sorted ascending,
``x_(0) <= ... <= x_(n-1)``, and ``h = (n - 1) q``,

    Q(q) = x_(floor h) + (h - floor h) (x_(ceil h) - x_(floor h)).

DuckDB's own ``quantile_cont`` keeps every value of every group in memory until the
scan ends, and cannot spill: on a 50M-row log with a 1.5 GB limit it runs out of
memory. So the order statistics ``x_(r)`` are found in two counting passes, each an
ordinary hash aggregate (fixed-size states, which DuckDB can spill):

1. The first scan (:mod:`planner.ingest.aggregate`) counts requests per bucket,
   series and *bin* of each token count. A bin is log-linear, like an HDR
   histogram's: values below 64 have a bin each; a value ``v >= 64`` with
   ``e = floor(log2 v)`` lies in the bin of width ``2^(e-3)`` starting at
   ``lo = floor(v / 2^(e-3)) 2^(e-3)``, so 8 bins per power of two and a bin's width
   is at most 1/8 of its values. (Finer bins make the first scan's table bigger; coarser
   ones send more requests to the second scan; 8 per octave measured faster than 32.)
2. From the cumulative bin counts ``cum(lo)`` (requests in bins up to ``lo``), the
   value of 0-based rank ``r`` lies in the first bin with ``cum(lo) > r``, and
   ``before = cum(lo) - n(lo)`` requests lie below that bin (:func:`create_targets`).
3. The second scan counts, per exact value, only the requests that fall in those
   target bins (about a tenth of the log) (:func:`create_fine`).
4. Within a target bin, ``x_(r)`` is the smallest value ``v`` with
   ``before + (requests in the bin with value <= v) > r`` (:func:`quantile_table`).

Both passes are exact integer counts, so the result equals ``quantile_cont`` to the
last bit of the interpolation, and is the same on every run.
"""

from __future__ import annotations

import duckdb

from planner.ingest.formats import LABELS

KEY = ("bucket_us", *LABELS)
QUANTILES = (("p50", 0.5), ("p99", 0.99))
MEASURES = ("prompt_tokens", "output_tokens")
EXACT_BELOW_EXPONENT = 6  # values below 2**6 = 64 get a bin each
MANTISSA_BITS = 3  # 2**3 = 8 bins per power of two above that
# GROUPING(file, p_lo, o_lo) of the first scan's per-bin sets; see aggregate.coarse_scan.
GROUPING_OF = {"prompt_tokens": 0b101, "output_tokens": 0b110}
PREFIX = {"prompt_tokens": "p", "output_tokens": "o"}


def floor_log2_sql(value: str) -> str:
    """SQL for ``floor(log2 v)`` of a BIGINT ``v >= 0`` (-1 for 0), exact up to 2^53.

    Taken in floating point. Below 2^31 that is exact: log2 of a power of two is
    exact, and log2(2^k - m) = k - m / (2^k ln 2) + ... stays further below k than
    half a unit in the last place of k. Above, where log2(2^k - 1) can round up to k,
    the result is corrected by one either way with exact integer shifts.
    """
    k = f"CAST(floor(log2({value})) AS INTEGER)"
    return (
        f"CASE WHEN {value} = 0 THEN -1 WHEN {value} < 2147483648 THEN {k} ELSE {k} "
        f"- CASE WHEN (CAST(1 AS BIGINT) << {k}) > {value} THEN 1 ELSE 0 END "
        f"+ CASE WHEN (CAST(1 AS BIGINT) << ({k} + 1)) <= {value} THEN 1 ELSE 0 END END"
    )


def bin_lo_sql(value: str, exponent: str) -> str:
    """SQL for the lower edge of ``value``'s log-linear bin, given ``exponent = floor(log2 value)``."""
    shift = f"({exponent} - {MANTISSA_BITS})"
    return f"CASE WHEN {exponent} < {EXACT_BELOW_EXPONENT} THEN {value} ELSE ({value} >> {shift}) << {shift} END"


def _key(prefix: str = "") -> str:
    return ", ".join(f"{prefix}{column}" for column in KEY)


def _ranks() -> list[tuple[str, str, str]]:
    """(name, SQL for h, SQL for the rank) of the order statistics each quantile needs."""
    out = []
    for name, q in QUANTILES:
        h = f"(CAST(total - 1 AS DOUBLE) * CAST({q!r} AS DOUBLE))"
        out.append((f"{name}_lo", h, f"CAST(floor({h}) AS BIGINT)"))
        out.append((f"{name}_hi", h, f"CAST(ceil({h}) AS BIGINT)"))
    return out


def create_targets(con: duckdb.DuckDBPyConnection) -> None:
    """TEMP TABLE ``targets``: per (measure, bucket, series), each needed rank, its bin and ``before``."""
    bins = " UNION ALL ".join(
        f"SELECT '{m}' AS measure, {_key()}, {PREFIX[m]}_lo AS lo, n FROM coarse WHERE g = {GROUPING_OF[m]}"
        for m in MEASURES
    )
    picks = []
    for name, _, rank in _ranks():
        picks.append(f"{rank} AS r_{name}")
        picks.append(f"min(lo) FILTER (WHERE upto > {rank}) AS lo_{name}")
        picks.append(f"arg_min(upto - n, lo) FILTER (WHERE upto > {rank}) AS before_{name}")
    picks += [f"{h} AS h_{name.removesuffix('_lo')}" for name, h, _ in _ranks()[::2]]
    partition = f"PARTITION BY measure, {_key()}"
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE targets AS WITH bins AS ({bins}), "
        f"cum AS (SELECT *, sum(n) OVER ({partition} ORDER BY lo ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
        f"AS upto, sum(n) OVER ({partition}) AS total FROM bins) "
        f"SELECT measure, {_key()}, total, {', '.join(picks)} FROM cum GROUP BY measure, {_key()}, total"
    )


def create_fine(con: duckdb.DuckDBPyConnection, binned: str) -> None:
    """TEMP TABLE ``fine``: exact value counts of the requests that fall in a target bin (second scan).

    ``binned`` is the relation of the first scan: key, token counts and their
    ``p_lo``/``o_lo`` bins. Each request meets its (bucket, series) row of target bins
    in one hash join and is kept if either of its bins is a target.
    """
    ranks = [name for name, _, _ in _ranks()]
    pivot = ", ".join(
        f"any_value(lo_{name}) FILTER (WHERE measure = '{m}') AS {PREFIX[m]}_{name}" for m in MEASURES for name in ranks
    )
    hit = {m: f"x.{PREFIX[m]}_lo IN ({', '.join(f't.{PREFIX[m]}_{name}' for name in ranks)})" for m in MEASURES}
    values = ", ".join(
        f"CASE WHEN {hit[m]} THEN x.{PREFIX[m]}_lo END AS {PREFIX[m]}_lo, "
        f"CASE WHEN {hit[m]} THEN x.{m} END AS {PREFIX[m]}v"
        for m in MEASURES
    )
    on = " AND ".join(f"x.{c} = t.{c}" for c in KEY)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE fine AS WITH t AS (SELECT {_key()}, {pivot} FROM targets GROUP BY {_key()}) "
        f"SELECT GROUPING(pv, ov) AS g, {_key()}, p_lo, pv, o_lo, ov, count(*) AS c FROM ("
        f"SELECT {_key('x.')}, {values} FROM ({binned}) x JOIN t ON {on} "
        f"WHERE {hit['prompt_tokens']} OR {hit['output_tokens']}"
        f") GROUP BY GROUPING SETS (({_key()}, p_lo, pv), ({_key()}, o_lo, ov))"
    )


def quantile_table(con: duckdb.DuckDBPyConnection) -> None:
    """TEMP TABLE ``quantiles``: key plus ``<measure>_p50`` and ``<measure>_p99`` (DOUBLE) per bucket and series."""
    fine = " UNION ALL ".join(
        f"SELECT '{m}' AS measure, {_key()}, {PREFIX[m]}_lo AS lo, {PREFIX[m]}v AS v, c FROM fine "
        f"WHERE g = {0b01 if m == 'prompt_tokens' else 0b10} AND {PREFIX[m]}v IS NOT NULL"
        for m in MEASURES
    )
    order_stats = ", ".join(
        f"min(f.v) FILTER (WHERE f.lo = t.lo_{name} AND t.before_{name} + f.upto > t.r_{name}) AS x_{name}"
        for name, _, _ in _ranks()
    )
    interpolated = ", ".join(
        f"x_{name}_lo + (h_{name} - floor(h_{name})) * (x_{name}_hi - x_{name}_lo) AS q_{name}" for name, _ in QUANTILES
    )
    hs = ", ".join(f"any_value(t.h_{name}) AS h_{name}" for name, _ in QUANTILES)
    pivot = ", ".join(
        f"any_value(q_{name}) FILTER (WHERE measure = '{m}') AS {m}_{name}" for m in MEASURES for name, _ in QUANTILES
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE quantiles AS WITH f0 AS ({fine}), "
        f"f AS (SELECT *, sum(c) OVER (PARTITION BY measure, {_key()}, lo ORDER BY v "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto FROM f0), "
        f"picked AS (SELECT t.measure, {_key('t.')}, {hs}, {order_stats} FROM f "
        f"JOIN targets t ON f.measure = t.measure AND {' AND '.join(f'f.{c} = t.{c}' for c in KEY)} "
        f"GROUP BY t.measure, {_key('t.')}), "
        f"q AS (SELECT measure, {_key()}, {interpolated} FROM picked) "
        f"SELECT {_key()}, {pivot} FROM q GROUP BY {_key()}"
    )

"""``ingest_logs``: request-log files in, demand history and token histograms out, as values.

The steps, each in DuckDB: expand the paths and check every file's columns; build
the clean relation over all files (:mod:`planner.ingest.reader`); scan it once to
count rows, bad values, requests, tokens, exact quantiles and token-length bins per
bucket and series (:mod:`planner.ingest.aggregate`, :mod:`planner.ingest.quantiles`);
stop, naming every bad row's file, row and column, if any value was bad
(:mod:`planner.ingest.validate`). When the log carries block hashes or session ids,
the files are read once more, request by request, for the prefix-reuse statistics
(:mod:`planner.ingest.reuse_read`, :mod:`planner.ingest.reuse`). DuckDB's spill
folder lives in a temporary folder that is removed afterwards; nothing else is
written: :mod:`planner.ingest.writer` writes the results.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from planner.ingest.aggregate import bad_rows, binned_sql, demand_frame, histogram_frame, parse_freq, scan_in_memory
from planner.ingest.formats import LABELS, SESSION, LogSpec, resolve_spec
from planner.ingest.reader import clean_sql, connect, expand_paths, files_by_kind
from planner.ingest.reuse import reuse_report
from planner.ingest.reuse_read import block_source, read_reuse
from planner.ingest.validate import check_files, check_scan_counts, scan_checked


@dataclass(frozen=True)
class IngestResult:
    """What one ingest produced.

    ``demand``: one row per non-empty (bucket, region, model, traffic_class), columns
    ``aggregate.DEMAND_COLUMNS``. ``histogram``: token-length histogram, columns
    ``aggregate.HISTOGRAM_COLUMNS``. ``rows_read``: requests read (every row of every
    file). ``files``: the files read, sorted. ``freq``: the bucket size. ``reuse``: the
    prefix-reuse statistics (:func:`planner.ingest.reuse.reuse_report`), ``None`` when
    the log carries neither block hashes nor session ids.
    """

    demand: pd.DataFrame
    histogram: pd.DataFrame
    rows_read: int
    files: list[str]
    freq: str
    format_name: str
    reuse: dict[str, Any] | None = None

    def reuse_rows(self) -> list[dict[str, Any]]:
        """Per (model, class): the ideal reuse share and the mean cached prefix, for the terminal."""
        if self.reuse is None:
            return []
        return [{"model": s["model"], "traffic_class": s["traffic_class"], "source": s["source"],
                 "requests": s["requests"], "ideal_reuse_share": s["ideal_share"],
                 "mean_cached_prefix_tokens": s["cached_prefix_tokens"]["mean"],
                 "requests_with_hit": s["requests_with_hit"]} for s in self.reuse["series"]]

    def summary_rows(self) -> list[dict[str, Any]]:
        """Per series: region, model, traffic_class, buckets, requests, first_ts, last_ts."""
        rows = []
        for (region, model, traffic_class), part in self.demand.groupby(list(LABELS), sort=True):
            rows.append(
                {
                    "region": str(region),
                    "model": str(model),
                    "traffic_class": str(traffic_class),
                    "buckets": int(len(part)),
                    "requests": int(part["requests"].sum()),
                    "first_ts": str(part["ts"].min()),
                    "last_ts": str(part["ts"].max()),
                }
            )
        return rows


def ingest_logs(
    paths: Sequence[str | Path],
    fmt: str,
    *,
    mapping: Mapping[str, str] | None = None,
    start: datetime | None = None,
    labels: Mapping[str, str | None] | None = None,
    freq: str = "1h",
    block_tokens: int | None = None,
) -> IngestResult:
    """Read request logs (files or globs, combined) and aggregate them into demand history.

    ``fmt`` is ``azure``, ``mooncake`` or ``generic`` (which needs ``mapping``);
    ``start`` anchors relative timestamps (mooncake); ``labels`` gives constant
    region/model/traffic_class values for logs without such columns; ``freq`` is the
    bucket size (1min..1d); ``block_tokens`` the prompt tokens per prefix hash
    (``--block-tokens``; Mooncake's is 512). Every problem with the inputs raises
    ``InputError`` naming the file, row and column, before any result exists.
    """
    bucket_seconds = parse_freq(freq)
    spec = resolve_spec(fmt, mapping, start, dict(labels or {}), block_tokens)
    files = expand_paths(paths)
    kinds = files_by_kind(files)
    with tempfile.TemporaryDirectory(prefix="planner-ingest-") as scratch:
        con = connect(Path(scratch))
        try:
            check_files(con, spec, kinds)
            binned = binned_sql(clean_sql(con, spec, kinds, scan=True), bucket_seconds)
            scan_checked(con, spec, kinds, lambda: scan_in_memory(con, binned))
            rows_read = check_scan_counts(con, spec, kinds, *bad_rows(con))
            demand = demand_frame(con)
            histogram = histogram_frame(con)
            reuse = _reuse(con, spec, kinds) if spec.carries_reuse else None
        finally:
            con.close()
    return IngestResult(
        demand=demand,
        histogram=histogram,
        rows_read=rows_read,
        files=files,
        freq=freq.strip().lower(),
        format_name=spec.format_name,
        reuse=reuse,
    )


def _reuse(con: Any, spec: LogSpec, kinds: dict[str, list[str]]) -> dict[str, Any]:
    """The prefix-reuse statistics of a log with block hashes or session ids."""
    return reuse_report(read_reuse(con, spec, kinds), block_tokens=spec.block_tokens,
                        block_source=block_source(spec), sessions=SESSION in spec.columns)

"""``ingest_rates``: aggregated demand tables in, demand history out, as values.

The table is read and checked (:mod:`planner.ingest.rates_read`), then spread over the
buckets with token sums from declared mean lengths (:mod:`planner.ingest.rates`).
The lengths are a mapping (model, traffic_class) -> (mean prompt tokens, mean output
tokens) with a ``length_source`` naming where they come from; the shell builds it from
an ingest histogram (``--lengths``), and any other source of declared lengths can call
:func:`ingest_rates` the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from planner.errors import InputError
from planner.ingest.aggregate import parse_freq
from planner.ingest.formats import LABEL_OPTIONS, LABELS
from planner.ingest.rates import Lengths, lengths_summary, rates_history
from planner.ingest.rates_read import check_lengths, read_rates
from planner.ingest.reader import expand_paths


@dataclass(frozen=True)
class RatesResult:
    """What one rates ingest produced: the demand history (``HISTORY_COLUMNS``; counts are real numbers,
    quantile columns NaN), the intervals read, the files, the bucket size, the measure read (requests or
    rps), and per (model, class) the mean lengths used with their source."""

    demand: pd.DataFrame
    rows_read: int
    files: list[str]
    freq: str
    measure: str
    lengths: list[dict[str, Any]]
    length_source: str
    format_name: str = "rates"

    def summary_rows(self) -> list[dict[str, Any]]:
        """Per series: region, model, traffic_class, buckets, requests, first_ts, last_ts, length_source."""
        rows = []
        for (region, model, traffic_class), part in self.demand.groupby(list(LABELS), sort=True):
            rows.append({"region": str(region), "model": str(model), "traffic_class": str(traffic_class),
                         "buckets": int(len(part)), "requests": float(part["requests"].sum()),
                         "first_ts": str(part["ts"].min()), "last_ts": str(part["ts"].max()),
                         "length_source": self.length_source})
        return rows


def _constants(labels: Mapping[str, str | None], mapping: Mapping[str, str]) -> dict[str, str]:
    constants = {}
    for label, value in labels.items():
        if value is None:
            continue
        if not str(value).strip():
            raise InputError(f"the constant {label} label is empty", where=LABEL_OPTIONS[label],
                             fix="pass a non-empty value")
        if label in mapping:
            raise InputError(f"{label} is given both as column {mapping[label]!r} and as the constant {value!r}",
                             where=LABEL_OPTIONS[label], fix=f"drop {LABEL_OPTIONS[label]} or drop {label}= from --map")
        constants[label] = str(value)
    return constants


def ingest_rates(paths: Sequence[str | Path], *, lengths: Lengths, length_source: str,
                 mapping: Mapping[str, str] | None = None, labels: Mapping[str, str | None] | None = None,
                 freq: str = "1h") -> RatesResult:
    """Read rates tables (files or globs) and spread them into demand history at ``freq``.

    ``lengths`` gives each (model, class) its mean prompt and output tokens and ``length_source``
    names where they come from; a (model, class) of the table missing from ``lengths`` is an
    ``InputError``, as is any bad row (file, row and column named). Nothing is written here.
    """
    bucket_seconds = parse_freq(freq)
    mapping = dict(mapping or {})
    constants = _constants(dict(labels or {}), mapping)
    files = expand_paths(paths)
    table = read_rates(files, mapping, constants, bucket_seconds)
    check_lengths(table, lengths, length_source)
    demand = rates_history(table.intervals, bucket_seconds, lengths)
    used = [(i.model, i.traffic_class) for i in table.intervals]
    return RatesResult(demand=demand, rows_read=len(table.intervals), files=files, freq=freq.strip().lower(),
                       measure=table.measure, lengths=lengths_summary(lengths, used, length_source),
                       length_source=length_source)

"""Write an ingest's demand history and token histogram, both or neither.

The demand history is CSV or Parquet by the extension of ``out``; the histogram
defaults to ``<out without suffix>.histogram.csv``. Both are staged
(:func:`planner.storage.staged_outputs`) and renamed into place only once both are
written, so a failure leaves any earlier outputs byte-identical.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import InputError
from planner.ingest.pipeline import IngestResult
from planner.storage import check_table_suffix, staged_outputs


def output_paths(out: str | Path, histogram_out: str | Path | None = None) -> tuple[Path, Path]:
    """Check both destinations' extensions (call this before reading any input) and return them."""
    out = Path(out)
    check_table_suffix(out)
    histogram = Path(histogram_out) if histogram_out is not None else out.with_suffix(".histogram.csv")
    check_table_suffix(histogram)
    if histogram.resolve() == out.resolve():
        raise InputError(
            "the histogram would overwrite the demand history",
            where=str(histogram),
            fix="give --histogram-out a different file name",
        )
    return out, histogram


def write_ingest_outputs(result: IngestResult, out: Path, histogram_out: Path | None = None) -> list[Path]:
    """Write the demand history to ``out`` and the histogram beside it; return the paths written."""
    out, histogram = output_paths(out, histogram_out)
    with staged_outputs() as outputs:
        outputs.write_table(out, result.demand)
        outputs.write_table(histogram, result.histogram)
    return [out, histogram]

"""Write an ingest's demand history, token histogram and prefix-reuse statistics, all or none.

The demand history is CSV or Parquet by the extension of ``out``; the histogram
defaults to ``<out without suffix>.histogram.csv``; the reuse statistics, written only
when the logs carry block hashes or session ids, to ``<out without suffix>.reuse.json``.
All are staged (:func:`planner.storage.staged_outputs`) and renamed into place only once
all are written, so a failure leaves any earlier outputs byte-identical.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import InputError
from planner.ingest.pipeline import IngestResult
from planner.ingest.rates_pipeline import RatesResult
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


def reuse_path(out: str | Path, histogram: str | Path, reuse_out: str | Path | None = None) -> Path:
    """Where the reuse statistics go (``--reuse-out``, default ``<out without suffix>.reuse.json``), checked."""
    out = Path(out)
    path = Path(reuse_out) if reuse_out is not None else out.with_suffix(".reuse.json")
    if path.suffix.lower() != ".json":
        raise InputError(f"the reuse statistics are JSON, and {path.name!r} does not end in .json",
                         where="--reuse-out", fix="name the file e.g. demand.reuse.json")
    if path.resolve() in (out.resolve(), Path(histogram).resolve()):
        raise InputError("the reuse statistics would overwrite the demand history or the histogram",
                         where=str(path), fix="give --reuse-out a different file name")
    return path


def write_ingest_outputs(result: IngestResult, out: Path, histogram_out: Path | None = None,
                         reuse_out: Path | None = None) -> list[Path]:
    """Write the demand history to ``out``, the histogram and (when measured) the reuse JSON beside it;
    return the paths written."""
    out, histogram = output_paths(out, histogram_out)
    reuse = reuse_path(out, histogram, reuse_out)
    written = [out, histogram]
    with staged_outputs() as outputs:
        outputs.write_table(out, result.demand)
        outputs.write_table(histogram, result.histogram)
        if result.reuse is not None:
            outputs.write_json(reuse, result.reuse)
            written.append(reuse)
    return written


def write_rates_output(result: RatesResult, out: Path) -> list[Path]:
    """Write the demand history of a rates table to ``out`` (CSV or Parquet); return [out]."""
    out = Path(out)
    check_table_suffix(out)
    with staged_outputs() as outputs:
        outputs.write_table(out, result.demand)
    return [out]

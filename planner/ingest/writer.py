"""Write an ingest's demand history and token histogram, both or neither.

The demand history is CSV or Parquet by the extension of ``out``; the histogram
defaults to ``<out without suffix>.histogram.csv``. Both go to temporary files
beside their destinations and are renamed into place only once both are written,
so a failure leaves any earlier outputs byte-identical.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pandas as pd

from planner.errors import InputError
from planner.ingest.pipeline import IngestResult
from planner.storage import atomic_path, check_table_suffix


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


def _write(frame: pd.DataFrame, tmp: Path, suffix: str) -> None:
    if suffix == ".csv":
        frame.to_csv(tmp, index=False, lineterminator="\n")
    else:
        frame.to_parquet(tmp, index=False)


def write_ingest_outputs(result: IngestResult, out: Path, histogram_out: Path | None = None) -> list[Path]:
    """Write the demand history to ``out`` and the histogram beside it; return the paths written."""
    out, histogram = output_paths(out, histogram_out)
    with contextlib.ExitStack() as stack:
        # ExitStack unwinds last-in first: the histogram is renamed into place, then the demand.
        out_tmp = stack.enter_context(atomic_path(out))
        histogram_tmp = stack.enter_context(atomic_path(histogram))
        _write(result.demand, out_tmp, out.suffix.lower())
        _write(result.histogram, histogram_tmp, histogram.suffix.lower())
    return [out, histogram]

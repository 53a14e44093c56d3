"""The schema of the token-length histogram ``planner ingest`` writes beside the history.

Each row is one bin ``[bin_lo_tokens, bin_hi_tokens)`` of one (model, traffic class, measure)
with the ``count`` of requests in it. The cells are checked as read (numbers coerced, NaN where
a cell is not one); whether a class's bins hold any request at all is checked where the class
is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from planner.contracts.schemas.base import FileSchema, cell_check, cell_numbers, quoted, row_check

if TYPE_CHECKING:
    import pandera.pandas as pa

HISTOGRAM_FIX = "pass the .histogram.csv that `planner ingest` wrote, unmodified"


def _numbers(cells: pd.Series) -> npt.NDArray[np.float64]:
    if pd.api.types.is_bool_dtype(cells):  # true/false is not a number of tokens or requests
        return np.full(len(cells), np.nan)
    return cell_numbers(cells)


def _whole_tokens(cells: pd.Series) -> npt.NDArray[np.bool_]:
    values = _numbers(cells)
    with np.errstate(invalid="ignore"):
        good: npt.NDArray[np.bool_] = np.isfinite(values) & (values >= 0) & (values == np.floor(values))
    return good


def _tokens(column: str) -> pa.Check:
    return cell_check("tokens", lambda cells: pd.Series(_whole_tokens(cells), index=cells.index),
                      lambda f, r: f"{column} must be a whole number of tokens >= 0, got {quoted(f[column].iloc[r])}",
                      HISTOGRAM_FIX, empty_passes=False)


def histogram_schema() -> FileSchema:
    """A histogram: bin edges whole token counts >= 0 with ``bin_hi_tokens`` > ``bin_lo_tokens``,
    and each ``count`` a number >= 0."""

    def counts(cells: pd.Series) -> pd.Series:
        values = _numbers(cells)
        with np.errstate(invalid="ignore"):
            return pd.Series(np.isfinite(values) & (values >= 0), index=cells.index)

    def widening(frame: pd.DataFrame) -> pd.Series:
        lo, hi = _numbers(frame["bin_lo_tokens"]), _numbers(frame["bin_hi_tokens"])
        checked = _whole_tokens(frame["bin_lo_tokens"]) & _whole_tokens(frame["bin_hi_tokens"])
        with np.errstate(invalid="ignore"):  # an edge refused already is not compared
            return pd.Series(~(checked & (hi <= lo)), index=frame.index)

    def empty_bin(frame: pd.DataFrame, row: int) -> str:
        lo, hi = frame["bin_lo_tokens"].iloc[row], frame["bin_hi_tokens"].iloc[row]
        return f"bins need bin_hi_tokens > bin_lo_tokens, got {quoted(lo)} to {quoted(hi)}"

    columns: dict[str, list[pa.Check]] = {
        "bin_lo_tokens": [_tokens("bin_lo_tokens")],
        "bin_hi_tokens": [_tokens("bin_hi_tokens")],
        "count": [cell_check("count", counts, lambda f, r: f"bins need count >= 0, got {quoted(f['count'].iloc[r])}",
                             HISTOGRAM_FIX, empty_passes=False)],
    }
    rows = [row_check("bin_hi_tokens", "widening", widening, empty_bin, HISTOGRAM_FIX)]
    return FileSchema(columns, rows=rows)

"""Which file a table came from, carried with the table, so core checks can name it.

The core takes DataFrames, not paths (the shell reads the files). An error about a bad
row must still say which file the row is in, so the shell records the path on the frame
(``pandas.DataFrame.attrs``, which pandas keeps through slicing and copying) and a check
reads it back, falling back to a description such as "forecast" for a frame built in
memory. Row numbers in errors are 1-based data rows, the header being row 0:
:func:`data_row` spells them the same way everywhere.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

SOURCE_ATTR = "source_path"


def named(frame: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """``frame`` with ``path`` recorded as its source (the same object, for chaining)."""
    frame.attrs[SOURCE_ATTR] = str(path)
    return frame


def source_of(frame: pd.DataFrame, default: str) -> str:
    """The file ``frame`` was read from, or ``default`` when it was built in memory."""
    value = frame.attrs.get(SOURCE_ATTR)
    return str(value) if value else default


def data_row(position: int) -> str:
    """'row 5 (the header is row 0)' for the row at 0-based ``position`` of a table read from a file."""
    return f"row {position + 1} (the header is row 0)"

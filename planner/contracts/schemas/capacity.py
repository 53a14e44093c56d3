"""The schema of the capacity table placement reads (``--capacity``, written by ``planner calibrate``).

The table is checked with its key text stripped (``model``, ``sku``, ``traffic_class``, empty
where the cell is), every other cell as read. A rate or setting column that holds only
true/false is found by the reading code first (a boolean is not a number of requests);
``tp_degree`` and the engine settings are whole numbers, and a true/false one is refused row by row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from planner.contracts.columns import CAPACITY_COLUMNS, CAPACITY_KEY
from planner.contracts.schemas.base import FileSchema, cell_check, cell_numbers, quoted, row_check

if TYPE_CHECKING:
    import pandera.pandas as pa

RATE = "max_rps_per_replica"
RATE_FIX = "write the calibrated maximum requests per second of one replica (> 0)"
WHOLE_FIX = "write the GPUs per replica (tp_degree) and the engine settings as whole numbers"
TEXT_KEY: tuple[str, ...] = tuple(c for c in CAPACITY_KEY if c != "tp_degree")
"""The key columns that hold names (checked stripped)."""


def _whole_at_least(smallest: int, cells: pd.Series) -> npt.NDArray[np.bool_]:
    if pd.api.types.is_bool_dtype(cells):
        return np.zeros(len(cells), dtype=bool)
    values = cell_numbers(cells)
    with np.errstate(invalid="ignore"):
        good: npt.NDArray[np.bool_] = np.isfinite(values) & (values >= smallest) & (values == np.floor(values))
    return good


POOL = "pool_replicas"
"""Optional key column: the pool size a row was calibrated at (``planner calibrate --pool-sizes``)."""


def _whole(column: str) -> pa.Check:
    smallest = 1 if column in ("tp_degree", POOL) else 0
    return cell_check("whole", lambda cells: pd.Series(_whole_at_least(smallest, cells), index=cells.index),
                      lambda f, r: f"{column} must be a whole number >= {smallest}, got {quoted(f[column].iloc[r])}",
                      WHOLE_FIX, empty_passes=False)


def _rate() -> pa.Check:
    def positive(cells: pd.Series) -> pd.Series:
        values = cell_numbers(cells)
        with np.errstate(invalid="ignore"):
            return pd.Series(np.isfinite(values) & (values > 0), index=cells.index)

    return cell_check("positive", positive,
                      lambda f, r: f"{RATE} must be a positive number, got {quoted(f[RATE].iloc[r])}",
                      RATE_FIX + ", or drop the row if the class cannot run on that SKU", empty_passes=False)


def capacity_schema(whole_columns: Sequence[str], *, rate_numeric: bool) -> FileSchema:
    """A capacity table: key names filled, ``max_rps_per_replica`` (when it holds numbers,
    ``rate_numeric``) a finite rate > 0, each of ``whole_columns`` (``tp_degree`` and the engine
    settings present) a whole number (``tp_degree`` >= 1), and one row per :data:`CAPACITY_KEY` (and pool size,
    when ``pool_replicas`` is among ``whole_columns``)."""
    key = [*CAPACITY_KEY[:3], POOL, CAPACITY_KEY[3]] if POOL in whole_columns else list(CAPACITY_KEY)
    columns: dict[str, list[pa.Check]] = {
        column: [cell_check("filled", lambda cells: cells != "", f"empty {column}", f"fill in the {column}")]
        for column in TEXT_KEY}
    columns[RATE] = [_rate()] if rate_numeric else []
    columns.update({column: [_whole(column)] for column in whole_columns})
    order = [*CAPACITY_COLUMNS, POOL]
    columns = {name: columns[name] for name in sorted(columns, key=order.index)}  # file order

    def keys(frame: pd.DataFrame) -> pd.DataFrame:
        numbers = {c: cell_numbers(frame[c]) for c in ("tp_degree", POOL) if c in key}
        return frame.assign(**numbers).loc[:, key]

    def unique(frame: pd.DataFrame) -> pd.Series:
        # a key with a refused cell is not compared: that cell is reported already
        valid = _whole_at_least(1, frame["tp_degree"]) & (frame.loc[:, list(TEXT_KEY)] != "").all(axis=1).to_numpy()
        if POOL in key:
            valid &= _whole_at_least(1, frame[POOL])
        repeated = keys(frame).duplicated(keep="first").to_numpy()
        return pd.Series(~(valid & repeated), index=frame.index)

    def duplicate(frame: pd.DataFrame, row: int) -> str:
        found = keys(frame).iloc[row]
        pool = f", pool of {int(found[POOL])}" if POOL in key else ""
        return (f"two rows for model {found['model']!r}, sku {found['sku']!r}, TP {int(found['tp_degree'])}{pool}, "
                f"class {found['traffic_class']!r}")

    rows = [row_check("model", "unique", unique, duplicate, f"keep one row per ({', '.join(key)})",
                      place=lambda _f, r: f"row {r + 1}")]
    return FileSchema(columns, rows=rows, required=())

"""The schema of the model profile tables: ``profiles.csv`` (bundled or a scenario's own) and ``models.csv``.

A table is checked with its text columns stripped (empty where a cell is) and its number
columns as read. Which columns hold numbers, and which of those are whole or positive, is the
profile package's business (it knows the step model's columns); the schema turns that into
checks. A number column that holds only true/false is found by the reading code first.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from planner.contracts.schemas.base import FileSchema, cell_check, cell_numbers, quoted, row_check

if TYPE_CHECKING:
    import pandera.pandas as pa


@dataclass(frozen=True)
class NumberColumn:
    """A column of numbers: > 0 (``positive``) or >= 0, and whole when ``integer``."""

    positive: bool
    integer: bool


def _in_range(cells: pd.Series, *, positive: bool) -> npt.NDArray[np.bool_]:
    values = cell_numbers(cells)
    with np.errstate(invalid="ignore"):
        good: npt.NDArray[np.bool_] = np.isfinite(values) & ((values > 0) if positive else (values >= 0))
    return good


def _number_checks(column: str, kind: NumberColumn, fix: str) -> list[pa.Check]:
    sign = "a positive" if kind.positive else "a non-negative"
    checks = [cell_check("range", lambda c: pd.Series(_in_range(c, positive=kind.positive), index=c.index),
                         lambda f, r: f"{column} must be {sign} number, got {quoted(f[column].iloc[r])}", fix,
                         empty_passes=False)]
    if kind.integer:  # a cell refused above is not asked to be whole as well
        def whole(cells: pd.Series) -> pd.Series:
            values = cell_numbers(cells)
            with np.errstate(invalid="ignore"):
                return pd.Series(~_in_range(cells, positive=kind.positive) | (values == np.floor(values)),
                                 index=cells.index)

        checks.append(cell_check("whole", whole, lambda f, r: f"{column} must be a whole number, got "
                                 f"{quoted(f[column].iloc[r])}", fix, empty_passes=False))
    return checks


def _text_checks(column: str, allowed: Collection[str]) -> list[pa.Check]:
    checks = [cell_check("filled", lambda cells: cells != "", "empty value", f"fill in the {column}")]
    if allowed:
        choices = list(allowed)
        checks.append(cell_check("choice", lambda cells: (cells == "") | cells.isin(choices),
                                 lambda f, r: f"unknown {column} {f[column].iloc[r]!r}",
                                 f"use one of: {', '.join(choices)}"))
    return checks


def profile_table_schema(text: Mapping[str, Collection[str]], numbers: Mapping[str, NumberColumn], fix: str, *,
                         key: Sequence[str] = (), fractions: Sequence[str] = (), rising: Sequence[str] = ()
                         ) -> FileSchema:
    """A profile or model table.

    ``text``: the text columns, each with its allowed values (empty: any); ``numbers``: the number
    columns (``fix`` says how to repair one); ``fractions``: number columns at most 1;
    ``rising``: columns whose values must not decrease along a row (the dense step times);
    ``key``: the columns no two rows share.
    """
    columns: dict[str, list[pa.Check]] = {column: _text_checks(column, allowed) for column, allowed in text.items()}
    columns.update({column: _number_checks(column, kind, fix) for column, kind in numbers.items()})
    for column in fractions:
        columns[column].append(_fraction(column))
    rows: list[pa.Check] = []
    if rising:
        def not_falling(frame: pd.DataFrame) -> pd.Series:
            values = np.column_stack([cell_numbers(frame[c]) for c in rising])
            with np.errstate(invalid="ignore"):  # a cell refused already is not compared
                return pd.Series(~(np.diff(values, axis=1) < 0).any(axis=1), index=frame.index)

        rows.append(row_check(rising[0], "rising", not_falling,
                              "the dense step time falls as tokens grow: a step of more tokens cannot be faster",
                              "make dense_ms_<n> non-decreasing in n; " + fix))
    if key:
        rows.append(_unique(list(key), text, numbers))
    return FileSchema(columns, rows=rows)


def _fraction(column: str) -> pa.Check:
    return cell_check("fraction", lambda cells: pd.Series(~(cell_numbers(cells) > 1), index=cells.index),
                      lambda f, r: f"{column} must be at most 1, got {quoted(f[column].iloc[r])}",
                      "give a fraction of HBM, e.g. 0.9")


def _unique(key: list[str], text: Mapping[str, Collection[str]], numbers: Mapping[str, NumberColumn]) -> pa.Check:
    def values(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.assign(**{c: cell_numbers(frame[c]) for c in key if c in numbers}).loc[:, key]

    def unique(frame: pd.DataFrame) -> pd.Series:
        keys = values(frame)
        # a key with a refused cell is not compared: that cell is reported already
        valid = np.ones(len(frame), dtype=bool)
        for column in key:
            if column in numbers:
                valid &= np.isfinite(keys[column].to_numpy(dtype=float))
            elif text.get(column):
                valid &= frame[column].isin(list(text[column])).to_numpy()
            else:
                valid &= (frame[column] != "").to_numpy()
        return pd.Series(~(valid & keys.duplicated(keep="first").to_numpy()), index=frame.index)

    def duplicate(frame: pd.DataFrame, row: int) -> str:
        keys = values(frame).iloc[row]
        shown = ", ".join(f"{c} {int(keys[c]) if c in numbers and float(keys[c]).is_integer() else keys[c]!r}"
                          for c in key)
        return f"duplicate profile for {shown}"

    return row_check(key[0], "unique", unique, duplicate, f"keep one row per ({', '.join(key)})")

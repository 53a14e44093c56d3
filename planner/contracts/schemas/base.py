"""The machinery every file schema shares: pandera checks that carry a problem and a fix,
run lazily so that one pass finds every broken cell, and one error that lists them all.

A schema is a :class:`FileSchema`: the columns a file must have, the checks of each
column's cells, and the checks across columns of one row. :meth:`FileSchema.problems`
runs it with ``pandera`` (``lazy=True``: every check on every row) and turns each failure
into a :class:`Problem` naming the row, the column, what is wrong with the cell as the
user wrote it, and how to fix it. :func:`raise_problems` reports them in one
:class:`~planner.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaErrors

from planner.errors import InputError

Describe = Callable[[pd.DataFrame, int], str]
"""What to say about the row at a 0-based position of the checked frame."""
MAX_PROBLEMS_SHOWN = 20


@dataclass(frozen=True)
class Problem:
    """One broken cell (``row`` is its 0-based position), or a header problem (``row`` None)."""

    row: int | None
    column: str
    problem: str
    fix: str


def _describe(text: str | Describe) -> Describe:
    return text if callable(text) else (lambda _frame, _row: text)


def cell_check(name: str, passes: Callable[[pd.Series], pd.Series], problem: str | Describe,
               fix: str | Describe, *, empty_passes: bool = True) -> pa.Check:
    """A check of every cell of one column: ``passes`` maps the column to True where a cell is good.

    ``empty_passes``: a missing cell (NaN) is not this check's business (pandera's ``ignore_na``).
    """
    return pa.Check(passes, name=name, ignore_na=empty_passes,
                    statistics={"problem": _describe(problem), "fix": _describe(fix)})


def row_check(column: str, name: str, passes: Callable[[pd.DataFrame], pd.Series], problem: str | Describe,
              fix: str | Describe) -> pa.Check:
    """A check across the columns of each row, reported in ``column``."""
    return pa.Check(passes, name=name, ignore_na=False,
                    statistics={"column": column, "problem": _describe(problem), "fix": _describe(fix)})


@dataclass(frozen=True)
class FileSchema:
    """One file format: its columns, the checks of their cells and the checks across a row."""

    columns: Mapping[str, Sequence[pa.Check]]
    rows: Sequence[pa.Check] = ()
    required: Sequence[str] | None = None
    """The columns a file must have (default: every column of ``columns``)."""
    _schema: pa.DataFrameSchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        schema = pa.DataFrameSchema(
            {name: pa.Column(checks=list(checks), nullable=True, required=False)
             for name, checks in self.columns.items()},
            checks=list(self.rows),
        )
        object.__setattr__(self, "_schema", schema)

    def missing_columns(self, frame: pd.DataFrame) -> list[str]:
        required = self.columns if self.required is None else self.required
        return [name for name in required if name not in frame.columns]

    def problems(self, frame: pd.DataFrame, *, header_fix: Callable[[str], str]) -> list[Problem]:
        """Every problem of ``frame``: the missing columns alone if any (the cell checks need them),
        else every failing cell, in row order and, within a row, in column order."""
        missing = self.missing_columns(frame)
        if missing:
            return [Problem(None, name, f"missing column '{name}'", header_fix(name)) for name in missing]
        checked = frame.reset_index(drop=True)
        try:
            self._schema.validate(checked, lazy=True, inplace=True)
        except SchemaErrors as errors:
            return self._collect(checked, errors)
        return []

    def _collect(self, frame: pd.DataFrame, errors: SchemaErrors) -> list[Problem]:
        found: dict[tuple[int, str, str], Problem] = {}
        for error in errors.schema_errors:
            check = error.check
            if not isinstance(check, pa.Check) or error.failure_cases is None:
                raise error  # a schema bug (a check that raised), not a bad cell
            stats: dict[str, Any] = check.statistics
            column = str(stats.get("column") or getattr(error.schema, "name", ""))
            for row in pd.unique(error.failure_cases["index"].dropna().astype(int)):
                key = (int(row), column, str(check.name))
                found.setdefault(key, Problem(int(row), column, stats["problem"](frame, int(row)),
                                              stats["fix"](frame, int(row))))
        order = {name: rank for rank, name in enumerate(self.columns)}
        return sorted(found.values(), key=lambda p: (p.row if p.row is not None else -1, order.get(p.column, 0)))


def raise_problems(problems: Sequence[Problem], source: str, locate: Callable[[Problem], str], *,
                   fix_suffix: str = "", many_fix: str = "correct the cells listed above") -> None:
    """Report every problem in one :class:`InputError` (nothing when there is none).

    One problem reads as before ``<file>, <row and column>: <problem>``; several are listed
    one a line with their fixes, the first :data:`MAX_PROBLEMS_SHOWN` of them.
    """
    if not problems:
        return
    if len(problems) == 1:
        only = problems[0]
        raise InputError(only.problem, where=f"{source}, {locate(only)}", fix=only.fix + fix_suffix)
    shown = problems[:MAX_PROBLEMS_SHOWN]
    lines = [f"{locate(p)}: {p.problem} (fix: {p.fix})" for p in shown]
    if len(problems) > len(shown):
        lines.append(f"... and {len(problems) - len(shown)} more")
    raise InputError(f"{len(problems)} problems:\n  - " + "\n  - ".join(lines), where=source,
                     fix=many_fix + fix_suffix)

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
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from planner.errors import InputError

if TYPE_CHECKING:
    import pandera.pandas as pa
    from pandera.errors import SchemaErrors

Describe = Callable[[pd.DataFrame, int], str]
"""What to say about the row at a 0-based position of the checked frame."""
MAX_PROBLEMS_SHOWN = 20


def quoted(value: object) -> str:
    """A cell as the user wrote it, text quoted (no numpy reprs)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def cell_numbers(cells: pd.Series) -> npt.NDArray[np.float64]:
    """The cells as floats; a cell that is not a number is NaN."""
    values: npt.NDArray[np.float64] = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)
    return values


@dataclass(frozen=True)
class Problem:
    """One broken cell (``row`` is its 0-based position), or a problem of a whole column (``row`` None).

    ``check`` names the rule broken; ``place``, when set, is where the problem is in words, for a
    rule about several cells (two quantile columns of a row, two rows with the same key).
    """

    row: int | None
    column: str
    problem: str
    fix: str
    check: str = ""
    place: str | None = None
    repeats: int = 0
    """How many further rows break the same rule (when only the first is named)."""


def _pandera() -> ModuleType:
    """``pandera.pandas``, loaded when the first schema is built: a command that checks no file
    starts without it (0.3 s)."""
    import pandera.pandas

    return pandera.pandas


def _describe(text: str | Describe) -> Describe:
    return text if callable(text) else (lambda _frame, _row: text)


def cell_check(name: str, passes: Callable[[pd.Series], pd.Series], problem: str | Describe,
               fix: str | Describe, *, empty_passes: bool = True, report_as: str | None = None) -> pa.Check:
    """A check of every cell of one column: ``passes`` maps the column to True where a cell is good.

    ``empty_passes``: a missing cell (NaN) is not this check's business (pandera's ``ignore_na``).
    ``report_as``: the file's column to name, when the checked column is derived from it (a
    parsed timestamp checks the ``ts`` the user wrote).
    """
    check: pa.Check = _pandera().Check(passes, name=name, ignore_na=empty_passes,
                                       statistics={"column": report_as, "problem": _describe(problem),
                                                   "fix": _describe(fix)})
    return check


def row_check(column: str, name: str, passes: Callable[[pd.DataFrame], pd.Series], problem: str | Describe,
              fix: str | Describe, *, place: Describe | None = None) -> pa.Check:
    """A check across the columns of each row, reported in ``column`` (or at ``place``, in words)."""
    check: pa.Check = _pandera().Check(passes, name=name, ignore_na=False,
                                       statistics={"column": column, "place": place, "problem": _describe(problem),
                                                   "fix": _describe(fix)})
    return check


@dataclass(frozen=True)
class FileSchema:
    """One file format: its columns, the checks of their cells and the checks across a row."""

    columns: Mapping[str, Sequence[pa.Check]]
    rows: Sequence[pa.Check] = ()
    required: Sequence[str] | None = None
    """The columns a file must have (default: every column of ``columns``)."""
    rows_per_rule: int | None = None
    """Name at most this many rows per broken rule, counting the others in the first one's
    ``repeats`` (a table of a million rows may break one rule a million times); None: every row."""
    _schema: pa.DataFrameSchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.rows_per_rule is not None:  # pandera then collects (and formats) only these rows
            for check in [*self.rows, *(c for checks in self.columns.values() for c in checks)]:
                check.n_failure_cases = self.rows_per_rule
        pa = _pandera()
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
        else every failing cell (see :attr:`rows_per_rule`), in row order and, within a row, in
        column order."""
        missing = self.missing_columns(frame)
        if missing:
            return [Problem(None, name, f"missing column '{name}'", header_fix(name)) for name in missing]
        checked = frame.reset_index(drop=True)
        try:
            self._schema.validate(checked, lazy=True, inplace=True)
        except _pandera().errors.SchemaErrors as errors:
            return self._collect(checked, errors)
        return []

    def _collect(self, frame: pd.DataFrame, errors: SchemaErrors) -> list[Problem]:
        found: list[Problem] = []
        for error in errors.schema_errors:
            check = error.check
            if not isinstance(check, _pandera().Check) or error.failure_cases is None:
                raise error  # a schema bug (a check that raised), not a bad cell
            stats: dict[str, Any] = check.statistics or {}
            column = str(stats.get("column") or getattr(error.schema, "name", ""))
            place: Describe | None = stats.get("place")
            rows = np.unique(error.failure_cases["index"].dropna().to_numpy(dtype=np.int64))
            repeats = 0 if self.rows_per_rule is None else _failing_rows(check, frame, error) - len(rows)
            for row in (int(r) for r in rows):
                found.append(Problem(row, column, stats["problem"](frame, row), stats["fix"](frame, row),
                                     str(check.name), place(frame, row) if place else None, repeats))
        order = {name: rank for rank, name in enumerate(self.columns)}
        return sorted(found, key=lambda p: (p.row if p.row is not None else -1, order.get(p.column, 0)))


def _failing_rows(check: pa.Check, frame: pd.DataFrame, error: Any) -> int:
    """How many rows break ``check`` (pandera names only the first few when asked to)."""
    checked = frame[error.schema.name] if isinstance(error.schema, _pandera().Column) else frame
    passed = check(checked).check_output
    if check.ignore_na:
        passed = passed | (checked.isna() if isinstance(checked, pd.Series) else checked.isna().any(axis=1))
    return int((~passed.to_numpy(dtype=bool)).sum())


def raise_problems(problems: Sequence[Problem], source: str, locate: Callable[[Problem], str], *,
                   fix_suffix: str = "", many_fix: str = "correct the cells listed above",
                   more: Callable[[int], str] | None = None) -> None:
    """Report every problem in one :class:`InputError` (nothing when there is none).

    One problem reads ``<file>, <row and column>: <problem>``; several are listed one a line
    with their fixes, the first :data:`MAX_PROBLEMS_SHOWN` of them. ``locate`` words a
    problem's row and column (a rule about several cells says where itself, ``place``);
    ``more`` words a problem's ``repeats`` (nothing is added when it is None).
    """
    if not problems:
        return

    def where(problem: Problem) -> str:
        return problem.place or locate(problem)

    def what(problem: Problem) -> str:
        return problem.problem + (more(problem.repeats) if more is not None and problem.repeats else "")

    if len(problems) == 1:
        only = problems[0]
        raise InputError(what(only), where=f"{source}, {where(only)}", fix=only.fix + fix_suffix)
    shown = problems[:MAX_PROBLEMS_SHOWN]
    lines = [f"{where(p)}: {what(p)} (fix: {p.fix})" for p in shown]
    if len(problems) > len(shown):
        lines.append(f"... and {len(problems) - len(shown)} more")
    raise InputError(f"{len(problems)} problems:\n  - " + "\n  - ".join(lines), where=source,
                     fix=many_fix + fix_suffix)

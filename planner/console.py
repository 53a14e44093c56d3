"""Terminal output for the CLI edge: rich tables, JSON, and error panels.

Kept apart from the commands so that every command renders tables the same way and
``--json`` always prints the same rows the table shows.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

# Piped or captured output (cron mail, CI logs) gets room for wide tables instead of rich's 80 columns.
_PIPE_WIDTH = None if sys.stdout.isatty() else 160
stdout = Console(soft_wrap=False, width=_PIPE_WIDTH)
stderr = Console(stderr=True, soft_wrap=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


def print_json(payload: Any) -> None:
    """Print JSON to stdout without rich markup, so it pipes cleanly into jq."""
    text = json.dumps(payload, indent=2, sort_keys=False, default=_jsonable)
    print(text)


def rows_jsonable(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{key: _jsonable(value) for key, value in row.items()} for row in rows]


def _format_cell(value: Any) -> str:
    value = _jsonable(value)
    if value is None:
        return ""
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:,.3f}".rstrip("0").rstrip(".")
        return f"{value:.4g}"
    return str(value)


def print_table(
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    columns: Sequence[str] | None = None,
    as_json: bool = False,
    json_extra: Mapping[str, Any] | None = None,
) -> None:
    """Print rows as a rich table, or as JSON when ``as_json`` is set.

    With ``json_extra`` the JSON output is an object ``{**json_extra, "rows": [...]}``;
    otherwise it is the list of rows.
    """
    if as_json:
        body = rows_jsonable(rows)
        print_json({**json_extra, "rows": body} if json_extra else body)
        return
    columns = list(columns or (rows[0].keys() if rows else []))
    cells = [[_format_cell(row.get(name)) for name in columns] for row in rows]
    widths = _fitted_widths([[name, *(line[index] for line in cells)] for index, name in enumerate(columns)],
                            room=stdout.width - (3 * len(columns) + 1))  # each column: 2 of padding, 1 of border
    table = Table(title=title, show_lines=False, header_style="bold")
    for name, width in zip(columns, widths, strict=True):
        table.add_column(name, width=width, overflow="ellipsis")
    for line in cells:
        table.add_row(*(escape(cell) for cell in line))
    stdout.print(table)


def _fitted_widths(columns: Sequence[Sequence[str]], room: int) -> list[int | None]:
    """Column widths that fit ``room`` without splitting a word; None (rich's own) when the table fits as it is.

    ``columns`` holds each column's header, then its cells. Rich narrows a table that is too
    wide without regard to words: the widest column first, down to nothing, then every column
    evenly, so ``fold`` prints ``…/interactiv`` above ``e``. Here the columns first wrap between
    words, down to their longest word, the widest first. If the words alone are too wide, long
    headers are cut next (the values matter more), then the widest values. A cut word ends in
    an ellipsis (``overflow="ellipsis"``) instead of continuing on the next line.
    """
    widest = [max((cell_len(line) for cell in cells for line in cell.splitlines() or [""]), default=0)
              for cells in columns]
    if sum(widest) <= room:
        return [None] * len(columns)

    def longest_word(cells: Sequence[str]) -> int:
        return max((cell_len(word) for cell in cells for word in cell.split()), default=1)

    widths = list(widest)
    for floor in ([longest_word(c) for c in columns], [longest_word(c[1:]) for c in columns], [1] * len(columns)):
        while sum(widths) > room:
            shrinkable = [i for i, width in enumerate(widths) if width > floor[i]]
            if not shrinkable:
                break
            widths[max(shrinkable, key=lambda i: (widths[i], -i))] -= 1  # the widest (leftmost on a tie) gives way
    return list(widths)


def print_error(message: str, *, fix: str | None = None, where: str | None = None, code: int) -> None:
    location = f"[bold]{escape(where)}[/bold]: " if where else ""
    stderr.print(f"[red]error[/red] (exit {code}): {location}{escape(message)}", highlight=False)
    if fix:
        stderr.print(f"[yellow]To fix:[/yellow] {escape(fix)}", highlight=False)


@contextlib.contextmanager
def progress_bar(description: str, *, console: Console = stderr) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar driven by ``advance(done, total)`` callbacks from the core.

    The core never imports rich: it takes a plain callback, and this adapter draws it.
    Drawn on stderr, so ``--json`` output on stdout stays clean.
    """
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield advance


@contextlib.contextmanager
def narrated(first: str, *, console: Console = stderr,
             clock: Callable[[], float] = time.monotonic) -> Iterator[Callable[[str], None]]:
    """What a long run is doing, each step of it updating the text: on a terminal a spinner with the time elapsed;
    elsewhere (cron mail, CI logs) one line per step with the minutes and seconds since the run began, so that a
    log shows where the time went. On stderr, so ``--json`` output on stdout stays clean."""
    if console.is_terminal:
        columns = (SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task(first, total=None)
            yield lambda text: progress.update(task, description=text)
        return
    began = clock()

    def line(text: str) -> None:
        minutes, seconds = divmod(int(clock() - began), 60)
        console.print(f"[{minutes:3d}:{seconds:02d}] {text}", markup=False, highlight=False)

    line(first)
    yield line

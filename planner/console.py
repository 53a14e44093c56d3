"""Terminal output for the CLI edge: rich tables, JSON, and error panels.

Kept apart from the commands so that every command renders tables the same way and
``--json`` always prints the same rows the table shows.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
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
    table = Table(title=title, show_lines=False, header_style="bold")
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(escape(_format_cell(row.get(name))) for name in columns))
    stdout.print(table)


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

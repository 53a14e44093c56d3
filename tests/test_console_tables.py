"""Terminal tables never split a word across lines: they wrap between words, or cut a word with an ellipsis."""

from __future__ import annotations

import pytest
from rich.console import Console

from planner import console

SERIES = ["ap-northeast/llama-3.1-70b/interactive", "eu-west/llama-3.1-70b/long-context", "us-east/llama-3.1-8b/batch"]
ROWS = [{"series": name, "note": "the forecast underestimates weekday interactive peaks; see the backtest"}
        for name in SERIES]
RULES = set("━┏┓┳┡┩╇└┘┴─┃│ ")


def _render(monkeypatch: pytest.MonkeyPatch, width: int, rows: list[dict[str, object]]) -> list[str]:
    terminal = Console(width=width, record=True, soft_wrap=False, color_system=None)
    monkeypatch.setattr(console, "stdout", terminal)
    console.print_table(rows, title="Forecast")
    lines = [line for line in terminal.export_text().splitlines() if not set(line) <= RULES]
    return [cell.strip() for line in lines for cell in line.replace("┃", "│").strip("│ ").split("│")]


def _words(rows: list[dict[str, object]]) -> set[str]:
    """The words of the title, the headers and the cells."""
    cells = [value for row in rows for value in (*row, *row.values())]
    return {"Forecast"} | {word for value in cells for word in console._format_cell(value).split()}


def test_words_wrap_between_words_when_they_fit(monkeypatch):
    cells = _render(monkeypatch, 60, ROWS)
    shown = {word for cell in cells for word in cell.split()}
    # Every word of every cell is printed whole: the long series keys stay on one line and the
    # prose column wraps between its words (rich's `fold` printed ".../interactiv" above "e").
    assert set(SERIES) <= shown
    assert shown == _words(ROWS)


def test_a_word_wider_than_the_terminal_is_cut_with_an_ellipsis_not_folded(monkeypatch):
    cells = _render(monkeypatch, 40, ROWS)
    words = _words(ROWS)
    for cell in cells:
        for word in cell.split():
            assert word in words or (word.endswith("…") and any(w.startswith(word[:-1]) for w in words)), word


def test_a_table_that_fits_is_left_as_it_is(monkeypatch):
    rows = [{"region": "aws:us-east-1", "gpus": 8}]
    assert console._fitted_widths([["region", "aws:us-east-1"], ["gpus", "8"]], room=80) == [None, None]
    cells = _render(monkeypatch, 80, rows)
    assert "aws:us-east-1" in cells

"""Every --option that an error's hint or location names exists on some command."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import typer

from planner import cli

PACKAGE = Path(cli.__file__).resolve().parents[1]

_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_OTHER_PROGRAMS = re.compile(r"dask worker(?: --[a-z-]+)+")
"""Options of other programs that a hint may name (e.g. ``dask worker --memory-limit``)."""


def _cli_options() -> set[str]:
    group = typer.main.get_command(cli.app)
    options = set()
    for command in [group, *group.commands.values()]:
        for param in command.params:
            options.update(param.opts)
            options.update(param.secondary_opts)
    return options


def _named_options() -> list[tuple[str, int, str, str]]:
    """(file, line, keyword, option) for every --option named in a ``fix=`` or ``where=`` string of the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.keyword) and node.arg in ("fix", "where")):
                continue
            for text in (n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant)):
                if isinstance(text, str):
                    for option in _OPTION.findall(_OTHER_PROGRAMS.sub("", text)):
                        found.append((path.relative_to(PACKAGE).as_posix(), node.lineno, node.arg, option))
    return found


def test_every_option_a_hint_names_exists():
    named = _named_options()
    assert len(named) > 40  # the scan does find the hints
    assert {"--tolerance", "--history-file", "--time-limit"} <= {option for *_, option in named}
    known = _cli_options()
    assert [entry for entry in named if entry[3] not in known] == []


def test_the_option_scan_catches_an_option_that_does_not_exist():
    assert "--rel-tol" not in _cli_options() and "--tolerance" in _cli_options()
    assert _OPTION.findall("e.g. --rel-tol 0.02, or --engine dask") == ["--rel-tol", "--engine"]
    assert _OPTION.findall(_OTHER_PROGRAMS.sub("", "(dask worker --memory-limit)")) == []

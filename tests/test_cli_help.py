"""Every command's help teaches: it ends with real examples, shows flags as flags, and one name per setting."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode

runner = CliRunner()
REPO_ROOT = Path(__file__).resolve().parents[1]


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every registered command and group below ``group``, as (words after `planner`, command)."""
    found = []
    for name, command in sorted(group.commands.items()):
        found.append(((*prefix, name), command))
        if hasattr(command, "commands"):  # a group, e.g. `planner profiles`
            found += _commands(command, (*prefix, name))
    return found


COMMANDS = _commands(typer.main.get_command(cli.app))


def _help(words: tuple[str, ...]) -> str:
    result = runner.invoke(cli.app, [*words, "-h"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.stdout


def _example_commands(command: Any) -> list[str]:
    """The examples of a command's help, each joined over its ``\\`` continuation lines."""
    epilog = command.epilog or ""
    text = epilog.partition("Examples:")[2].replace("\\\n", " ")
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def test_every_command_is_found():
    names = {" ".join(words) for words, _ in COMMANDS}
    assert {"validate", "simulate", "calibrate", "plan", "report", "profiles", "profiles fit", "step-time"} <= names


@pytest.mark.parametrize(("words", "command"), COMMANDS, ids=[" ".join(w) for w, _ in COMMANDS])
def test_help_ends_with_examples_of_the_command(words, command):
    text = _help(words)
    lines = [line.strip() for line in text.splitlines()]
    assert "Examples:" in lines, text
    start = lines.index("Examples:")
    assert not any(line.startswith(("╭", "│", "╰")) for line in lines[start:]), "examples come after every option"
    block = [line for line in lines[start + 1:] if line]
    assert any(line.startswith(f"planner {' '.join(words)} ") for line in block), block
    # Each line of each example is printed whole (not re-wrapped), so it can be pasted into a shell.
    for line in (command.epilog or "").partition("Examples:")[2].splitlines():
        assert not line.strip() or line.strip() in block


@pytest.mark.parametrize(("words", "command"), COMMANDS, ids=[" ".join(w) for w, _ in COMMANDS])
def test_examples_use_options_that_exist_and_bundled_files(words, command):
    """An example is a real command line: its options exist, and the inputs it names are in the repository."""
    examples = _example_commands(command)
    assert 1 <= len(examples) <= 3
    for example in examples:
        argv = shlex.split(example)
        assert argv[0] == "planner"
        target = typer.main.get_command(cli.app)
        known = {o for p in target.params for o in (*p.opts, *p.secondary_opts)}
        for word in argv[1:]:
            if word in getattr(target, "commands", {}):
                target = target.commands[word]
                known |= {o for p in target.params for o in (*p.opts, *p.secondary_opts)}
        used = {word.split("=")[0] for word in argv if word.startswith("-")}
        assert used <= known | {"-h", "--help"}, (example, used - known)
        bundled = [w for w in argv if w.startswith(("scenarios/", "data/", "tests/data/"))]
        assert all((REPO_ROOT / path).exists() for path in bundled), (example, bundled)


@pytest.mark.parametrize(("words", "command"), [(("",), None), *COMMANDS],
                         ids=["planner", *(" ".join(w) for w, _ in COMMANDS)])
def test_bool_options_show_as_flags(words, command):
    text = _help(tuple(w for w in words if w))
    assert "BOOLEAN" not in text and "<bool>" not in text, text
    assert "--help" in text


def _option_names(words: tuple[str, ...]) -> set[str]:
    command = typer.main.get_command(cli.app)
    for word in words:
        command = command.commands[word]  # type: ignore[attr-defined]
    return {o for p in command.params if not getattr(p, "hidden", False) for o in p.opts}


@pytest.mark.parametrize("words", [("simulate",), ("calibrate",), ("plan",), ("report",)])
def test_the_simulated_time_has_one_name(words):
    names = _option_names(words)
    assert "--sim-duration" in names and "--duration" not in names
    assert "--sim-duration" in _help(words) and "--duration " not in _help(words)


def test_old_duration_name_warns_and_giving_both_is_an_input_error(tmp_path):
    scenario = str(REPO_ROOT / "scenarios/demo.toml")
    base = ["calibrate", "--scenario", scenario, "--out", str(tmp_path / "c.csv"), "--replications", "1"]
    old = runner.invoke(cli.app, [*base, "--duration", "5min"])
    # --replications 1 is refused after the duration is read: the warning shows that --duration was taken.
    assert old.exit_code == ExitCode.INVALID_INPUT
    warning = [line for line in old.stderr.splitlines() if "--duration" in line]
    assert len(warning) == 1 and "deprecated" in warning[0] and "--sim-duration" in warning[0]
    both = runner.invoke(cli.app, [*base, "--duration", "5min", "--sim-duration", "10min"])
    assert both.exit_code == ExitCode.INVALID_INPUT
    assert "--sim-duration" in both.stderr and "not both" in both.stderr
    new = runner.invoke(cli.app, [*base, "--sim-duration", "5min"])
    assert "deprecated" not in new.stderr


def test_a_bad_simulated_time_names_the_option_users_should_type(tmp_path):
    for name in ("p.csv", "p.flows.csv"):
        (tmp_path / name).write_text("period\n")  # read only after the options are checked
    result = runner.invoke(cli.app, ["simulate", "--scenario", str(REPO_ROOT / "scenarios/demo.toml"),
                                     "--plan", str(tmp_path / "p.csv"), "--out", str(tmp_path / "s.csv"),
                                     "--sim-duration", "forever"])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert re.search(r"--sim-duration 'forever' is not a positive duration", result.stderr), result.stderr

"""One name per setting: the simulated time per replication is --sim-duration on every command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode

runner = CliRunner()
REPO_ROOT = Path(__file__).resolve().parents[1]


def _help(words: tuple[str, ...]) -> str:
    result = runner.invoke(cli.app, [*words, "-h"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.stdout


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

"""The CLI frame: version, help, JSON output, and the mapping of domain errors to exit codes."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from planner import __version__, cli
from planner.errors import ExitCode, InfeasibleError, InputError, SLOFailedError, UsageError

runner = CliRunner()


def test_version_prints_and_exits_zero():
    result = runner.invoke(cli.app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"planner {__version__}"


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_lists_commands(flag):
    result = runner.invoke(cli.app, [flag])
    assert result.exit_code == 0
    for command in ("validate", "catalog", "profiles", "ingest"):
        assert command in result.stdout


def test_unknown_command_is_a_usage_error():
    result = runner.invoke(cli.app, ["no-such-command"])
    assert result.exit_code == ExitCode.USAGE


def _app_raising(exc: BaseException) -> typer.Typer:
    """A one-command app wired like the real one, whose command raises ``exc``."""
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context, verbose: bool = typer.Option(False, "--verbose")) -> None:
        cli.open_front_door(ctx, verbose=verbose)

    @app.command()
    @cli.guarded
    def boom() -> None:
        raise exc

    return app


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (UsageError("bad flag"), 2),
        (InputError("bad column", where="x.csv", fix="rename it"), 3),
        (InfeasibleError("no quota"), 4),
        (SLOFailedError("interactive TTFT p99 missed"), 5),
        (RuntimeError("kaboom"), 1),
    ],
)
def test_errors_map_to_exit_codes_without_traceback(exc, code):
    result = runner.invoke(_app_raising(exc), ["boom"])
    assert result.exit_code == code
    assert "Traceback" not in result.output
    assert f"exit {code}" in result.output


def test_input_error_names_where_and_fix():
    result = runner.invoke(_app_raising(InputError("bad column", where="x.csv", fix="rename it")), ["boom"])
    assert "x.csv" in result.output and "bad column" in result.output and "rename it" in result.output


def test_verbose_shows_traceback():
    result = runner.invoke(_app_raising(RuntimeError("kaboom")), ["--verbose", "boom"])
    assert result.exit_code == 1
    assert "Traceback" in result.output


def test_catalog_json_is_machine_readable():
    result = runner.invoke(cli.app, ["catalog", "--sku", "H100", "--tier", "on_demand", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows and all(row["sku"] == "H100" and row["tier"] == "on_demand" for row in rows)


def test_catalog_with_no_match_exits_3():
    result = runner.invoke(cli.app, ["catalog", "--sku", "NO-SUCH-GPU"])
    assert result.exit_code == ExitCode.INVALID_INPUT


def test_profiles_json_lists_every_model():
    result = runner.invoke(cli.app, ["profiles", "--json"])
    assert result.exit_code == 0, result.output
    models = {row["model"] for row in json.loads(result.stdout)}
    assert {"llama-3.1-8b", "llama-3.1-70b", "qwen3-235b-a22b"} <= models


def test_validate_demo_scenario_json(repo_root):
    result = runner.invoke(cli.app, ["validate", str(repo_root / "scenarios" / "demo.toml"), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["valid"] is True and payload["rows"]


def test_validate_bad_scenario_exits_3_and_names_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n[policy]\nname = 'lifo'\n")
    result = runner.invoke(cli.app, ["validate", str(bad)])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "bad.toml" in result.output and "policy" in result.output

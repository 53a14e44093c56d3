"""`planner experiment` through the CLI: table, chart, and theory checks in JSON."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode

runner = CliRunner()


def test_experiment_e3_writes_csv_png_and_checks(tmp_path):
    result = runner.invoke(cli.app, ["experiment", "e3", "--out", str(tmp_path), "--scale", "0.05", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert {p.rsplit("/", 1)[-1] for p in payload["written"]} == {"e3.csv", "e3.png"}
    assert payload["rows"] and payload["checks"]
    assert (tmp_path / "e3.png").stat().st_size > 10_000


def test_same_seed_gives_identical_table(tmp_path):
    for folder in ("a", "b"):
        result = runner.invoke(cli.app, ["experiment", "e1", "--out", str(tmp_path / folder), "--scale", "0.02"])
        assert result.exit_code == 0, result.output
    assert (tmp_path / "a" / "e1.csv").read_bytes() == (tmp_path / "b" / "e1.csv").read_bytes()


def test_unknown_experiment_exits_3(tmp_path):
    result = runner.invoke(cli.app, ["experiment", "e9", "--out", str(tmp_path)])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert not any(tmp_path.iterdir())

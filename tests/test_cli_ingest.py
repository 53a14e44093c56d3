"""`planner ingest` through the CLI: outputs, JSON summary, and exit code 3 with nothing written."""

from __future__ import annotations

import json

import pandas as pd
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode

runner = CliRunner()


def _write_log(path, rows):
    path.write_text("time,in,out\n" + "".join(f"{t},{p},{o}\n" for t, p, o in rows))


def test_ingest_generic_writes_history_and_histogram(tmp_path):
    log = tmp_path / "log.csv"
    _write_log(log, [("2026-01-01T00:10:00Z", 100, 10), ("2026-01-01T00:50:00Z", 300, 30),
                     ("2026-01-01T01:05:00Z", 5, 1)])
    out = tmp_path / "history.csv"
    result = runner.invoke(
        cli.app,
        [
            "ingest", str(log), "--map", "ts=time,prompt_tokens=in,output_tokens=out",
            "--region", "eu-west", "--model", "llama-3.1-8b", "--traffic-class", "batch", "--out", str(out), "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["rows_read"] == 3
    history = pd.read_csv(out)
    assert history["requests"].tolist() == [2, 1]
    assert history["prompt_tokens_sum"].tolist() == [400, 5]
    assert history["ts"].tolist() == ["2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"]
    assert (tmp_path / "history.histogram.csv").exists()


def test_ingest_azure_sample_table_output(repo_root, tmp_path):
    out = tmp_path / "azure.parquet"
    result = runner.invoke(
        cli.app,
        [
            "ingest", str(repo_root / "data/samples/azure_llm_2023/AzureLLMInferenceTrace_code.csv"),
            "--format", "azure", "--region", "us-west", "--model", "llama-3.1-8b", "--traffic-class", "standard",
            "--out", str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert pd.read_parquet(out)["requests"].sum() == 8819


def test_bad_token_count_exits_3_names_row_and_keeps_previous_output(tmp_path):
    log = tmp_path / "log.csv"
    _write_log(log, [("2026-01-01T00:10:00Z", 100, 10), ("2026-01-01T00:20:00Z", -4, 10)])
    out = tmp_path / "history.csv"
    out.write_text("a good earlier output\n")
    result = runner.invoke(
        cli.app,
        [
            "ingest", str(log), "--map", "ts=time,prompt_tokens=in,output_tokens=out",
            "--region", "r", "--model", "m", "--traffic-class", "k", "--out", str(out),
        ],
    )
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "log.csv" in result.output and "row 2" in result.output
    assert out.read_text() == "a good earlier output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.csv", "log.csv"]


def test_unknown_format_exits_3(tmp_path):
    log = tmp_path / "log.csv"
    _write_log(log, [("2026-01-01T00:10:00Z", 100, 10)])
    result = runner.invoke(cli.app, ["ingest", str(log), "--format", "splunk", "--out", str(tmp_path / "h.csv")])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "splunk" in result.output


def test_bad_output_extension_fails_before_reading(tmp_path):
    result = runner.invoke(cli.app, ["ingest", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "h.txt")])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert ".txt" in result.output


MOONCAKE_SLICE = "data/samples/mooncake/conversation_trace_6001_7000.jsonl"
MOONCAKE_ARGS = ["--format", "mooncake", "--start", "2024-06-01T00:00:00Z", "--region", "ap-northeast",
                 "--model", "kimi", "--traffic-class", "interactive"]


def test_ingest_mooncake_writes_reuse_json_and_shows_the_share(repo_root, tmp_path):
    out = tmp_path / "demand.csv"
    result = runner.invoke(cli.app, ["ingest", str(repo_root / MOONCAKE_SLICE), *MOONCAKE_ARGS, "--out", str(out),
                                     "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    (series,) = payload["reuse"]["series"]
    assert series["ideal_cached_tokens"] == 1_941_182 and series["prompt_tokens"] == 11_380_372
    assert payload["written"][-1] == str(tmp_path / "demand.reuse.json")
    assert json.loads((tmp_path / "demand.reuse.json").read_text()) == payload["reuse"]

    moved = tmp_path / "reuse" / "kimi.json"
    table = runner.invoke(cli.app, ["ingest", str(repo_root / MOONCAKE_SLICE), *MOONCAKE_ARGS, "--out",
                                    str(tmp_path / "again.csv"), "--reuse-out", str(moved)])
    assert table.exit_code == 0, table.output
    assert "Prefix reuse" in table.output and "0.1706" in table.output and "1,941" in table.output
    assert moved.exists() and not (tmp_path / "again.reuse.json").exists()


def test_ingest_bad_block_tokens_exits_3_and_writes_nothing(repo_root, tmp_path):
    result = runner.invoke(cli.app, ["ingest", str(repo_root / MOONCAKE_SLICE), *MOONCAKE_ARGS, "--out",
                                     str(tmp_path / "demand.csv"), "--block-tokens", "0"])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "--block-tokens" in result.output
    assert list(tmp_path.iterdir()) == []

"""`planner forecast` end to end through the CLI, on a small slice of the demo history."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode

runner = CliRunner()


@pytest.fixture
def small_history(repo_root, tmp_path):
    history = pd.read_parquet(repo_root / "data/history/demo_history.parquet")
    keep = ((history["region"] == "eu-west") & (history["model"] == "llama-3.1-8b")
            & history["traffic_class"].isin(["interactive", "standard"]))
    path = tmp_path / "history.csv"
    history[keep].groupby("traffic_class").tail(24 * 7 * 6).to_csv(path, index=False)  # last 6 weeks of two series
    return path


def test_forecast_writes_contract_metadata_and_plots(small_history, tmp_path):
    out = tmp_path / "fc" / "forecast.csv"
    result = runner.invoke(
        cli.app,
        ["forecast", str(small_history), "--horizon", "2d", "--out", str(out), "--plots", str(tmp_path / "png"),
         "--engine", "local", "--backtest", "--json"],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["backtest_overall"]["series_backtested"] == 2
    frame = pd.read_csv(out)
    assert list(frame.columns) == [
        "region", "model", "traffic_class", "ts", "mean", "q50", "q90", "q95", "q99", "model_used"
    ]
    assert len(frame) == 2 * 48
    assert (frame[["mean", "q50", "q90", "q95", "q99"]] >= 0).all().all()
    assert (frame["q50"] <= frame["q90"]).all() and (frame["q95"] <= frame["q99"]).all()
    meta = json.loads((tmp_path / "fc" / "forecast.meta.json").read_text())
    assert meta["n_series"] == 2 and all(s["backtest"] for s in meta["series"])
    assert len(list((tmp_path / "png").glob("*.png"))) == 2


def test_duplicate_timestamp_exits_3_naming_series_and_ts(small_history, tmp_path):
    frame = pd.read_csv(small_history)
    broken = pd.concat([frame, frame.iloc[[10]]])
    path = tmp_path / "dup.csv"
    broken.to_csv(path, index=False)
    out = tmp_path / "forecast.csv"
    result = runner.invoke(cli.app, ["forecast", str(path), "--out", str(out), "--engine", "local"])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert frame.iloc[10]["ts"] in result.output and "eu-west" in result.output
    assert not out.exists()


@pytest.mark.parametrize(("flag", "value"), [("--horizon", "fortnight"), ("--quantiles", "0.5,1.2")])
def test_bad_horizon_or_quantiles_exit_3(small_history, tmp_path, flag, value):
    result = runner.invoke(cli.app, ["forecast", str(small_history), "--out", str(tmp_path / "f.csv"), flag, value])
    assert result.exit_code == ExitCode.INVALID_INPUT


def test_min_history_decides_between_a_model_and_the_naive(small_history, tmp_path):
    frame = pd.read_csv(small_history)
    short = tmp_path / "short.csv"
    frame.groupby("traffic_class").tail(24 * 9).to_csv(short, index=False)  # 9 days
    out = tmp_path / "fc.csv"
    args = ["forecast", str(short), "--horizon", "1d", "--out", str(out), "--engine", "local"]
    strict = runner.invoke(cli.app, [*args, "--min-history", "10d"])
    assert strict.exit_code == 0, strict.output
    assert set(pd.read_csv(out)["model_used"]) == {"seasonal_naive(168)"}
    assert "backtest skipped for 2 series" in strict.stderr and "history too short: 216 h" in strict.stderr
    relaxed = runner.invoke(cli.app, [*args, "--min-history", "5d"])
    assert relaxed.exit_code == 0, relaxed.output
    meta = json.loads((tmp_path / "fc.meta.json").read_text())
    assert all(not s["fallback"] and s["fit"]["selection"]["winner"] for s in meta["series"])
    assert meta["parameters"]["model_spec"]["min_history_hours"] == 120


@pytest.mark.parametrize("value", ["3x", "12h"])
def test_bad_min_history_exits_3_naming_the_option(small_history, tmp_path, value):
    result = runner.invoke(cli.app, ["forecast", str(small_history), "--out", str(tmp_path / "f.csv"),
                                     "--min-history", value])
    assert result.exit_code == ExitCode.INVALID_INPUT, result.output
    assert "--min-history" in result.output

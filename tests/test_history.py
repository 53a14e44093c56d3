"""The run history: round trip, missing and corrupt files, recording around failures, locking."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta

import duckdb
import pandas as pd
import pytest

from planner.errors import ExitCode, InputError, SLOFailedError
from planner.runs import (
    HistoryBusyError,
    RunHistory,
    RunRecord,
    default_history_path,
    exit_code_of,
    history_rows,
    last_month,
    previous_month,
    recording,
)

T0 = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)


def _forecast() -> pd.DataFrame:
    ts = pd.date_range("2026-11-01", periods=3, freq="h", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    return pd.DataFrame({"region": "eu-west", "model": "llama-3.1-8b", "traffic_class": "interactive", "ts": list(ts),
                         "mean": [10.0, 12.5, 9.25], "q50": [9.0, 12.0, 9.0], "q90": [14.0, 16.0, 12.0],
                         "q95": [15.0, 17.0, 13.0], "q99": [18.0, 20.0, 15.0], "model_used": "seasonal_naive(168)"})


def _clock(*moments: datetime):
    it = iter(moments)
    return lambda: next(it)


def test_round_trip_of_runs_and_forecast_snapshot(tmp_path):
    history = RunHistory(tmp_path / "deep" / "history.duckdb")
    run = RunRecord("plan", {"scenario": "demo.toml", "rounds": 3}, started_at=T0,
                    ended_at=T0 + timedelta(seconds=42.5),
                    exit_code=0, input_hashes={"history": "ab" * 32}, seeds={"base": 20240611},
                    output_paths=["out/plan.csv"], figures={"plan_cost_usd": 1234.5, "slo_met": True}, month="2026-10")
    run_id = history.record(run)
    assert run_id.startswith("20261001T020000Z-")
    (row,) = history.runs()
    assert row["arguments"] == {"scenario": "demo.toml", "rounds": 3}
    assert row["seeds"] == {"base": 20240611} and row["input_hashes"] == {"history": "ab" * 32}
    assert row["output_paths"] == ["out/plan.csv"] and row["figures"]["slo_met"] is True
    assert row["started_at"] == "2026-10-01T02:00:00Z" and row["duration_s"] == pytest.approx(42.5)
    assert row["exit_code"] == 0 and row["month"] == "2026-10" and row["version"]

    forecast = _forecast()
    assert history.save_forecast(run_id, forecast) == 3
    back = history.forecast_for(run_id)
    pd.testing.assert_frame_equal(back, forecast[back.columns.tolist()], check_dtype=False)
    history.save_forecast(run_id, forecast.iloc[:2])  # a second snapshot replaces the first
    assert len(history.forecast_for(run_id)) == 2
    assert history.forecast_for("no-such-run").empty


def test_latest_filters_by_command_month_time_and_exit_code(tmp_path):
    history = RunHistory(tmp_path / "h.duckdb")
    for i, (command, month, code) in enumerate([("report", "2026-09", 0), ("report", "2026-10", 0),
                                                ("report", "2026-10", 3), ("plan", "2026-10", 5)]):
        start = T0 + timedelta(days=i)
        history.record(RunRecord(command, started_at=start, ended_at=start, exit_code=code, month=month,
                                 run_id=f"r{i}"))
    assert history.latest("report")["run_id"] == "r1"  # r2 failed
    assert history.latest("report", month="2026-09")["run_id"] == "r0"
    assert history.latest("report", before=T0 + timedelta(hours=12))["run_id"] == "r0"
    assert history.latest("report", before="2026-09-01T00:00:00Z") is None
    assert history.latest("plan") is None and history.latest("plan", exit_codes=(0, 5))["run_id"] == "r3"
    assert [r["run_id"] for r in history.runs(limit=2)] == ["r3", "r2"]
    assert [r["run_id"] for r in history.runs(command="report")] == ["r2", "r1", "r0"]


def test_missing_file_is_a_fresh_start_and_reads_create_nothing(tmp_path):
    path = tmp_path / "none" / "history.duckdb"
    history = RunHistory(path)
    assert history.runs() == [] and history.latest("report") is None and history.forecast_for("x").empty
    assert not path.exists()
    history.record(RunRecord("forecast", started_at=T0))
    assert path.exists() and len(history.runs()) == 1


def test_default_location_and_overrides(monkeypatch, tmp_path):
    for name in ("PLANNER_HISTORY", "PLANNER_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_history_path() == tmp_path / ".local/share/planner/history.duckdb"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_history_path() == tmp_path / "xdg/planner/history.duckdb"
    monkeypatch.setenv("PLANNER_HOME", str(tmp_path / "home"))
    assert default_history_path() == tmp_path / "home/history.duckdb"
    monkeypatch.setenv("PLANNER_HISTORY", str(tmp_path / "explicit.duckdb"))
    assert RunHistory().path == tmp_path / "explicit.duckdb"
    assert RunHistory(tmp_path / "arg.duckdb").path == tmp_path / "arg.duckdb"


def test_corrupt_file_is_moved_aside_with_a_notice(tmp_path):
    path = tmp_path / "history.duckdb"
    garbage = b"this is not a database\n" * 50
    path.write_bytes(garbage)
    history = RunHistory(path)
    history.record(RunRecord("report", started_at=T0))
    (moved,) = tmp_path.glob("history.duckdb.corrupt-*")
    assert moved.read_bytes() == garbage
    assert len(history.notices) == 1 and str(moved) in history.notices[0]
    assert len(history.runs()) == 1


def test_corrupt_file_with_on_corrupt_error_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "history.duckdb"
    path.write_bytes(b"")
    with pytest.raises(InputError) as info:
        RunHistory(path, on_corrupt="error").record(RunRecord("report", started_at=T0))
    assert str(path) in str(info.value) and "move it aside" in str(info.value)
    assert info.value.exit_code == ExitCode.INVALID_INPUT
    assert path.read_bytes() == b"" and not list(tmp_path.glob("*.corrupt-*"))


def test_wrong_schema_is_moved_aside_but_a_foreign_database_is_never_touched(tmp_path):
    wrong = tmp_path / "wrong.duckdb"
    with duckdb.connect(str(wrong)) as conn:
        conn.execute("CREATE TABLE planner_meta (key VARCHAR, value VARCHAR)")
        conn.execute("CREATE TABLE runs (run_id VARCHAR, command VARCHAR)")
    history = RunHistory(wrong)
    history.record(RunRecord("report", started_at=T0))
    assert len(list(tmp_path.glob("wrong.duckdb.corrupt-*"))) == 1 and "runs" in history.notices[0]

    foreign = tmp_path / "analytics.duckdb"
    with duckdb.connect(str(foreign)) as conn:
        conn.execute("CREATE TABLE sales (id INTEGER)")
    with pytest.raises(InputError, match="other tables \\(sales\\)"):
        RunHistory(foreign).runs()
    assert foreign.exists() and not list(tmp_path.glob("analytics.duckdb.corrupt-*"))


def test_history_from_a_newer_planner_is_an_input_error(tmp_path):
    path = tmp_path / "h.duckdb"
    RunHistory(path).record(RunRecord("report", started_at=T0))
    with duckdb.connect(str(path)) as conn:
        conn.execute("UPDATE planner_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(InputError, match="schema version 99"):
        RunHistory(path).runs()


@pytest.mark.parametrize(("error", "code"), [
    (None, 0), (SLOFailedError("interactive misses TTFT p99"), 5), (InputError("bad"), 3),
    (ValueError("boom"), 1), (KeyboardInterrupt(), 130), (SystemExit(2), 2),
])
def test_exit_code_mapping(error, code):
    assert exit_code_of(error) == code


def test_recording_writes_a_start_row_then_the_outcome_even_when_the_body_raises(tmp_path):
    history = RunHistory(tmp_path / "h.duckdb")
    with pytest.raises(SLOFailedError):
        with recording(history, "plan", {"rounds": 2}, month="2026-11", seeds={"base": 1},
                       clock=_clock(T0, T0 + timedelta(seconds=7))) as run:
            (during,) = history_rows(history)
            assert during["exit_code"] == "did not finish" and during["duration_s"] is None
            run.add_figures(plan_cost_usd=98765.4)
            run.add_output(tmp_path / "plan.csv")
            raise SLOFailedError("gcp:europe-west4/llama-3.1-8b/interactive misses TTFT p99 by 12 %")
    (row,) = history.runs()
    assert row["exit_code"] == ExitCode.SLO_FAILED and "misses TTFT p99" in row["message"]
    assert row["duration_s"] == 7 and row["figures"] == {"plan_cost_usd": 98765.4}
    assert row["output_paths"] == [str(tmp_path / "plan.csv")] and row["seeds"] == {"base": 1}
    (shown,) = history_rows(history)
    assert shown["key_figure"] == "plan_cost_usd=98,765.40" and shown["exit_code"] == 5


def test_recording_success_stores_inputs_figures_and_the_forecast_snapshot(tmp_path):
    history = RunHistory(tmp_path / "h.duckdb")
    source = tmp_path / "history.csv"
    source.write_text("ts,requests\n")
    with recording(history, "report", {"month": "2026-11"}, month="2026-11") as run:
        run.add_input("history", source)
        run.add_seeds(base=20240611)
        run.save_forecast(_forecast())
    latest = history.latest("report", month="2026-11")
    assert latest["exit_code"] == 0 and len(latest["input_hashes"]["history"]) == 64
    assert len(history.forecast_for(latest["run_id"])) == 3


def test_recording_with_no_history_records_nothing():
    with recording(None, "forecast") as run:
        run.add_figures(n_series=24)
    assert run.record.exit_code == 0


_HOLDER = textwrap.dedent("""
    import sys, duckdb
    conn = duckdb.connect(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()  # hold the file until the test says so
    conn.close()
""")


def test_a_writer_waits_for_another_process_and_fails_clearly_if_it_never_lets_go(tmp_path):
    path = tmp_path / "h.duckdb"
    RunHistory(path).record(RunRecord("forecast", started_at=T0))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(HistoryBusyError) as info:
            RunHistory(path, lock_timeout_s=0.3).record(RunRecord("report", started_at=T0))
        assert f"process {holder.pid}" in str(info.value) and info.value.exit_code == ExitCode.UNEXPECTED

        def release() -> None:
            holder.stdin.write("go\n")
            holder.stdin.flush()

        threading.Timer(0.5, release).start()
        later = T0 + timedelta(minutes=1)
        RunHistory(path, lock_timeout_s=60).record(RunRecord("report", started_at=later))  # retries until released
    finally:
        if holder.poll() is None and not holder.stdin.closed:
            holder.stdin.close()
        holder.wait(timeout=30)
    assert [r["command"] for r in RunHistory(path).runs()] == ["report", "forecast"]


def _plan() -> pd.DataFrame:
    return pd.DataFrame({"period": [1, 0, 10], "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-8b",
                         "tier": ["reserved", "reserved", "on_demand"], "replicas": [4, 4, 1], "gpus": [4, 4, 1],
                         "usd": [17.89, 17.89, 6.88], "hours": [1.0, 1.0, 1.0]})


def test_plan_snapshot_keeps_rows_in_order_and_periods_as_integers(tmp_path):
    history = RunHistory(tmp_path / "h.duckdb")
    run_id = history.record(RunRecord("plan", started_at=T0))
    assert history.save_plan(run_id, _plan()) == 3
    back = history.plan_for(run_id)
    assert back["period"].tolist() == [1, 0, 10] and back["tier"].tolist() == ["reserved", "reserved", "on_demand"]
    assert back["usd"].sum() == pytest.approx(42.66) and history.plan_for("other").empty
    with pytest.raises(InputError, match="plan lacks column"):
        history.save_plan(run_id, _plan().drop(columns="usd"))


def test_last_month_finds_the_previous_months_snapshots(tmp_path):
    assert previous_month("2026-01") == "2025-12" and previous_month("2026-11") == "2026-10"
    history = RunHistory(tmp_path / "h.duckdb")
    assert last_month(history, "2026-11") is None
    with recording(history, "plan", month="2026-10", clock=_clock(T0, T0)) as run:
        run.save_plan(_plan())
    found = last_month(history, "2026-11")
    assert found.run["command"] == "plan" and found.forecast is None and len(found.plan) == 3
    later = T0 + timedelta(days=1)
    with recording(history, "report", month="2026-10", clock=_clock(later, later)) as run:
        run.save_forecast(_forecast())
        run.save_plan(_plan().iloc[:2])
    found = last_month(history, "2026-11")
    assert found.run["command"] == "report" and len(found.forecast) == 3 and len(found.plan) == 2
    assert last_month(history, "2026-12") is None

"""The report and its month: the header states the hours planned, last month's forecast is checked against
every hour of last month, and stale history is a risk."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from report_fixtures import small_inputs

from planner.report import build_report
from planner.report.accuracy import forecast_accuracy
from planner.report.period import month_window
from planner.report.render import render_html, render_json, render_markdown

SERIES = [("us-east", "llama-3.1-8b", "interactive", 200.0), ("us-east", "llama-3.1-8b", "batch", 60.0)]


def _iso(ts: pd.DatetimeIndex) -> list[str]:
    return list(ts.strftime("%Y-%m-%dT%H:%M:%SZ"))


def history_until(end: str, days: int = 61) -> pd.DataFrame:
    """Hourly demand for ``days`` days up to (not including) ``end``; deterministic."""
    ts = pd.date_range(end=pd.Timestamp(end) - pd.Timedelta(hours=1), periods=days * 24, freq="h")
    rng = np.random.default_rng(3)
    parts = [pd.DataFrame({"ts": _iso(ts), "region": r, "model": m, "traffic_class": k,
                           "requests": rng.poisson(base * (1 + 0.4 * np.sin(2 * np.pi * ts.hour / 24)))})
             for r, m, k, base in SERIES]
    return pd.concat(parts, ignore_index=True)


def previous_forecast(start: str, end: str, scale: float) -> pd.DataFrame:
    """A forecast of every hour from ``start`` to ``end`` (excluded), ``scale`` times the daily shape."""
    ts = pd.date_range(start, end, freq="h", inclusive="left")
    parts = []
    for r, m, k, base in SERIES:
        mean = base * (1 + 0.4 * np.sin(2 * np.pi * ts.hour / 24)) * scale
        parts.append(pd.DataFrame({"region": r, "model": m, "traffic_class": k, "ts": _iso(ts), "mean": mean,
                                   "q50": mean, "q90": mean * 1.2, "q95": mean * 1.3, "q99": mean * 1.5}))
    return pd.concat(parts, ignore_index=True)


def month_inputs(history: pd.DataFrame, previous: pd.DataFrame, month: str = "2026-11"):
    return dataclasses.replace(small_inputs(), month=month, as_of=f"{month}-01T00:00:00Z", history=history,
                               previous_forecast=previous, period=month_window(month))


def test_last_months_forecast_is_checked_on_every_hour_of_last_month():
    # Last month's forecast ran from a week before October (stale history then) into November; only October's
    # 744 hours count, and all of them have actuals.
    history = history_until("2026-11-01T00:00:00Z")
    previous = previous_forecast("2026-09-24T00:00:00Z", "2026-11-08T00:00:00Z", scale=1.1)
    model = build_report(month_inputs(history, previous))
    accuracy = model.section("accuracy")
    assert accuracy.status == "ok"
    assert (accuracy.facts["hours_covered"], accuracy.facts["hours_in_month"]) == (744, 744)
    assert accuracy.facts["month_compared"] == "2026-10"
    assert accuracy.paragraphs[0].startswith("Covers 744 of the 744 hours of 2026-10 (2026-10-01T00:00:00Z to "
                                             "2026-10-31T23:00:00Z)")
    table = accuracy.table("forecast_accuracy").frame
    assert table["hours_compared"].tolist() == [744, 744]
    october = history[pd.to_datetime(history["ts"]).dt.month == 10]
    forecast_october = previous[pd.to_datetime(previous["ts"]).dt.month == 10]
    bias = 100 * (forecast_october["mean"].sum() - october["requests"].sum()) / october["requests"].sum()
    assert accuracy.facts["bias_pct"] == pytest.approx(bias, abs=1e-3), "September's hours are left out"


def test_a_history_that_ends_early_covers_part_of_last_month_and_says_how_much():
    history = history_until("2026-10-21T00:00:00Z")
    previous = previous_forecast("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z", scale=0.9)
    accuracy = build_report(month_inputs(history, previous)).section("accuracy")
    assert accuracy.status == "partial"
    assert (accuracy.facts["hours_covered"], accuracy.facts["hours_in_month"]) == (480, 744)
    assert accuracy.paragraphs[0].startswith("Covers 480 of the 744 hours of 2026-10")


def test_accuracy_without_a_window_compares_every_hour_it_can():
    history = history_until("2026-11-01T00:00:00Z")
    previous = previous_forecast("2026-09-24T00:00:00Z", "2026-11-08T00:00:00Z", scale=1.1)
    as_of = pd.Timestamp("2026-11-01T00:00:00Z")
    assert forecast_accuracy(previous, history, as_of)["hours_compared"].tolist() == [744 + 7 * 24] * 2
    october = forecast_accuracy(previous, history, as_of, window=month_window("2026-10"))
    assert october["hours_compared"].tolist() == [744, 744]


def test_the_header_states_the_first_and_last_hour_planned():
    history = history_until("2026-11-01T00:00:00Z")
    model = build_report(month_inputs(history, None))
    assert model.period == {"first_hour": "2026-11-01T00:00:00Z", "last_hour": "2026-11-30T23:00:00Z", "hours": 720}
    line = "plans 2026-11-01T00:00:00Z to 2026-11-30T23:00:00Z (720 hours)"
    assert line in render_markdown(model, "G").splitlines()[4]
    assert line in render_html(model, "G", {c.name: b"" for c in model.charts()})
    assert json.loads(render_json(model, "G"))["period"] == model.period
    unknown = build_report(dataclasses.replace(small_inputs(), period=None))
    assert unknown.period is None and "hours planned not reported" in render_markdown(unknown, "G")


def test_stale_history_is_a_high_risk_that_says_how_many_days():
    history = history_until("2026-11-01T00:00:00Z")  # ends 2026-10-31T23:00, 30 days before December
    model = build_report(month_inputs(history, None, month="2026-12"))
    risks = model.section("risks").table("risks").frame
    stale = risks[risks["kind"] == "stale history"]
    assert stale["severity"].tolist() == ["high"]
    assert "30.0 days stale" in stale["detail"].iloc[0] and "2026-10-31T23:00:00Z" in stale["detail"].iloc[0]
    assert any(b.startswith("[high] stale history") for b in model.section("risks").bullets)
    fresh = build_report(month_inputs(history, None, month="2026-11")).section("risks").table("risks").frame
    assert "stale history" not in set(fresh["kind"])
    two_days = build_report(month_inputs(history_until("2026-10-30T00:00:00Z"), None))
    frame = two_days.section("risks").table("risks").frame
    assert frame[frame["kind"] == "stale history"]["severity"].tolist() == ["medium"]


def test_a_month_long_before_the_newest_history_or_already_begun_is_stated():
    from planner.report.period import month_notes

    newest = pd.Timestamp("2026-10-31T23:00:00Z")
    window = month_window("2026-11")
    assert month_notes("2026-11", window, newest, pd.Timestamp("2026-10-25T09:00:00Z")) == []
    [began] = month_notes("2026-11", window, newest, pd.Timestamp("2026-11-03T00:00:00Z"))
    assert began.startswith("2026-11 began before today (2026-11-03)") and "backtest" in began
    [ended] = month_notes("2026-11", window, newest, pd.Timestamp("2026-12-07T00:00:00Z"))
    assert ended.startswith("2026-11 ended before today (2026-12-07)")
    early, past = month_notes("2026-08", month_window("2026-08"), newest, pd.Timestamp("2026-12-07T00:00:00Z"))
    assert early.startswith("2026-08 starts 92 days before the history's newest hour (2026-10-31T23:00:00Z)")
    assert "leaves the later hours out" in early and past.startswith("2026-08 ended before today")
    assert month_notes("2026-10", month_window("2026-10"), newest, pd.Timestamp("2026-09-20T00:00:00Z")) == []

"""Record a command's run around its body, and list runs for ``planner history``.

``recording`` writes the run twice: a row when the body starts (exit code null, so a
run killed by the OOM killer or ``kill -9`` still shows, as "did not finish"), and the
final row when the body ends, with the end time and the exit code the CLI will use.
The exit code comes from the exception, with the same mapping as the CLI edge
(architecture.md): a ``PlannerError`` carries its own; anything with an integer
``exit_code`` or ``code`` (``typer.Exit``, ``SystemExit``) keeps it; Ctrl-C is 130 and SIGTERM 143;
any other exception is 1. The body's exception always propagates unchanged.

If the final write fails (the file locked for longer than the retries) after a body
that succeeded, that failure is raised, because the month-over-month report depends
on the record; after a body that failed, the body's error wins and the history
failure is attached to it as a note.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from planner.errors import ExitCode, PlannerError
from planner.runs.store import RunHistory, RunRecord, utc_now
from planner.storage import file_sha256

#: Figures shown in the ``planner history`` table, first present wins (see ``key_figure``).
KEY_FIGURES = ("plan_cost_usd", "report_spend_usd", "total_gpus", "slo_classes_failed", "forecast_requests_total",
               "n_series")


def exit_code_of(exc: BaseException | None) -> int:
    """The process exit code a run ends with, given the exception that ended its body (None: success)."""
    if exc is None:
        return ExitCode.OK
    if isinstance(exc, PlannerError):
        return int(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):  # Terminated (SIGTERM) is one, with its own code
        return int(getattr(exc, "exit_code", ExitCode.INTERRUPTED))
    for attribute in ("exit_code", "code"):
        value = getattr(exc, attribute, None)
        if isinstance(value, int):
            return value
    if isinstance(exc, SystemExit):
        return ExitCode.OK if exc.code is None else ExitCode.UNEXPECTED
    return ExitCode.UNEXPECTED


def input_hash(path: str | Path) -> str:
    """SHA-256 of a file, or of every file under a folder (relative path and content, in sorted order)."""
    path = Path(path)
    if path.is_dir():
        digest = hashlib.sha256()
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(item.relative_to(path).as_posix().encode() + b"\0" + file_sha256(item).encode())
        return digest.hexdigest()
    return file_sha256(path)


@dataclass
class RunContext:
    """What the body of a recorded run adds while it works; written with the final record."""

    record: RunRecord
    forecast: pd.DataFrame | None = None
    plan: pd.DataFrame | None = None

    @property
    def run_id(self) -> str:
        return str(self.record.run_id)

    def add_output(self, *paths: str | Path) -> None:
        self.record.output_paths.extend(str(p) for p in paths)

    def add_input(self, name: str, path: str | Path) -> None:
        """Hash an input file (or folder) and record it under ``name``."""
        self.record.input_hashes[name] = input_hash(path)

    def add_figures(self, **figures: Any) -> None:
        self.record.figures.update(figures)

    def add_seeds(self, **seeds: Any) -> None:
        self.record.seeds.update(seeds)

    def add_warnings(self, *warnings: str) -> None:
        """Warnings the run gave (e.g. a plan the wall-clock safety net cut short), kept in ``figures.warnings``."""
        if warnings:
            kept = self.record.figures.setdefault("warnings", [])
            kept.extend(w for w in warnings if w not in kept)

    def save_forecast(self, forecast: pd.DataFrame) -> None:
        """Keep this forecast as the run's snapshot (stored when the run ends), for next month's accuracy check."""
        self.forecast = forecast

    def save_plan(self, plan: pd.DataFrame) -> None:
        """Keep this plan as the run's snapshot (stored when the run ends), for next month's plan delta."""
        self.plan = plan


@contextlib.contextmanager
def recording(history: RunHistory | None, command: str, arguments: dict[str, Any] | None = None, *,
              month: str | None = None, seeds: dict[str, Any] | None = None,
              input_hashes: dict[str, str] | None = None,
              clock: Callable[[], datetime] = utc_now) -> Iterator[RunContext]:
    """Record one run of ``command`` in ``history`` (None: record nothing), whatever the body does.

    Usage::

        with recording(history, "report", {"month": "2026-11"}, month="2026-11") as run:
            ...
            run.add_output(path); run.add_figures(plan_cost_usd=1234.5)
    """
    record = RunRecord(command=command, arguments=dict(arguments or {}), started_at=clock(), month=month,
                       seeds=dict(seeds or {}), input_hashes=dict(input_hashes or {}))
    context = RunContext(record)
    if history is not None:
        history.record(record)
    failure: BaseException | None = None
    try:
        yield context
    except BaseException as exc:
        failure = exc
        raise
    finally:
        record.ended_at = clock()
        record.exit_code = exit_code_of(failure)
        if failure is not None and record.exit_code != ExitCode.OK:
            record.message = (str(failure) or type(failure).__name__)[:2000]
        if history is not None:
            try:
                history.record(record)
                if context.forecast is not None:
                    history.save_forecast(context.run_id, context.forecast)
                if context.plan is not None:
                    history.save_plan(context.run_id, context.plan)
            except PlannerError as exc:
                if failure is None:
                    raise
                failure.add_note(f"the run history was not updated: {exc}")


def previous_month(month: str) -> str:
    """'2026-01' -> '2025-12'."""
    period = pd.Period(month, freq="M") - 1
    return f"{period.year:04d}-{period.month:02d}"


@dataclass
class LastMonth:
    """What the run history kept from last month: the run, and its forecast and plan snapshots (None if absent)."""

    run: dict[str, Any]
    forecast: pd.DataFrame | None
    plan: pd.DataFrame | None


def last_month(history: RunHistory, month: str, commands: tuple[str, ...] = ("report", "plan")) -> LastMonth | None:
    """The newest run recorded for the month before ``month`` that has a snapshot, trying ``commands`` in order.

    A run counts when it exited 0 or 5 (exit 5: the plan and the report exist, only the
    SLO check failed). None when the history has no such run.
    """
    before = previous_month(month)
    for command in commands:
        run = history.latest(command, month=before, exit_codes=(0, 5))
        if run is None:
            continue
        forecast, plan = history.forecast_for(run["run_id"]), history.plan_for(run["run_id"])
        if forecast.empty and plan.empty:
            continue
        return LastMonth(run, None if forecast.empty else forecast, None if plan.empty else plan)
    return None


def key_figure(figures: dict[str, Any]) -> str:
    """One short figure for a table row: the first of ``KEY_FIGURES`` present, else the first key."""
    if not figures:
        return ""
    name = next((k for k in KEY_FIGURES if k in figures), sorted(figures)[0])
    value = figures[name]
    if isinstance(value, float):
        value = f"{value:,.2f}" if abs(value) >= 100 else f"{value:.4g}"
    elif isinstance(value, int) and not isinstance(value, bool):
        value = f"{value:,}"
    return f"{name}={value}"


def history_rows(history: RunHistory, limit: int | None = 20, command: str | None = None) -> list[dict[str, Any]]:
    """Rows for the ``planner history`` table, newest first.

    Columns: run_id, command, month, started_at (ISO UTC), duration_s (null while
    running or if the process died), exit_code (null likewise: shown as
    "did not finish"), key_figure.
    """
    rows = []
    for run in history.runs(limit=limit, command=command):
        duration = run["duration_s"]
        rows.append({
            "run_id": run["run_id"], "command": run["command"], "month": run["month"] or "",
            "started_at": run["started_at"], "duration_s": round(duration, 1) if duration is not None else None,
            "exit_code": run["exit_code"] if run["exit_code"] is not None else "did not finish",
            "key_figure": key_figure(run["figures"]),
        })
    return rows

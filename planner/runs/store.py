"""The run history: every planner run, and the forecasts it made, in one embedded DuckDB file.

Why DuckDB: one file, no server, SQL for month-over-month questions, and it reads
and writes DataFrames directly. Its concurrency rule shapes this module: one
process at a time may open a database file for writing. So every call opens the
file, does its work in one transaction and closes it again (milliseconds), and an
open that meets another process's lock is retried with a short back-off before it
fails with :class:`HistoryBusyError`.

Location (first that is set):
``path`` argument > ``$PLANNER_HISTORY`` > ``$PLANNER_HOME/history.duckdb`` >
``$XDG_DATA_HOME/planner/history.duckdb`` > ``~/.local/share/planner/history.duckdb``.

Schema (version 1; timestamps are naive UTC ``TIMESTAMP``; JSON is stored as text so
no DuckDB extension is ever loaded):

``planner_meta(key, value)``: ``schema_version``.
``runs``: ``run_id`` (primary key), ``command``, ``month`` (the YYYY-MM a report or
plan is about, else null), ``arguments`` JSON object, ``version``, ``input_hashes``
JSON object name -> SHA-256, ``seeds`` JSON object, ``started_at``, ``ended_at``
(null while running, or when the process was killed), ``exit_code`` (null likewise),
``message`` (the error for a failed run), ``output_paths`` JSON list, ``figures``
JSON object of key figures.
``forecast_snapshots`` and ``plan_snapshots``: each run's forecast and plan, keyed by
``run_id`` (columns in ``planner/runs/snapshots.py``).

A missing file is a fresh start. A file that is not a DuckDB database, or a planner
history with the wrong tables, is moved aside to ``<name>.corrupt-<UTC stamp>``
(recorded in :attr:`RunHistory.notices`) and a fresh history starts, unless
``on_corrupt="error"``, which raises an :class:`InputError` instead. A DuckDB file
that holds other tables and no planner history is never moved: that is an
:class:`InputError` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd

from planner import __version__
from planner.errors import InputError, PlannerError
from planner.runs.snapshots import SNAPSHOTS, from_rows, to_rows

SCHEMA_VERSION = 1
RUN_COLUMNS = ("run_id", "command", "month", "arguments", "version", "input_hashes", "seeds", "started_at",
               "ended_at", "exit_code", "message", "output_paths", "figures")
JSON_COLUMNS = ("arguments", "input_hashes", "seeds", "output_paths", "figures")

_DDL = (
    "CREATE TABLE IF NOT EXISTS planner_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY, command VARCHAR NOT NULL, month VARCHAR, arguments VARCHAR,
        version VARCHAR, input_hashes VARCHAR, seeds VARCHAR, started_at TIMESTAMP NOT NULL,
        ended_at TIMESTAMP, exit_code INTEGER, message VARCHAR, output_paths VARCHAR, figures VARCHAR)""",
    *(kind.ddl() for kind in SNAPSHOTS.values()),
)
_EXPECTED = {
    "planner_meta": ("key", "value"),
    "runs": RUN_COLUMNS,
    **{kind.table: ("run_id", "row_index", *kind.names) for kind in SNAPSHOTS.values()},
}
_LOCK_PID = re.compile(r"PID (\d+)")


class HistoryBusyError(PlannerError):
    """Another process kept the history file locked for longer than the retry window (exit code 1).

    Every planner write holds the file for milliseconds, so a lock that outlasts the
    retries is unusual: a stuck process, or another tool holding the file open.
    """


def default_history_path() -> Path:
    """Where the run history lives when no path is given; see the module docstring for the order."""
    if os.environ.get("PLANNER_HISTORY"):
        return Path(os.environ["PLANNER_HISTORY"]).expanduser()
    if os.environ.get("PLANNER_HOME"):
        return Path(os.environ["PLANNER_HOME"]).expanduser() / "history.duckdb"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "planner" / "history.duckdb"


def utc_now() -> datetime:
    return datetime.now(UTC)


def _naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def iso_utc(moment: Any) -> str | None:
    """A timestamp (naive = UTC) as ``YYYY-MM-DDTHH:MM:SSZ``; None stays None."""
    if moment is None or (not isinstance(moment, datetime) and pd.isna(moment)):
        return None
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return str(stamp.strftime("%Y-%m-%dT%H:%M:%SZ"))


def new_run_id(started_at: datetime) -> str:
    """Sortable and unique: the UTC start second plus 8 random hex digits, e.g. ``20261101T020000Z-1a2b3c4d``."""
    return f"{_naive_utc(started_at):%Y%m%dT%H%M%SZ}-{os.urandom(4).hex()}"


@dataclass
class RunRecord:
    """One run of one command, as stored in ``runs``. ``exit_code`` None means still running (or killed)."""

    command: str
    arguments: dict[str, Any] = field(default_factory=dict)
    started_at: datetime = field(default_factory=utc_now)
    ended_at: datetime | None = None
    exit_code: int | None = None
    version: str = __version__
    input_hashes: dict[str, str] = field(default_factory=dict)
    seeds: dict[str, Any] = field(default_factory=dict)
    output_paths: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    month: str | None = None
    message: str | None = None
    run_id: str | None = None


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class RunHistory:
    """The run history file. Cheap to construct: nothing is opened until a method needs it."""

    def __init__(self, path: str | Path | None = None, *, on_corrupt: Literal["move_aside", "error"] = "move_aside",
                 lock_timeout_s: float = 10.0):
        if on_corrupt not in ("move_aside", "error"):
            raise ValueError(f"on_corrupt must be 'move_aside' or 'error', not {on_corrupt!r}")
        self.path = Path(path).expanduser() if path is not None else default_history_path()
        self.on_corrupt = on_corrupt
        self.lock_timeout_s = float(lock_timeout_s)
        self.notices: list[str] = []

    # ------------------------------------------------------------------ opening
    def _open_once(self) -> duckdb.DuckDBPyConnection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the run history folder: {exc}", where=self.path.parent,
                             fix="point PLANNER_HISTORY at a writable file") from exc
        conn = duckdb.connect(str(self.path))
        try:
            self._check_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_schema(self, conn: duckdb.DuckDBPyConnection) -> None:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position").fetchall()
        tables: dict[str, list[str]] = {}
        for table, column in rows:
            tables.setdefault(table, []).append(column)
        if tables and "planner_meta" not in tables and "runs" not in tables:
            raise InputError(
                f"this DuckDB file holds other tables ({', '.join(sorted(tables))}), not a planner run history",
                where=self.path,
                fix="point PLANNER_HISTORY (or --history-file) at a new or existing planner history file")
        if tables:
            wrong = [name for name, columns in _EXPECTED.items() if tuple(tables.get(name, ())) != columns]
            if wrong:
                raise _SchemaMismatch(f"table(s) {', '.join(wrong)} do not match the planner history schema "
                                      f"version {SCHEMA_VERSION}")
            version = conn.execute("SELECT value FROM planner_meta WHERE key = 'schema_version'").fetchone()
            if version is None or int(version[0]) > SCHEMA_VERSION:
                found = "no schema version" if version is None else f"schema version {version[0]}"
                if version is None:
                    raise _SchemaMismatch(found)
                raise InputError(f"the run history has {found}; this planner reads up to {SCHEMA_VERSION}",
                                 where=self.path, fix="upgrade planner, or point PLANNER_HISTORY at another file")
            return
        for statement in _DDL:
            conn.execute(statement)
        conn.execute("INSERT INTO planner_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])

    def _move_aside(self, reason: str) -> None:
        stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        os.replace(self.path, target)
        wal = self.path.with_name(self.path.name + ".wal")
        if wal.exists():
            os.replace(wal, target.with_name(target.name + ".wal"))
        self.notices.append(f"run history {self.path} was unreadable ({reason}); moved it to {target} "
                            "and started a fresh history")

    def _corrupt(self, reason: str, cause: BaseException) -> None:
        if self.on_corrupt == "error":
            raise InputError(f"the run history is unreadable: {reason}", where=self.path,
                             fix=f"move it aside (mv {self.path} {self.path}.bad) and rerun to start a fresh "
                                 "history, or point PLANNER_HISTORY at another file") from cause
        self._move_aside(reason)

    @contextlib.contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open the file (retrying on another process's lock), yield a connection, always close it."""
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.02
        moved = False
        while True:
            try:
                conn = self._open_once()
                break
            except _SchemaMismatch as exc:
                if moved:
                    raise
                self._corrupt(str(exc), exc)
                moved = True
            except duckdb.Error as exc:
                text = str(exc)
                if "Could not set lock" in text or "Conflicting lock" in text:
                    if time.monotonic() >= deadline:
                        holder = _LOCK_PID.search(text)
                        raise HistoryBusyError(
                            f"the run history stayed locked for {self.lock_timeout_s:g} s"
                            + (f" by process {holder.group(1)}" if holder else ""),
                            where=self.path,
                            fix="wait for that process to finish, or point PLANNER_HISTORY at another file",
                        ) from exc
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)
                    continue
                if "not a valid DuckDB database" in text and not moved:
                    self._corrupt("not a DuckDB database file", exc)
                    moved = True
                    continue
                raise InputError(f"cannot open the run history: {text}", where=self.path,
                                 fix="check the file's permissions, or point PLANNER_HISTORY at another file") from exc
        try:
            yield conn
        finally:
            conn.close()

    # ------------------------------------------------------------------ writing
    def record(self, run: RunRecord) -> str:
        """Insert or update one run (keyed by ``run_id``, assigned here when None); return its run_id."""
        run.run_id = run.run_id or new_run_id(run.started_at)
        values = [run.run_id, run.command, run.month, _dumps(run.arguments), run.version, _dumps(run.input_hashes),
                  _dumps(run.seeds), _naive_utc(run.started_at), _naive_utc(run.ended_at), run.exit_code,
                  run.message, _dumps([str(p) for p in run.output_paths]), _dumps(run.figures)]
        with self.connect() as conn:
            conn.execute(f"INSERT OR REPLACE INTO runs ({', '.join(RUN_COLUMNS)}) VALUES "
                         f"({', '.join('?' * len(RUN_COLUMNS))})", values)
        return run.run_id

    def save_snapshot(self, kind: str, run_id: str, frame: pd.DataFrame) -> int:
        """Store ``frame`` as ``run_id``'s snapshot of ``kind`` ("forecast" or "plan"), replacing an earlier one."""
        rows = to_rows(kind, run_id, frame)
        table = SNAPSHOTS[kind].table
        with self.connect() as conn:
            conn.execute("BEGIN TRANSACTION")
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", [str(run_id)])
            conn.register("snapshot_rows", rows)
            conn.execute(f"INSERT INTO {table} SELECT * FROM snapshot_rows")
            conn.unregister("snapshot_rows")
            conn.execute("COMMIT")
        return len(rows)

    def save_forecast(self, run_id: str, forecast: pd.DataFrame) -> int:
        """Store a forecast (the forecast contract) as ``run_id``'s snapshot; return the rows stored."""
        return self.save_snapshot("forecast", run_id, forecast)

    def save_plan(self, run_id: str, plan: pd.DataFrame) -> int:
        """Store a plan (period, region, sku, model, tier, replicas, gpus, usd[, hours]) as ``run_id``'s snapshot."""
        return self.save_snapshot("plan", run_id, plan)

    # ------------------------------------------------------------------ reading
    def runs(self, limit: int | None = 20, command: str | None = None) -> list[dict[str, Any]]:
        """Runs newest first (by start time, then run_id), JSON fields decoded, times as ISO UTC strings.

        Each dict has the ``runs`` columns plus ``duration_s`` (None until the run ended).
        """
        if not self.path.exists():
            return []
        sql = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"
        params: list[Any] = []
        if command is not None:
            sql += " WHERE command = ?"
            params.append(command)
        sql += " ORDER BY started_at DESC, run_id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self.connect() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [_decode(row) for row in rows]

    def latest(self, command: str, before: datetime | str | None = None, month: str | None = None,
               exit_codes: tuple[int, ...] = (0,)) -> dict[str, Any] | None:
        """The newest run of ``command`` that ended with one of ``exit_codes``, or None.

        ``before`` keeps runs started strictly before that moment; ``month`` keeps runs
        recorded for that YYYY-MM.
        """
        if not self.path.exists():
            return None
        sql = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE command = ?"
        params: list[Any] = [command]
        if exit_codes:
            sql += f" AND exit_code IN ({', '.join('?' * len(exit_codes))})"
            params.extend(int(code) for code in exit_codes)
        if before is not None:
            moment = pd.Timestamp(before)
            moment = moment.tz_localize("UTC") if moment.tzinfo is None else moment.tz_convert("UTC")
            sql += " AND started_at < ?"
            params.append(moment.tz_localize(None).to_pydatetime())
        if month is not None:
            sql += " AND month = ?"
            params.append(month)
        sql += " ORDER BY started_at DESC, run_id DESC LIMIT 1"
        with self.connect() as conn:
            row = conn.execute(sql, params).fetchone()
        return _decode(row) if row else None

    def snapshot(self, kind: str, run_id: str) -> pd.DataFrame:
        """``run_id``'s snapshot of ``kind`` in its contract form and original row order; empty if none."""
        spec = SNAPSHOTS[kind]
        if not self.path.exists():
            return pd.DataFrame(columns=list(spec.names))
        with self.connect() as conn:
            rows = conn.execute(f"SELECT {', '.join(spec.names)} FROM {spec.table} WHERE run_id = ? "
                                "ORDER BY row_index", [str(run_id)]).df()
        return from_rows(kind, rows)

    def forecast_for(self, run_id: str) -> pd.DataFrame:
        """The forecast snapshot of ``run_id`` (``ts`` as ISO UTC text); empty if none."""
        return self.snapshot("forecast", run_id)

    def plan_for(self, run_id: str) -> pd.DataFrame:
        """The plan snapshot of ``run_id``; empty if none."""
        return self.snapshot("plan", run_id)


class _SchemaMismatch(Exception):
    """Internal: the file is a DuckDB database whose planner tables are not the expected ones."""


def _decode(row: tuple[Any, ...]) -> dict[str, Any]:
    out = dict(zip(RUN_COLUMNS, row, strict=True))
    for column in JSON_COLUMNS:
        out[column] = json.loads(out[column]) if out[column] else ({} if column != "output_paths" else [])
    started, ended = out["started_at"], out["ended_at"]
    out["duration_s"] = round((ended - started).total_seconds(), 3) if started and ended else None
    out["started_at"] = iso_utc(started)
    out["ended_at"] = iso_utc(ended)
    return out

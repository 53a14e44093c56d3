"""One ``planner report`` run per reports folder: the lock, and who holds it.

The lock is ``<reports>/.lock``, taken with ``filelock`` (``flock`` on Unix) without
waiting, when the command starts, and held until the month's folder is written. The
kernel releases a ``flock`` when its holder dies, however it dies, so a killed run never
blocks the next one. The lock file is never deleted (``preserve_lock_file``): deleting a
file that another process has open and locked would let a third process lock a new file
of the same name, and two runs would both write.

Who holds it is written beside it, in ``<reports>/.lock.holder.json`` (``flock`` says
nothing about its holder, and the lock file's content is the library's), as
``{"pid", "started_at", "host", "command"}``: the process id, the start time of the
process (ISO-8601 UTC), the host name and the command line. The holder writes it
atomically right after taking the lock and deletes it just before releasing it, so:

* a second run that cannot take the lock reads the holder from it and stops with
  :class:`ReportLockedError` (exit 3, nothing written), naming the pid, start time and
  lock path;
* a run that takes the lock and still finds a holder file knows that holder died
  without releasing (``kill -9``, a power cut): the lock is stale, the kernel has freed
  it, and the new run takes it over and reports the dead holder (``ReportLock.took_over``).

One exception to "never deleted": a run that created the reports folder itself and then
fails leaves no folder behind (bad input writes nothing). It unlinks the lock file while
it still holds it, then removes the folders it made. That is safe because runs try the
lock once, without waiting: any other run that opened the old file has already given up.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import filelock
import psutil

from planner.errors import ExitCode, InputError, PlannerError

LOCK_NAME = ".lock"
HOLDER_NAME = ".lock.holder.json"
_HOLDER_STAGING = ".lock.holder.json.tmp-"


class ReportLockedError(PlannerError):
    """Another ``planner report`` run holds the reports folder's lock (exit code 3; nothing was written).

    Exit 3 because the inputs are fine but the job's schedule overlaps another run: a
    configuration problem for cron, not a bug.
    """

    exit_code = ExitCode.INVALID_INPUT


@dataclass(frozen=True)
class LockHolder:
    """What a lock holder records about itself."""

    pid: int
    started_at: str  # the process's start time, ISO-8601 UTC
    host: str
    command: str

    def describe(self) -> str:
        if self.pid <= 0:
            return f"an unknown process ({self.command})"
        return f"process {self.pid} on {self.host}, started {self.started_at}, running `{self.command}`"

    def fate(self) -> str:
        """What became of a holder whose lock the kernel released."""
        if self.pid <= 0 or self.host != socket.gethostname():
            return "did not release it"
        if psutil.pid_exists(self.pid):
            return "no longer holds it (its pid now belongs to another process)"
        return "is gone"


UNREADABLE_HOLDER = LockHolder(pid=0, started_at="unknown", host="unknown", command="its holder file was unreadable")


@dataclass(frozen=True)
class ReportLock:
    """A held lock: the folder it guards, its file, this run as holder, and the stale holder it replaced."""

    reports_dir: Path
    path: Path
    holder: LockHolder
    took_over: LockHolder | None

    def takeover_notice(self) -> str | None:
        """The warning to show when this run took over a stale lock, else None."""
        if self.took_over is None:
            return None
        return (f"took over the stale lock {self.path}: its holder, {self.took_over.describe()}, "
                f"{self.took_over.fate()}; that run did not finish, so it wrote no report")


def this_process(command: str | None = None) -> LockHolder:
    started = datetime.fromtimestamp(psutil.Process().create_time(), UTC)
    return LockHolder(pid=os.getpid(), started_at=started.strftime("%Y-%m-%dT%H:%M:%SZ"), host=socket.gethostname(),
                      command=command or " ".join(["planner", *sys.argv[1:]]))


def read_holder(reports_dir: Path) -> LockHolder | None:
    """The holder recorded beside the lock, or None (no file, or one this version cannot read)."""
    try:
        data = json.loads((Path(reports_dir) / HOLDER_NAME).read_text(encoding="utf-8"))
        return LockHolder(pid=int(data["pid"]), started_at=str(data["started_at"]), host=str(data["host"]),
                          command=str(data.get("command", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_holder(reports_dir: Path, holder: LockHolder) -> None:
    """Write the holder file atomically: a reader sees the old file, no file, or the whole new one."""
    staging = reports_dir / f"{_HOLDER_STAGING}{holder.pid}"
    staging.write_text(json.dumps(asdict(holder), sort_keys=True) + "\n", encoding="utf-8")
    os.replace(staging, reports_dir / HOLDER_NAME)


def _clear_leftovers(reports_dir: Path) -> None:
    """Delete staging files of holders killed while writing their holder file. Call under the lock."""
    for entry in reports_dir.glob(f"{_HOLDER_STAGING}*"):
        entry.unlink(missing_ok=True)


def _locked_error(path: Path, holder: LockHolder | None) -> ReportLockedError:
    if holder is None:
        who = "; it has not recorded itself yet, or has just finished"
        stop = ""
    else:
        who = f": {holder.describe()}"
        stop = f" (or stop it: kill {holder.pid})" if holder.host == socket.gethostname() else ""
    return ReportLockedError(f"another planner report run holds the lock on this reports folder{who}", where=path,
                             fix=f"wait for that run to finish{stop}, or schedule the cron jobs so that they do not "
                                 "overlap; nothing was written")


@contextlib.contextmanager
def report_lock(reports_dir: Path, *, wait_s: float = 0.0, command: str | None = None) -> Iterator[ReportLock]:
    """Hold ``reports_dir/.lock`` for the block, or raise :class:`ReportLockedError` (module docstring).

    ``wait_s`` is how long to wait for a held lock; the default, 0, tries once.
    """
    reports_dir = Path(reports_dir)
    path = reports_dir / LOCK_NAME
    created = [folder for folder in (reports_dir, *reports_dir.parents) if not folder.exists()]
    try:
        reports_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot use the reports folder: {exc.strerror or exc}", where=reports_dir,
                         fix="pass a folder this user can create and write with --reports") from exc
    lock = filelock.FileLock(path, preserve_lock_file=True)
    try:
        lock.acquire(timeout=wait_s, blocking=wait_s > 0)
    except filelock.Timeout:
        raise _locked_error(path, read_holder(reports_dir)) from None
    except OSError as exc:
        raise InputError(f"cannot lock the reports folder: {exc.strerror or exc}", where=path,
                         fix="pass a writable folder on a local file system with --reports") from exc
    try:
        stale = (read_holder(reports_dir) or UNREADABLE_HOLDER) if (reports_dir / HOLDER_NAME).exists() else None
        _clear_leftovers(reports_dir)
        holder = this_process(command)
        _write_holder(reports_dir, holder)
        try:
            yield ReportLock(reports_dir, path, holder, stale)
        finally:
            (reports_dir / HOLDER_NAME).unlink(missing_ok=True)
    except BaseException:
        if created and wait_s <= 0 and [p.name for p in reports_dir.iterdir()] == [LOCK_NAME]:
            path.unlink(missing_ok=True)  # still held: see the module docstring
        raise
    finally:
        lock.release()
        for folder in created:  # deepest first; only the ones this run made, and only if empty
            with contextlib.suppress(OSError):
                folder.rmdir()

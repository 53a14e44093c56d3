"""Reading and writing artefacts: input checks, all-or-none publication, and table I/O by extension.

**Inputs.** :func:`check_input_file` refuses a missing, unreadable or non-regular input (a
folder, a named pipe, a device) before anything opens it: reading a named pipe blocks
until some other process writes to it, which under cron means forever.

**Outputs, all or none.** A command that writes several files stages them with
:func:`staged_outputs`: each is written in full to a temporary file beside its
destination (a whole folder may be staged too), and only when every one is written are
they fsynced and renamed into place, one after another (``os.replace`` is atomic on
POSIX; the renames take microseconds, and SIGINT/SIGTERM wait until they are done). An
exception while writing removes every temporary file and the folders made for them, so
the earlier outputs stay byte-identical and no new file appears. :func:`atomic_path` is
the same for a single file.

**Modes.** Outputs get the modes any program's files get: ``0o666 & ~umask`` for files,
``0o777 & ~umask`` for folders (``tempfile.mkstemp`` would make them 0600).

**Leftovers.** A temporary name is ``.<name>.<pid>.<8 hex>.tmp``. A process killed while
writing (SIGKILL, out of memory, power loss) leaves one behind; the next staging in the
same folder removes those whose process is gone, and any older than a day (a pid can be
reused), never one that a live process is still writing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from planner.errors import InputError
from planner.run_state import RUN_STATE_KEYS as RUN_STATE_KEYS  # re-exported for the shell's writers
from planner.run_state import without_run_state as without_run_state

TABLE_SUFFIXES = (".csv", ".parquet")
LEFTOVER_MAX_AGE_S = 24 * 3600.0
_STAGED_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$")
_MKSTEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
"""The temporary names of earlier versions (``tempfile.mkstemp``): no pid, so only removed once a day old."""


# --------------------------------------------------------------------------- inputs
def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_input_file(path: str | Path, where: str | None = None) -> Path:
    """``path`` if it is an existing, readable regular file; else an InputError naming ``where`` (default: the path).

    Checked with ``stat`` first, so a named pipe or a device is refused without being opened.
    """
    path = Path(path)
    where = where or str(path)
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise InputError("file not found", where=where, fix="check the path") from None
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror or exc}", where=where,
                         fix="check the path and its permissions") from None
    if stat.S_ISDIR(mode):
        raise InputError("is a folder, not a file", where=where, fix="pass the path of a file inside it")
    if not stat.S_ISREG(mode):
        raise InputError(f"is {_kind(mode)}, not a regular file", where=where,
                         fix="write the data to a regular file first and pass that file")
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror or exc}", where=where,
                         fix="check the file's permissions: this user must be able to read it") from None
    return path


# --------------------------------------------------------------------------- modes
def current_umask() -> int:
    """This process's umask, read without changing it where the OS allows (Linux), else briefly swapped."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    # Elsewhere the only way is to set one and put it back; a file created meanwhile by another
    # thread gets the stricter 0o077, never a looser mode.
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def file_mode() -> int:
    return 0o666 & ~current_umask()


def folder_mode() -> int:
    return 0o777 & ~current_umask()


# --------------------------------------------------------------------------- leftovers
def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    except OverflowError:
        return False
    return True


def remove_leftovers(folder: str | Path, *, now: float | None = None) -> list[Path]:
    """Remove the temporary files (and folders) that killed writers left in ``folder``; return them.

    A staged name whose pid is not running any more is removed at once; one whose pid is
    alive is removed only when older than a day; an older version's name (no pid) likewise.
    """
    folder = Path(folder)
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _STAGED_NAME.match(entry.name)
        if match is None and not _MKSTEMP_NAME.match(entry.name):
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > LEFTOVER_MAX_AGE_S
        except OSError:
            continue
        gone = match is not None and not _process_alive(int(match.group("pid")))
        if not (old or gone):
            continue
        path = Path(entry.path)
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
    return removed


# --------------------------------------------------------------------------- staging
def _temporary_name(destination: Path) -> Path:
    return destination.with_name(f".{destination.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _fsync(path: Path, *, folder: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, so an interrupt cannot land between two renames.

    Only the main thread can set handlers (and only it runs them); elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    # A handler installed outside Python reads back as None and cannot be put back: leave it alone.
    previous = {sig: handler for sig in (signal.SIGINT, signal.SIGTERM)
                if (handler := signal.getsignal(sig)) is not None}
    for sig in previous:
        signal.signal(sig, lambda number, _frame: caught.append(number))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for number in dict.fromkeys(caught):
            signal.raise_signal(number)


@dataclass
class _Staged:
    destination: Path
    temporary: Path
    folder: bool


@dataclass
class StagedOutputs:
    """The files (and folders) of one run, written to temporary names until :meth:`commit` publishes them all."""

    staged: list[_Staged] = field(default_factory=list)
    made_folders: list[Path] = field(default_factory=list)
    cleaned: set[Path] = field(default_factory=set)

    @property
    def destinations(self) -> list[Path]:
        return [item.destination for item in self.staged]

    def _prepare(self, destination: str | Path) -> Path:
        destination = Path(destination)
        if any(item.destination == destination for item in self.staged):
            raise ValueError(f"{destination} is staged twice")
        missing = []
        parent = destination.parent
        while not parent.exists() and parent != parent.parent:
            missing.append(parent)
            parent = parent.parent
        for folder in reversed(missing):
            os.mkdir(folder, 0o777)  # the umask applies
            self.made_folders.append(folder)
        if destination.parent not in self.cleaned:
            remove_leftovers(destination.parent)
            self.cleaned.add(destination.parent)
        return destination

    def path(self, destination: str | Path) -> Path:
        """A new, empty temporary file beside ``destination`` to write it to; published by :meth:`commit`."""
        destination = self._prepare(destination)
        temporary = _temporary_name(destination)
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # the umask applies
        self.staged.append(_Staged(destination, temporary, folder=False))
        return temporary

    def folder(self, destination: str | Path) -> Path:
        """A new, empty temporary folder beside ``destination``; at commit it replaces ``destination`` as a whole."""
        destination = self._prepare(Path(destination).resolve())
        temporary = _temporary_name(destination)
        os.mkdir(temporary, 0o777)
        self.staged.append(_Staged(destination, temporary, folder=True))
        return temporary

    def write_bytes(self, destination: str | Path, data: bytes) -> Path:
        self.path(destination).write_bytes(data)
        return Path(destination)

    def write_text(self, destination: str | Path, text: str) -> Path:
        return self.write_bytes(destination, text.encode("utf-8"))

    def write_json(self, destination: str | Path, payload: Any) -> Path:
        return self.write_text(destination, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")

    def write_table(self, destination: str | Path, frame: pd.DataFrame) -> Path:
        """A DataFrame as CSV or Parquet, chosen by the destination's extension."""
        suffix = check_table_suffix(destination)
        write_table_to(self.path(destination), frame, suffix)
        return Path(destination)

    def write_with(self, destination: str | Path, writer: Callable[[Path], None]) -> Path:
        """``writer(temporary_path)`` writes the file (e.g. ``figure.savefig``)."""
        writer(self.path(destination))
        return Path(destination)

    def commit(self) -> None:
        """Flush every staged file to disk, then rename them all into place; folders replace theirs whole."""
        mode_file, mode_folder = file_mode(), folder_mode()
        for item in self.staged:
            if item.folder:
                for root, folders, files in os.walk(item.temporary):
                    for name in files:
                        os.chmod(Path(root, name), mode_file)
                        _fsync(Path(root, name))
                    for name in folders:
                        os.chmod(Path(root, name), mode_folder)
                    _fsync(Path(root), folder=True)
                os.chmod(item.temporary, mode_folder)
            else:
                os.chmod(item.temporary, mode_file)
                _fsync(item.temporary)
                if item.destination.is_dir():
                    raise InputError("is a folder; a file cannot replace it", where=item.destination,
                                     fix="remove the folder or choose another output path")
        replaced: dict[Path, Path] = {}  # destination folder -> where its previous version was moved
        with _signals_held():
            try:
                for item in self.staged:
                    if item.folder and item.destination.exists():
                        replaced[item.destination] = _temporary_name(item.destination)
                        os.rename(item.destination, replaced[item.destination])
                    os.replace(item.temporary, item.destination)
            except BaseException:
                for destination, aside in replaced.items():  # put back a folder whose replacement failed
                    if aside.exists() and not destination.exists():
                        os.rename(aside, destination)
                raise
        for parent in dict.fromkeys(item.destination.parent for item in self.staged):
            with contextlib.suppress(OSError):  # not every file system can fsync a folder
                _fsync(parent, folder=True)
        for aside in replaced.values():
            shutil.rmtree(aside, ignore_errors=True)

    def discard(self) -> None:
        """Remove every temporary file and folder, and the folders made for them (if still empty)."""
        for item in self.staged:
            with contextlib.suppress(OSError):
                if item.folder:
                    shutil.rmtree(item.temporary)
                else:
                    item.temporary.unlink(missing_ok=True)
        for folder in reversed(self.made_folders):
            with contextlib.suppress(OSError):
                folder.rmdir()


@contextlib.contextmanager
def staged_outputs() -> Iterator[StagedOutputs]:
    """Stage several outputs and publish them all when the block ends, or none if it raises.

    Usage::

        with staged_outputs() as outputs:
            outputs.write_table(plan_path, plan)
            outputs.write_json(json_path, meta)
        # both are in place here; after an exception neither changed
    """
    outputs = StagedOutputs()
    try:
        yield outputs
        outputs.commit()
    except BaseException:
        outputs.discard()
        raise


@contextlib.contextmanager
def atomic_path(destination: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``destination``; rename it into place on success (one-file staging)."""
    with staged_outputs() as outputs:
        yield outputs.path(destination)


def write_text_atomic(destination: str | Path, text: str) -> Path:
    with staged_outputs() as outputs:
        return outputs.write_text(destination, text)


def write_json_atomic(destination: str | Path, payload: Any) -> Path:
    with staged_outputs() as outputs:
        return outputs.write_json(destination, payload)


# --------------------------------------------------------------------------- tables
def check_table_suffix(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(
            f"unsupported table file type '{suffix or '(none)'}'",
            where=path,
            fix="name the file with a .csv or .parquet extension",
        )
    return suffix


def write_table_to(path: Path, frame: pd.DataFrame, suffix: str) -> None:
    """Write ``frame`` to ``path`` as ``suffix`` says (.csv or .parquet); the one table format of every output."""
    if suffix == ".csv":
        frame.to_csv(path, index=False, lineterminator="\n")
    else:
        frame.to_parquet(path, index=False)


def write_table_atomic(destination: str | Path, frame: pd.DataFrame) -> Path:
    """Write a DataFrame as CSV or Parquet (chosen by extension), atomically."""
    with staged_outputs() as outputs:
        return outputs.write_table(destination, frame)


def read_table(path: str | Path, where: str | None = None) -> pd.DataFrame:
    """Read a CSV or Parquet table, turning I/O failures into input errors (``where`` names the option)."""
    path = Path(path)
    suffix = check_table_suffix(path)
    check_input_file(path, where)
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        return pd.read_parquet(path)
    except (ValueError, OSError, pd.errors.ParserError) as exc:  # malformed file
        raise InputError(f"cannot read table: {exc}", where=where or path,
                         fix="check the file is a valid table") from exc


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

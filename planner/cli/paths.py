"""The files a command will read and write, checked before it does any work.

Every command calls :func:`check_paths` first, with its input files, its output files
and the folders it writes into, each under the option that names it. Exit code 3
promises that nothing was written, so a missing or unreadable input, an output that
cannot be written, or an output that would overwrite an input must all be found here,
before minutes of forecasting, solving or simulating, and never after.

What is refused (each error names the option and the path):

- an input that is missing, unreadable, a folder, or not a regular file (a named pipe
  would block the read forever; it is refused without being opened);
- an output whose folder is a file, or cannot be written by this user;
- an output that already exists as a folder (files) or as a file (folders);
- an output that is also an input (``forecast h.csv --out h.csv``), or two outputs
  that are the same file.

A missing parent folder of an output is not an error: the command creates it when it
publishes its outputs (and only then, so a run that fails creates nothing), provided
the nearest folder that does exist is writable.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from planner.errors import InputError
from planner.storage import check_input_file

Paths = Path | Iterable[Path] | None


def _each(named: Mapping[str, Paths] | None) -> list[tuple[str, Path]]:
    """(option, path) pairs, skipping options that were not given."""
    pairs = []
    for option, value in (named or {}).items():
        if value is None:
            continue
        for path in [value] if isinstance(value, (str, Path)) else value:
            pairs.append((option, Path(path)))
    return pairs


def where(option: str, path: Path) -> str:
    """'--out out/plan.csv' for an option, the bare path for a positional argument."""
    return f"{option} {path}" if option.startswith("-") else str(path)


def _nearest_existing(path: Path) -> Path:
    """``path`` itself, or the closest ancestor of it that exists."""
    path = Path(os.path.abspath(path))
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _check_folder_creatable(option: str, path: Path, folder: Path) -> Path:
    """The nearest folder of ``folder`` that exists, if no file stands in the way of creating ``folder``."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise InputError(f"cannot create a folder inside {existing}: it is a file, not a folder",
                         where=where(option, path), fix=f"choose a path for {option} under an existing folder")
    return existing


def _check_folder_writable(option: str, path: Path, folder: Path) -> None:
    """``folder`` (``path`` or the folder that will hold it) exists as a writable folder, or can be created."""
    existing = _check_folder_creatable(option, path, folder)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"the folder {existing} is not writable by this user", where=where(option, path),
                         fix=f"choose a writable location for {option}, or change the folder's permissions")


def _check_output_file(option: str, path: Path) -> None:
    if path.is_dir():
        raise InputError("is a folder, but the output is a file", where=where(option, path),
                         fix=f"pass a file path to {option}, e.g. {path / 'out.csv'}")
    _check_folder_writable(option, path, path.parent)


def _check_output_folder(option: str, path: Path) -> None:
    if os.path.lexists(path) and not path.is_dir():
        raise InputError("is a file, but the output is a folder", where=where(option, path),
                         fix=f"pass a folder path to {option}")
    _check_folder_writable(option, path, path)


def check_cache_folder(path: Path | None, option: str = "--cache-dir") -> None:
    """``path`` is a folder, or can become one: a file there (or on the way there) would leave every cache entry
    unwritten, so the run would redo its work on every call without saying why. A folder this user cannot
    write is not refused: a shared, read-only cache is still read."""
    if path is None:
        return
    if os.path.lexists(path) and not path.is_dir():
        raise InputError("is a file, but the calibration cache is a folder", where=where(option, path),
                         fix=f"pass a folder to {option} (it is created if missing), or leave {option} out")
    _check_folder_creatable(option, path, path)


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return a.resolve() == b.resolve()


def check_paths(*, inputs: Mapping[str, Paths] | None = None, outputs: Mapping[str, Paths] | None = None,
                folders: Mapping[str, Paths] | None = None) -> None:
    """Check every input file, output file and output folder (module docstring); raise the first problem.

    Each mapping goes from an option (``"--out"``; a positional argument by its name,
    ``"HISTORY"``) to a path, a list of paths, or None when the option was not given.
    ``outputs`` are files; ``folders`` are folders the command writes files into.
    """
    read = _each(inputs)
    written_files, written_folders = _each(outputs), _each(folders)
    for option, path in read:
        check_input_file(path, where(option, path))
    for option, path in written_files:
        _check_output_file(option, path)
    for option, path in written_folders:
        _check_output_folder(option, path)
    seen: list[tuple[str, Path]] = []
    for option, path in written_files + written_folders:
        for in_option, in_path in read:
            if _same(path, in_path):
                raise InputError(f"the output would overwrite the input {where(in_option, in_path)}",
                                 where=where(option, path), fix=f"write {option} to another file")
        for other_option, other in seen:
            if _same(path, other):
                raise InputError(f"the same file is also the output {where(other_option, other)}",
                                 where=where(option, path), fix=f"give {option} and {other_option} different paths")
        seen.append((option, path))


HISTOGRAM_PATTERNS = ("*.histogram.csv", "*.histogram.parquet")


def histogram_files(given: Iterable[Path] | None) -> list[Path]:
    """The ``--histogram`` files: each file as given, each folder's ``*.histogram.csv`` / ``.parquet`` files
    (sorted by name); a folder without one is an input error."""
    files: list[Path] = []
    for path in given or ():
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted({f for pattern in HISTOGRAM_PATTERNS for f in path.glob(pattern)})
        if not found:
            raise InputError("the folder holds no token-length histogram", where=where("--histogram", path),
                             fix="give the .histogram.csv files that `planner ingest` wrote, or their folder")
        files += found
    return files

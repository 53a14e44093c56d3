"""Reading and writing artefacts: atomic writes and table I/O by file extension.

Every output goes to a temporary file in the destination's folder and is then
renamed over the destination (``os.replace`` is atomic on POSIX), so a failed or
interrupted run never leaves a half-written file and never clobbers a good one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from planner.errors import InputError

TABLE_SUFFIXES = (".csv", ".parquet")


@contextlib.contextmanager
def atomic_path(destination: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``destination``; rename it into place on success.

    On any exception the temporary file is removed and the destination is untouched.
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent
    )
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, destination)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(destination: str | Path, text: str) -> Path:
    with atomic_path(destination) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(destination)


def write_json_atomic(destination: str | Path, payload: Any) -> Path:
    text = json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n"
    return write_text_atomic(destination, text)


def check_table_suffix(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(
            f"unsupported table file type '{suffix or '(none)'}'",
            where=path,
            fix="name the file with a .csv or .parquet extension",
        )
    return suffix


def write_table_atomic(destination: str | Path, frame: pd.DataFrame) -> Path:
    """Write a DataFrame as CSV or Parquet (chosen by extension), atomically."""
    suffix = check_table_suffix(destination)
    with atomic_path(destination) as tmp:
        if suffix == ".csv":
            frame.to_csv(tmp, index=False, lineterminator="\n")
        else:
            frame.to_parquet(tmp, index=False)
    return Path(destination)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV or Parquet table, turning I/O failures into input errors."""
    path = Path(path)
    suffix = check_table_suffix(path)
    if not path.exists():
        raise InputError("file not found", where=path, fix="check the path")
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        return pd.read_parquet(path)
    except (ValueError, OSError, pd.errors.ParserError) as exc:  # malformed file
        raise InputError(f"cannot read table: {exc}", where=path, fix="check the file is a valid table") from exc


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


RUN_STATE_KEYS = frozenset({"cached", "cache", "seconds"})
"""Keys that say how a run got its figures (cache hits, wall-clock seconds), not what they are."""


def without_run_state(value: Any, keys: frozenset[str] = RUN_STATE_KEYS) -> Any:
    """``value`` (nested dicts and lists) without ``keys``: what goes to files that must be byte-identical
    for the same inputs and seed, whatever the cache held and however long the run took."""
    if isinstance(value, dict):
        return {k: without_run_state(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without_run_state(v, keys) for v in value]
    return value

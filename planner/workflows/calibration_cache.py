"""The calibration cache as a folder of JSON files, one per unit, named by its cache key, and a ``probes``
folder of the replications its searches simulated (:mod:`planner.calibrate.probe_memo`), one file per probe.

Implements :class:`planner.calibrate.cache.CalibrationStore`. Entries are written atomically
(temporary file, then rename). An entry that cannot be read, is not JSON, or does not carry
the expected key, version and fields counts as absent, so the unit is calibrated again and
its entry rewritten: a damaged cache costs time, never a crash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planner.calibrate.cache import entry_payload, entry_result
from planner.calibrate.inputs import UnitTask
from planner.calibrate.pools import PoolTask
from planner.calibrate.probe_memo import PROBE_MEMO_VERSION, Row, decode_rows, encode_rows
from planner.storage import write_json_atomic


def entry_path(cache_dir: Path, key: str) -> Path:
    """Where the entry for ``key`` lives in ``cache_dir``."""
    return Path(cache_dir) / f"{key}.json"


class FolderStore:
    """Calibrated units kept as ``<key>.json`` files in one folder (made on the first write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.probes = FolderProbeStore(self.directory / "probes")

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached result for ``key``, or None when absent or unusable (see the module docstring)."""
        try:
            payload = json.loads(entry_path(self.directory, key).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        return entry_result(payload, key)

    def put(self, task: UnitTask | PoolTask, result: dict[str, Any]) -> str:
        """Store one unit's (or its larger pools') result; returns '' or, when the cache cannot be written,
        why (the run goes on)."""
        try:
            write_json_atomic(entry_path(self.directory, task.key), entry_payload(task, result))
        except OSError as exc:
            return f"cache entry for {task.label} not written: {exc}"
        return ""


class FolderProbeStore:
    """Probes' replication rows kept as ``<key>.json`` files in one folder (made on the first write). Workers in
    other processes share it: an entry is written whole (temporary file, then rename), and two workers writing the
    same key write the same rows, since a replication is a function of its key."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def get(self, key: str) -> list[Row] | None:
        try:
            payload = json.loads(entry_path(self.directory, key).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if not isinstance(payload, dict) or payload.get("version") != PROBE_MEMO_VERSION or payload.get("key") != key:
            return None
        return decode_rows(payload.get("rows"))

    def put(self, key: str, rows: list[Row]) -> None:
        try:
            write_json_atomic(entry_path(self.directory, key),
                              {"version": PROBE_MEMO_VERSION, "key": key, "rows": encode_rows(rows)})
        except OSError:
            pass  # a probe not kept costs a simulation later, never an answer


def folder_store(cache_dir: Path | None) -> FolderStore | None:
    """The store of a resolved cache folder; None (no cache) when the run does not use one."""
    return FolderStore(cache_dir) if cache_dir is not None else None

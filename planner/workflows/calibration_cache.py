"""The calibration cache as a folder of JSON files, one per unit, named by its cache key.

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
from planner.storage import write_json_atomic


def entry_path(cache_dir: Path, key: str) -> Path:
    """Where the entry for ``key`` lives in ``cache_dir``."""
    return Path(cache_dir) / f"{key}.json"


class FolderStore:
    """Calibrated units kept as ``<key>.json`` files in one folder (made on the first write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

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


def folder_store(cache_dir: Path | None) -> FolderStore | None:
    """The store of a resolved cache folder; None (no cache) when the run does not use one."""
    return FolderStore(cache_dir) if cache_dir is not None else None

"""Where the bundled data lives, so commands have sensible defaults from any working directory."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The bundled data folder; ``PLANNER_DATA_DIR`` overrides it."""
    return Path(os.environ.get("PLANNER_DATA_DIR", PROJECT_ROOT / "data"))


def catalog_dir() -> Path:
    return data_dir() / "catalog"


def profiles_dir() -> Path:
    return data_dir() / "profiles"

"""Shared fixtures: where the bundled data and the read-only shared data live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """The public reference data beside the checkout (``../shared/data``), or ``PLANNER_SHARED_DIR``."""
    env = os.environ.get("PLANNER_SHARED_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "data")
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"shared data not found in any of {candidates}; set PLANNER_SHARED_DIR")


@pytest.fixture(autouse=True)
def _private_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test records runs in, and caches calibrations under, its own folder, never the user's."""
    state = tmp_path_factory.mktemp("planner-state")
    monkeypatch.setenv("PLANNER_HISTORY", str(state / "history.duckdb"))
    monkeypatch.setenv("PLANNER_CACHE_DIR", str(state / "cache"))


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT

"""Shared fixtures: where the bundled data lives, and a private run history and cache per test.

Every file a test reads is inside the checkout: the vendored public tables in
``data/sources/`` and the real request traces in ``data/samples/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (a seed in, the same results out), so a suite's time and
# verdict never depend on which examples a run happened to draw.
settings.register_profile("planner", derandomize=True)
settings.load_profile("planner")

REPO_ROOT = Path(__file__).resolve().parents[1]


def sources_dir() -> Path:
    """The vendored public source tables (price snapshots, GPU specs, ServeGen rates): ``data/sources/``."""
    return REPO_ROOT / "data" / "sources"


def samples_dir() -> Path:
    """The real request traces bundled for ingest and the demo history: ``data/samples/``."""
    return REPO_ROOT / "data" / "samples"


@pytest.fixture(autouse=True)
def _private_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test records runs in, and caches calibrations under, its own folder, never the user's."""
    state = tmp_path_factory.mktemp("planner-state")
    monkeypatch.setenv("PLANNER_HISTORY", str(state / "history.duckdb"))
    monkeypatch.setenv("PLANNER_CACHE_DIR", str(state / "cache"))


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT

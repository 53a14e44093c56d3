"""The vendored public sources in ``data/sources/``: every folder carries its licence, and the
data dictionary lists each one with its true size and scripts and tests that really exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO_ROOT, sources_dir

SECTION = REPO_ROOT / "data" / "README.d" / "55-sources.md"
DATA_README = REPO_ROOT / "data" / "README.md"
# What each folder's licence file or note must say: the licence's own name, or, for the price
# tables, that upstream publishes none.
LICENCE_WORDS = {
    "gpu_pricing_skypilot": "has no LICENSE file",
    "gpu_specs_epoch": "CC BY 4.0",
    "servegen_aggregate": "Apache License",
    "vidur_profiling": "MIT License",
}


def _folders() -> list[Path]:
    return sorted(p for p in sources_dir().iterdir() if p.is_dir())


def _table() -> dict[str, list[str]]:
    """Rows of the section's table keyed by folder name: (what, size, origin, licence, used by)."""
    rows = {}
    for line in SECTION.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `([a-z_]+)/` \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def test_the_vendored_folders_are_the_documented_ones():
    assert [p.name for p in _folders()] == sorted(LICENCE_WORDS)
    assert sorted(_table()) == sorted(LICENCE_WORDS)


@pytest.mark.parametrize("name", sorted(LICENCE_WORDS))
def test_every_folder_carries_its_licence_beside_the_data(name):
    folder = sources_dir() / name
    notes = [p for p in folder.iterdir() if p.name.startswith(("LICENSE", "NOTE"))]
    data = [p for p in folder.iterdir() if p not in notes]
    assert notes and data, f"{folder} needs its data and a LICENSE or NOTE file"
    assert any(LICENCE_WORDS[name] in p.read_text(encoding="utf-8") for p in notes), name


@pytest.mark.parametrize("name", sorted(LICENCE_WORDS))
def test_the_documented_size_is_the_folder_size(name):
    total_bytes = sum(p.stat().st_size for p in (sources_dir() / name).iterdir())
    assert _table()[name][1] == f"{round(total_bytes / 1024)} KB"


@pytest.mark.parametrize("name", sorted(LICENCE_WORDS))
def test_the_scripts_and_tests_named_as_users_exist(name):
    used_by = _table()[name][4]
    paths = re.findall(r"`((?:data|tests|benchmarks)/[^`]+)`", used_by)
    assert paths, used_by
    for path in paths:
        assert (REPO_ROOT / path).exists(), path
    # short names (a sibling module of a build script) live beside the scripts
    for module in re.findall(r"`([a-z_]+\.py)`", used_by):
        assert (REPO_ROOT / "data" / "build" / module).is_file(), module


def test_the_section_is_part_of_the_data_dictionary():
    assert SECTION.read_text(encoding="utf-8") in DATA_README.read_text(encoding="utf-8")

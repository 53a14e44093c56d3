"""The package metadata builds without setuptools' deprecation warnings (a licence as an SPDX expression)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_licence_is_an_spdx_expression_with_its_file_and_a_setuptools_that_reads_it():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"  # a TOML table is deprecated (setuptools >= 77)
    for name in project["project"]["license-files"]:
        assert "Apache License" in (REPO / name).read_text()[:200]
    (setuptools,) = [r for r in project["build-system"]["requires"] if r.startswith("setuptools")]
    assert tuple(int(x) for x in re.findall(r"\d+", setuptools)[:1]) >= (77,)  # the first to read SPDX strings


def test_the_editable_install_is_a_path_entry_so_setuptools_does_not_warn():
    """setuptools installs a flat-layout package in editable mode through an import finder and warns on every
    install ("Please be careful with folders in your working directory..."); with the root mapped explicitly it
    writes a plain ``.pth`` path entry and says nothing."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["package-dir"] == {"": "."}
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["planner*"]

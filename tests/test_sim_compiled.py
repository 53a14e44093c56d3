"""The simulator's compiled-code cache: one folder per build, the warm check, and the one-time notice."""

from __future__ import annotations

import re
from pathlib import Path

import numba

from planner.sim import compiled


def test_fingerprint_changes_with_any_edit_addition_or_rename(tmp_path):
    a, b = tmp_path / "replica", tmp_path / "policies"
    a.mkdir()
    b.mkdir()
    (a / "engine.py").write_text("x = 1\n")
    (b / "keys.py").write_text("y = 2\n")
    first = compiled.source_fingerprint([a, b])
    assert compiled.source_fingerprint([b, a]) == first  # the order of the folders does not matter
    (b / "keys.py").write_text("y = 3\n")
    edited = compiled.source_fingerprint([a, b])
    (a / "heap.py").write_text("")
    added = compiled.source_fingerprint([a, b])
    (a / "heap.py").rename(a / "trail.py")
    renamed = compiled.source_fingerprint([a, b])
    assert len({first, edited, added, renamed}) == 4


def test_every_module_with_compiled_code_is_in_the_fingerprint():
    """An edit to a module outside COMPILED_PACKAGES would not change the cache folder: stale code."""
    sim = Path(compiled.__file__).parent
    pattern = re.compile(r"^@(njit|jit|inlined|intrinsic|overload)\b|^\s*\w+ = njit\(", re.MULTILINE)
    compiling = {p.relative_to(sim) for p in sim.rglob("*.py") if pattern.search(p.read_text())}
    assert compiling, "the pattern found no compiled function at all"
    outside = sorted(str(p) for p in compiling if p.parts[0] not in compiled.COMPILED_PACKAGES)
    assert not outside


def test_numba_caches_the_simulator_in_this_builds_folder():
    folder = compiled.cache_dir()
    assert numba.config.CACHE_DIR == str(folder)
    assert folder.name.startswith(compiled.FOLDER_PREFIX)
    compiled.compile_engine()
    assert compiled.is_warm()
    assert list(folder.rglob("engine.run_pool-*.nbi")), "run_pool was not cached in the build folder"


def test_prepare_announces_and_compiles_only_on_a_cold_cache(monkeypatch):
    calls: list[object] = []
    monkeypatch.setattr(compiled, "compile_engine", lambda: calls.append("compile"))
    monkeypatch.setattr(compiled, "is_warm", lambda: False)
    assert compiled.prepare(calls.append) is True
    assert calls == [compiled.COLD_COMPILE_S, "compile"]
    calls.clear()
    monkeypatch.setattr(compiled, "is_warm", lambda: True)
    assert compiled.prepare(calls.append) is False
    assert calls == []

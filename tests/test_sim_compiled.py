"""The simulator's compiled-code cache: one folder per build, the warm check, and the one-time notice."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numba
import pandas as pd
import pytest

from planner import compile_ahead as ahead
from planner import compiled_cache as compiled
from planner.errors import ExitCode

NOTICE = "compiling the simulator (one time, about"
P = "2026-11-02T18:00:00Z"


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
    sim = compiled.PACKAGE_DIR
    pattern = re.compile(r"^@(njit|jit|inlined|intrinsic|overload)\b|^\s*\w+ = njit\(", re.MULTILINE)
    compiling = {p.relative_to(sim) for p in sim.rglob("*.py") if pattern.search(p.read_text())}
    assert compiling, "the pattern found no compiled function at all"
    outside = sorted(str(p) for p in compiling if p.parts[0] not in compiled.COMPILED_PACKAGES)
    assert not outside


def test_numba_caches_the_simulator_in_this_builds_folder():
    folder = compiled.cache_dir()
    assert numba.config.CACHE_DIR == str(folder)
    assert folder.name.startswith(compiled.FOLDER_PREFIX)
    ahead.compile_engine()
    assert ahead.is_warm()
    assert list(folder.rglob("engine.run_pool-*.nbi")), "run_pool was not cached in the build folder"


def test_prepare_announces_and_compiles_only_on_a_cold_cache(monkeypatch):
    calls: list[object] = []
    monkeypatch.setattr(ahead, "compile_engine", lambda: calls.append("compile"))
    monkeypatch.setattr(ahead, "is_warm", lambda: False)
    assert ahead.prepare(calls.append) is True
    assert calls == [ahead.COLD_COMPILE_S, "compile"]
    calls.clear()
    monkeypatch.setattr(ahead, "is_warm", lambda: True)
    assert ahead.prepare(calls.append) is False
    assert calls == []


def _plan(tmp_path: Path) -> Path:
    plan = pd.DataFrame([
        {"period": P, "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-70b", "tier": "on_demand",
         "replicas": 2, "gpus": 8, "usd": 0.0},
        {"period": P, "region": "gcp:europe-west4", "sku": "L4", "model": "llama-3.1-8b", "tier": "on_demand",
         "replicas": 2, "gpus": 2, "usd": 0.0},
    ])
    flows = pd.DataFrame(
        [{"period": P, "origin": "us-east", "region": "aws:us-east-1", "model": "llama-3.1-70b",
          "traffic_class": k, "rps": r} for k, r in (("interactive", 1.0), ("standard", 0.5), ("batch", 0.2))]
        + [{"period": P, "origin": "eu-west", "region": "gcp:europe-west4", "model": "llama-3.1-8b",
            "traffic_class": k, "rps": 0.3} for k in ("interactive", "standard")])
    plan.to_csv(tmp_path / "plan.csv", index=False)
    flows.to_csv(tmp_path / "plan.flows.csv", index=False)
    return tmp_path / "plan.csv"


@pytest.mark.slow
def test_first_simulate_says_it_compiles_once_and_a_warm_one_says_nothing(repo_root, tmp_path):
    """Two real `planner simulate` processes on an empty numba cache; the first has 2 worker processes."""
    cache = tmp_path / "numba"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    args = [sys.executable, "-m", "planner", "simulate", "--scenario", str(repo_root / "scenarios/demo.toml"),
            "--plan", str(_plan(tmp_path)), "--sim-duration", "5min", "--replications", "2", "--seed", "3",
            "--engine", "processes", "--workers", "2"]
    runs = [subprocess.run([*args, "--out", str(tmp_path / f"sim{i}.csv")], env=env, capture_output=True,
                           text=True, timeout=600) for i in (1, 2)]
    for run in runs:
        assert run.returncode in (0, ExitCode.SLO_FAILED), run.stderr
    assert runs[0].stderr.count(NOTICE) == 1  # the parent compiled; its workers loaded the cache silently
    assert NOTICE not in runs[1].stderr
    assert (tmp_path / "sim1.csv").read_bytes() == (tmp_path / "sim2.csv").read_bytes()

    builds = list(cache.glob(f"{compiled.FOLDER_PREFIX}*"))
    assert len(builds) == 1 and list(cache.iterdir()) == builds  # everything in this build's folder
    indexes = {p.name.removesuffix(".nbi") for p in builds[0].rglob("*.nbi")}
    overloads = Counter(p.name.rsplit(".", 2)[0] for p in builds[0].rglob("*.nbc"))
    assert any(name.startswith("engine.run_pool-") for name in indexes)
    # one compiled specialisation per function: a second one is compile time spent twice
    assert {name: n for name, n in overloads.items() if n != 1} == {}
    assert set(overloads) == indexes

"""The simulator's compiled code: where numba caches it, whether it is there, and compiling it ahead.

This is infrastructure (files, environment, the numba configuration), kept out of the pure
``planner.sim`` package, which only calls :func:`use_cache_dir` before it defines compiled code.

The simulator's loops are compiled by numba on first use (``cache=True``) and cached on
disk, so only the first simulation after an install or an edit pays the compile (about
:data:`COLD_COMPILE_S` seconds, measured on 2 cores with ``benchmarks/compile_time.py``);
later processes, worker processes included, load the cached machine code in well under
a second.

**Where.** One folder per build of the simulator, ``<root>/planner-sim-<fingerprint>``,
with the root ``$NUMBA_CACHE_DIR`` when that is set, else the ``__pycache__`` folder of
``planner/sim``, else (a read-only install) ``$XDG_CACHE_HOME/planner`` or
``~/.cache/planner``. The fingerprint hashes every source file of the packages that
define compiled functions (:data:`COMPILED_PACKAGES`), the Python and numba versions and
the CPU, so any edit, upgrade or other machine gets a folder of its own.

**Why a folder per build.** numba keys each cached function on the source of the file
that defines it, but the replica engine's ``run_pool`` inlines and links code from every
module of ``replica/`` and ``policies/`` (and the queue engine from ``policies/``): with
numba's per-file keys an edit to, say, ``batching.py`` leaves a stale compiled
``run_pool`` in the cache (checked with numba 0.68). A folder keyed on all those sources
cannot be stale, and it needs only numba's public ``CACHE_DIR`` setting, which
:func:`use_cache_dir` points at it before any compiled function is defined. A custom
cache locator could stamp each function with all those sources instead, but it would
subclass numba internals (``numba.core.caching``) and be installed either through
numba's private locator list or through ``NUMBA_CACHE_LOCATOR_CLASSES``, an environment
variable that must be set before numba starts. ``CACHE_DIR`` is process-wide: any other
library's numba cache in a planner process lands in the same folder, which is harmless.

**Warm or cold.** :func:`compile_engine` compiles the replica engine (everything
``planner simulate`` and ``planner calibrate`` run) on a tiny pool and then writes a
marker file; :func:`is_warm` checks for it. :func:`prepare` is what a command calls
before it simulates: on a cold cache it announces the compile through a callback (only
the CLI talks to the terminal) and compiles here, once, so that worker processes find
the cache warm instead of each compiling on its own.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent / "sim"
"""The simulator package: its sources are fingerprinted, and its ``__pycache__`` holds the cache."""
COMPILED_PACKAGES = ("policies", "queue", "replica")
"""The packages of ``planner.sim`` whose modules define compiled functions."""
COLD_COMPILE_S = 12
"""The replica engine's cold compile, in seconds, as announced: the median first call of
``benchmarks/compile_time.py`` on a shared 2-core machine was 11.6 s of wall time (9.6 s to
15 s as the other load on the machine varied)."""
FOLDER_PREFIX = "planner-sim-"
MARKER = "replica-engine.compiled"


def source_fingerprint(dirs: Iterable[Path]) -> str:
    """SHA-256 (hex) of the names and contents of every ``.py`` file in ``dirs``, in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(p for d in dirs for p in Path(d).glob("*.py")):
        digest.update(f"{path.parent.name}/{path.name}\0".encode())
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _build_fingerprint() -> str:
    """The simulator sources, Python, numba and the CPU numba compiles for."""
    import llvmlite.binding as llvm
    import numba

    digest = hashlib.sha256(source_fingerprint(PACKAGE_DIR / name for name in COMPILED_PACKAGES).encode())
    for part in (platform.python_version(), numba.__version__, llvm.get_process_triple(), llvm.get_host_cpu_name()):
        digest.update(f"\0{part}".encode())
    return digest.hexdigest()[:16]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _default_root() -> Path:
    """The simulator package's ``__pycache__`` where it can be written, else the user's cache folder."""
    in_tree = PACKAGE_DIR / "__pycache__"
    if _writable(in_tree):
        return in_tree
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "planner"


@functools.cache
def cache_dir() -> Path:
    """The folder of this build's compiled code (see the module docstring); the same in every process."""
    import numba

    configured = numba.config.CACHE_DIR  # type: ignore[attr-defined]  # numba sets its config attributes at import
    root = Path(configured) if configured else _default_root()
    return root / f"{FOLDER_PREFIX}{_build_fingerprint()}"


def use_cache_dir() -> None:
    """Make numba cache every function defined from now on in :func:`cache_dir` (idempotent).

    Called by ``planner/sim/jit.py``, before any module defines a compiled function:
    numba fixes a function's cache folder when the function is defined.
    """
    import numba

    numba.config.CACHE_DIR = str(cache_dir())  # type: ignore[attr-defined]  # see cache_dir()


def is_warm() -> bool:
    """Whether the replica engine's compiled code for this build is in the cache."""
    return (cache_dir() / MARKER).is_file()


def compile_engine() -> None:
    """Compile (or load from the cache) the replica engine in this process, then mark the cache warm.

    Runs one replication of a tiny pool: the engine has one signature whatever the pool,
    policy or router (its state arrays have fixed types, and the policy and router are
    integer codes read at run time), so this compiles exactly what any simulation runs.
    """
    import numpy as np

    from planner.profiles.step_model import StepModel
    from planner.sim.policies import get_policy
    from planner.sim.replica.pool import ClassSpec, PoolConfig, ReplicaSpec, run_replication
    from planner.sim.workload import default_workload
    from planner.slo import ClassSlo

    replica = ReplicaSpec("compile", 1, StepModel.linear(10.0, 1e-4, 0.05), kv_capacity_tokens=50_000, max_batch=8)
    klass = ClassSpec("interactive", 1.0, 1.0, 0.0, 1024.0, 1e4, ClassSlo(ttft_p99_ms=1e4, e2e_p99_ms=1e5),
                      default_workload("interactive", "llama-3.1-8b"))
    run_replication(PoolConfig((replica,), (klass,), get_policy("fcfs"), duration_s=10.0, warmup_s=1.0),
                    np.random.SeedSequence(0))
    folder = cache_dir()
    staged = folder / f".{MARKER}.{os.getpid()}"
    try:
        staged.write_text("compiled\n")
        os.replace(staged, folder / MARKER)
    except OSError:  # numba fell back to another folder it can write; the next run compiles nothing but says so
        pass


def prepare(announce: Callable[[float], None] | None = None) -> bool:
    """Compile the replica engine now if its cache is cold, first calling ``announce(expected_s)``.

    Returns whether it compiled. On a warm cache it does nothing: each process loads the
    engine when it first simulates.
    """
    if is_warm():
        return False
    if announce is not None:
        announce(COLD_COMPILE_S)
    compile_engine()
    return True

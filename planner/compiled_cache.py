"""Where numba caches the simulator's compiled code.

This is infrastructure (files, environment, the numba configuration), kept out of the pure
``planner.sim`` package, whose ``jit`` module calls :func:`use_cache_dir` before any compiled
code is defined. Compiling ahead of the first use is :mod:`planner.compile_ahead`.

The simulator's loops are compiled by numba on first use (``cache=True``) and cached on
disk, so only the first simulation after an install or an edit pays the compile (about
:data:`planner.compile_ahead.COLD_COMPILE_S` seconds, measured on 2 cores with
``benchmarks/compile_time.py``);
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
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import tempfile
from collections.abc import Iterable
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent / "sim"
"""The simulator package: its sources are fingerprinted, and its ``__pycache__`` holds the cache."""
COMPILED_PACKAGES = ("policies", "queue", "replica")
"""The packages of ``planner.sim`` whose modules define compiled functions."""
FOLDER_PREFIX = "planner-sim-"


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

"""numba's on-disk cache for the replica engine, invalidated by any change to what it compiles.

numba keys a cached function on the source of the file that defines it. The engine's
``run_pool`` (engine.py) inlines or links functions from every module of this package and
from ``planner/sim/policies``, so an edit to, say, ``batching.py`` would otherwise leave a
stale compiled ``run_pool`` in ``__pycache__`` (checked: it does, with numba 0.68).

:class:`PackageStamp` makes the source stamp of every function defined in this package the
SHA-256 of all ``.py`` files of this package and of the policies package together, so an
edit to any of them recompiles the engine on next use. It is registered at the front of
numba's locator list when the package is imported (``__init__.py``) and declines files
outside the package, which keep numba's own locators.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from numba.core.caching import CacheImpl, InTreeCacheLocator, UserProvidedCacheLocator, UserWideCacheLocator

PACKAGE_DIR = Path(__file__).resolve().parent
STAMPED_DIRS = (PACKAGE_DIR, PACKAGE_DIR.parent / "policies")


@functools.lru_cache(maxsize=8)
def _stamp(files: tuple[tuple[str, float, int], ...]) -> bytes:
    digest = hashlib.sha256()
    for path, _, _ in files:
        digest.update(path.encode())
        digest.update(Path(path).read_bytes())
    return digest.digest()


def package_stamp() -> bytes:
    """SHA-256 over the sources compiled into the engine (memoised on paths, mtimes and sizes)."""
    paths = sorted(p for d in STAMPED_DIRS for p in d.glob("*.py"))
    return _stamp(tuple((str(p), p.stat().st_mtime, p.stat().st_size) for p in paths))


class PackageStamp:
    """Mixin for numba's source-file locators: the package-wide stamp, for this package only."""

    def get_source_stamp(self) -> bytes:
        return package_stamp()

    @classmethod
    def from_function(cls, py_func, py_file):  # type: ignore[no-untyped-def]
        if Path(py_file).resolve().parent != PACKAGE_DIR:
            return None
        return super().from_function(py_func, py_file)  # type: ignore[misc]


class StampedUserProvidedLocator(PackageStamp, UserProvidedCacheLocator):
    """``NUMBA_CACHE_DIR`` when set."""


class StampedInTreeLocator(PackageStamp, InTreeCacheLocator):
    """The package's ``__pycache__``."""


class StampedUserWideLocator(PackageStamp, UserWideCacheLocator):
    """The user's cache directory when ``__pycache__`` is not writable."""


def register() -> None:
    """Put the stamped locators first in numba's list (idempotent)."""
    ours = [StampedUserProvidedLocator, StampedInTreeLocator, StampedUserWideLocator]
    classes = CacheImpl._locator_classes
    if classes[: len(ours)] != ours:
        classes[:] = ours + [c for c in classes if c not in ours]

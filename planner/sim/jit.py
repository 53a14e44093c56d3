"""numba's ``njit`` for the simulator, with numba's cache folder set before any compiled function exists.

numba fixes a function's cache folder when the function is defined, so every simulator module
that defines a compiled function takes ``njit`` from here: importing this module points the
cache at the folder of this build (:func:`planner.compiled_cache.use_cache_dir`) first. Modules
that only describe policies or read results import no numba at all, which keeps commands that
never simulate (``validate``, ``forecast``, ``place``) quick to start.
"""

from __future__ import annotations

from planner.compiled_cache import use_cache_dir

use_cache_dir()

from numba import njit  # noqa: E402  (the cache folder must be set first)

__all__ = ["njit"]

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

from collections.abc import Callable  # noqa: E402
from typing import Any, TypeVar, cast  # noqa: E402

from numba import njit  # noqa: E402  (the cache folder must be set first)

__all__ = ["compiled_only", "njit"]

_Function = TypeVar("_Function", bound=Callable[..., Any])


def compiled_only(fn: _Function) -> _Function:
    """``njit(cache=True)`` for a function called from compiled code only: numba builds it no Python
    entry point, which it would otherwise compile (and unbox every argument in) for nothing."""
    options = {"cache": True, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
    return cast(_Function, njit(**options)(fn))  # type: ignore[call-overload]  # options numba's stubs omit

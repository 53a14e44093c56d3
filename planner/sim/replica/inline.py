"""How the replica engine's per-event helpers are inlined: into compiled functions, never into each other.

The event loop's helpers (one replica's step, a heap operation, a queue move) are inlined
into their caller at numba's IR level: a real call would pass the 28-array state tuple
by value, which costs the loop more than twice its run time. numba inlines a helper by
copying its IR, and before copying it first inlines the helper's own helpers into it.
That copy costs time quadratic in the size of what is copied (each block is copied with
the whole variable scope), so with helpers inside helpers (``run_pool`` ← ``start_step``
← ``_candidate`` ← ``heap_clean_top`` ← ``heap_pop``) inlining alone would take about 5 s
of the one-time compile.

:func:`inlined` inlines a helper only into a function that numba compiles on its own
(the event loop, ``preempt``, ``make_room``). The nested helpers then reach that function
as calls in the code just inlined, and are inlined there in turn, each copied at its own
small size. The code that results is the same; only the order of the copies changes.
The rule uses numba's public inlining cost model (``inline=`` a function of the call,
the caller's IR and the callee's IR).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from planner.sim.jit import njit

_HELPERS: set[Callable[..., Any]] = set()
"""The Python functions of every :func:`inlined` helper."""


def _into_compiled_function(call: Any, caller_ir: Any, callee_ir: Any) -> bool:
    """numba's cost model: inline when the caller is compiled on its own, not another helper."""
    return caller_ir.func_id.func not in _HELPERS


def inlined(fn: Callable[..., Any]) -> Any:
    """Compile ``fn`` as a helper that numba inlines into the compiled functions that call it."""
    _HELPERS.add(fn)
    return njit(cache=True, inline=_into_compiled_function)(fn)

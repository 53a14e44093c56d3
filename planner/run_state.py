"""What a run's figures say about how they were obtained (cache hits, wall-clock seconds), not what they are.

Files that must be byte-identical for the same inputs and seed leave these keys out,
whatever the cache held and however long the run took.
"""

from __future__ import annotations

from typing import Any

RUN_STATE_KEYS = frozenset({"cached", "cache", "seconds"})
"""Keys that say how a run got its figures (cache hits, wall-clock seconds), not what they are."""


def without_run_state(value: Any, keys: frozenset[str] = RUN_STATE_KEYS) -> Any:
    """``value`` (nested dicts and lists) without ``keys``: what goes to files that must be byte-identical
    for the same inputs and seed, whatever the cache held and however long the run took."""
    if isinstance(value, dict):
        return {k: without_run_state(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without_run_state(v, keys) for v in value]
    return value

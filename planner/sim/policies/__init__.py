"""Scheduling policies behind one registry, shared by the queue-level and replica-level engines.

Each policy lives in its own module with its one-line rule, its reference, its
:class:`PolicySpec` and a numba key function; :mod:`.keys` dispatches on the stable
integer code inside compiled loops, and :mod:`.drr` holds the Deficit Round Robin
class arbiter used by ``drr-fcfs`` and ``drr-wspt``.
"""

from __future__ import annotations

from planner.errors import InputError
from planner.sim.policies import cmu, drr, fcfs, priority_aging, srpt, wspt
from planner.sim.policies.base import (
    CMU,
    DRR_FCFS,
    DRR_WSPT,
    FCFS,
    PRIORITY_AGING,
    SRPT,
    WSPT,
    PolicySpec,
)

POLICIES: dict[str, PolicySpec] = {
    spec.name: spec
    for spec in (
        fcfs.SPEC,
        cmu.SPEC,
        wspt.SPEC,
        srpt.SPEC,
        priority_aging.SPEC,
        drr.SPEC_FCFS,
        drr.SPEC_WSPT,
    )
}


def get_policy(name: str) -> PolicySpec:
    """Look a policy up by name; an unknown name is an :class:`InputError` listing the valid ones."""
    key = name.strip().lower()
    if key not in POLICIES:
        raise InputError(
            f"unknown scheduling policy '{name}'",
            where="policy.name",
            fix=f"use one of: {', '.join(POLICIES)}",
        )
    return POLICIES[key]


__all__ = [
    "CMU",
    "DRR_FCFS",
    "DRR_WSPT",
    "FCFS",
    "POLICIES",
    "PRIORITY_AGING",
    "SRPT",
    "WSPT",
    "PolicySpec",
    "get_policy",
]

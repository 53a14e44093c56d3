"""The scheduling policies the planner knows, by name: the one list every other module reads.

A policy module declares a :class:`~planner.sim.policies.base.PolicySpec`; one line in
:data:`POLICIES` (or :func:`register`) makes it valid in a scenario, on the command line and
in both engines.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.errors import InputError
from planner.sim.policies import cmu, drr_fcfs, drr_wspt, fcfs, priority_aging, srpt, wspt
from planner.sim.policies.base import PolicySpec

POLICIES: dict[str, PolicySpec] = {
    spec.name: spec
    for spec in (
        fcfs.SPEC,
        cmu.SPEC,
        wspt.SPEC,
        srpt.SPEC,
        priority_aging.SPEC,
        drr_fcfs.SPEC,
        drr_wspt.SPEC,
    )
}


def register(spec: PolicySpec) -> PolicySpec:
    """Add ``spec`` under its name (a policy defined outside this package); a taken name is an error."""
    if spec.name in POLICIES and POLICIES[spec.name] is not spec:
        raise ValueError(f"a policy named '{spec.name}' is already registered")
    POLICIES[spec.name] = spec
    return spec


def policy_names() -> tuple[str, ...]:
    """Every registered policy name, in registration order."""
    return tuple(POLICIES)


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


def policy_values(given: Mapping[str, object]) -> dict[str, float]:
    """The values in ``given`` of every registered policy's parameters, by name (sorted).

    ``given`` is the scenario's parameter table (``Scenario.policy.params.model_dump()``), which
    may hold other settings too; the result is what travels with a policy name to the engines.
    """
    names = sorted({p.name for spec in POLICIES.values() for p in spec.params})
    values: dict[str, float] = {}
    for name in names:
        value = given.get(name)
        if isinstance(value, int | float):
            values[name] = float(value)
    return values

"""What every scheduling policy declares: its traits, its parameters and its engine encoding.

A policy is data. The compiled engines never ask which policy runs: they read its traits
and the numbers of its :class:`KeyForm`, so a new policy needs no change to either engine.

Traits:

* ``fifo_within_class``: two waiting jobs of one class are always served in arrival order,
  so the queue-level engine may keep a class's queue as a plain FIFO instead of a heap;
* ``preemptive``: a waiting job with a higher key may displace a running one (preemptive-resume
  at the queue level, Trail-limited recompute at the replica level);
* ``uses_remaining_size``: the key's size is the work still left, not the (predicted) total;
* ``drr``: a Deficit Round Robin arbiter picks the class first, the key orders jobs inside it.

The key form. Every key is LARGER = SERVED FIRST, ties broken by (arrival ascending, job id
ascending), and is evaluated by :func:`planner.sim.policies.keys.priority_key` as::

    numerator   = jump·priority_jump + index·(weight·μ_class) + weight·weight
                  + waited·(now − arrival) + size·size + const
    denominator = over_size·size + over_tokens·tokens + over_const,
                  replaced by floor_to unless it is > floor_at
    key         = numerator / denominator

A coefficient of 0 adds an exact zero, so a policy's key is bit for bit the textbook formula.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

import numpy as np

from planner.errors import InputError


@dataclass(frozen=True)
class KeyForm:
    """A policy's priority key as the numbers the compiled engines read (module docstring)."""

    jump: float = 0.0
    index: float = 0.0
    weight: float = 0.0
    waited: float = 0.0
    size: float = 0.0
    const: float = 0.0
    over_size: float = 0.0
    over_tokens: float = 0.0
    over_const: float = 1.0
    floor_at: float = 0.0
    floor_to: float = 1e-300

    def packed(self) -> np.ndarray:
        """The coefficients in field order (the layout :mod:`.keys` indexes)."""
        return np.array([float(getattr(self, f.name)) for f in fields(self)], dtype=np.float64)


@dataclass(frozen=True)
class EngineEncoding:
    """Everything a policy's parameters become for the engines.

    ``preempt_until`` is the fraction of its predicted output after which a running request
    may no longer be preempted at the replica level (Trail's c); only preemptive policies
    read it.
    """

    key: KeyForm
    preempt_until: float = 1.0


@dataclass(frozen=True)
class Param:
    """One tuning parameter of a policy: its name in the scenario's ``[policy.params]``, default, bounds."""

    name: str
    default: float
    summary: str
    minimum: float = 0.0
    maximum: float = float("inf")


@dataclass(frozen=True)
class PolicySpec:
    """A scheduling policy as the simulators see it (traits in the module docstring).

    ``encode`` maps the policy's parameter values (every declared one present) to its
    :class:`EngineEncoding`; it must be a module-level function so a spec can be sent to
    worker processes. ``inner`` names the within-class order of a DRR policy.
    """

    name: str
    summary: str
    encode: Callable[[Mapping[str, float]], EngineEncoding]
    fifo_within_class: bool
    preemptive: bool = False
    uses_remaining_size: bool = False
    drr: bool = False
    inner: str | None = None
    params: tuple[Param, ...] = ()

    def values(self, given: Mapping[str, float] | None = None) -> dict[str, float]:
        """This policy's parameter values: the given ones it declares, its defaults for the rest.

        Values it does not declare are ignored (the scenario's parameter table serves every policy).
        """
        given = given or {}
        values = {}
        for param in self.params:
            value = float(given.get(param.name, param.default))
            if not param.minimum <= value <= param.maximum:
                raise InputError(f"{param.name} = {value:g} is out of range for policy '{self.name}'",
                                 where=f"policy.params.{param.name}",
                                 fix=f"use a value in [{param.minimum:g}, {param.maximum:g}] ({param.summary})")
            values[param.name] = value
        return values

    def encoding(self, given: Mapping[str, float] | None = None) -> EngineEncoding:
        """The engine encoding of this policy at the given parameter values (defaults for the rest)."""
        return self.encode(self.values(given))

"""Scheduling policies as plug-ins, shared by the queue-level and replica-level engines.

Each policy lives in its own module with its rule, its reference and its
:class:`PolicySpec` (traits, parameters, engine encoding); :mod:`.registry` lists them.
:mod:`.keys` evaluates any policy's key inside compiled loops and :mod:`.drr` holds the
Deficit Round Robin class arbiter used by the policies with the ``drr`` trait.
See docs/adding-a-policy.md.
"""

from __future__ import annotations

from planner.sim.policies.base import EngineEncoding, KeyForm, Param, PolicySpec
from planner.sim.policies.registry import POLICIES, get_policy, policy_names, policy_values, register

__all__ = [
    "POLICIES",
    "EngineEncoding",
    "KeyForm",
    "Param",
    "PolicySpec",
    "get_policy",
    "policy_names",
    "policy_values",
    "register",
]

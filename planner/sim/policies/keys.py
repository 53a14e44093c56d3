"""One compiled evaluation of every policy's priority key, and the total order of waiting jobs.

Compiled event loops (queue level and replica level) call :func:`priority_key` with the
policy's packed :class:`~planner.sim.policies.base.KeyForm`; LARGER = SERVED FIRST. Ties are
broken by (key descending, arrival ascending, job id ascending): :func:`precedes` encodes that
total order so both engines break ties identically. The caller passes the remaining work as
``size`` when the policy ``uses_remaining_size``, else the (predicted) total.
"""

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import numpy as np

from planner.sim.jit import njit

# columns of a packed KeyForm (its field order)
K_JUMP, K_INDEX, K_WEIGHT, K_WAITED, K_SIZE, K_CONST = range(6)
K_OVER_SIZE, K_OVER_TOKENS, K_OVER_CONST, K_FLOOR_AT, K_FLOOR_TO = range(6, 11)
N_KEY = 11

KeyFormValues = np.ndarray | tuple[float, ...]
"""A packed key form: the array, or its values as a tuple (:func:`form_values`)."""


@njit(cache=True, inline="always")
def priority_key(
    form: np.ndarray,
    weight: float,
    mu_class: float,
    size: float,
    arrival: float,
    now: float,
    priority_jump: float,
    tokens: float,
) -> float:
    """The scheduling key of one job under the key ``form`` (larger = served first)."""
    return key_from_class_part(form, class_part(form, weight, mu_class, priority_jump), size, arrival, now, tokens)


@njit(cache=True, inline="always")
def class_part(form: np.ndarray, weight: float, mu_class: float, priority_jump: float) -> float:
    """The first terms of a key's numerator, which depend on the job's class only (a loop may keep them)."""
    return form[K_JUMP] * priority_jump + form[K_INDEX] * (weight * mu_class) + form[K_WEIGHT] * weight


@njit(cache=True, inline="always")
def key_from_class_part(form: KeyFormValues, part: float, size: float, arrival: float, now: float,
                        tokens: float) -> float:
    """:func:`priority_key` from its :func:`class_part`, with the same operations in the same order."""
    num = part + form[K_WAITED] * (now - arrival) + form[K_SIZE] * size + form[K_CONST]
    if form[K_OVER_SIZE] == 0.0 and form[K_OVER_TOKENS] == 0.0 and form[K_OVER_CONST] == 1.0:
        return num  # num / 1.0 without the division, which the hot loops feel
    den = form[K_OVER_SIZE] * size + form[K_OVER_TOKENS] * tokens + form[K_OVER_CONST]
    if not den > form[K_FLOOR_AT]:
        den = form[K_FLOOR_TO]
    return num / den


@njit(cache=True, inline="always")
def form_values(form: np.ndarray) -> tuple[float, ...]:
    """A packed key form's values as a tuple, which a compiled loop keeps in registers: it must read an array
    again after every store to another float array that might overlap it."""
    return (form[0], form[1], form[2], form[3], form[4], form[5], form[6], form[7], form[8], form[9], form[10])


@njit(cache=True)
def precedes(key_a: float, arrival_a: float, id_a: int, key_b: float, arrival_b: float, id_b: int) -> bool:
    """True when job a is served before job b: (key desc, arrival asc, id asc)."""
    if key_a != key_b:
        return key_a > key_b
    if arrival_a != arrival_b:
        return arrival_a < arrival_b
    return id_a < id_b

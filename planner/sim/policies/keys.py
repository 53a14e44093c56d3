"""One compiled entry point for every policy's priority key, dispatched on the policy code.

Compiled event loops (queue level and replica level) call :func:`priority_key` with
the policy's integer code; LARGER = SERVED FIRST. Ties are broken by
(key descending, arrival ascending, job id ascending): :func:`precedes` encodes that
total order so both engines break ties identically.

Arguments a policy does not use are ignored. For ``srpt`` the caller passes the
job's *remaining* work as ``predicted_size`` (the key is −remaining). For
``drr-fcfs``/``drr-wspt`` the key is the within-class order only; the class is
chosen first by :func:`planner.sim.policies.drr.drr_select_class`.
"""

from __future__ import annotations

from numba import njit

from planner.sim.policies.base import CMU, DRR_FCFS, DRR_WSPT, FCFS, PRIORITY_AGING, SRPT, WSPT
from planner.sim.policies.cmu import cmu_key
from planner.sim.policies.fcfs import dynamo_fcfs_key, fcfs_key
from planner.sim.policies.priority_aging import aging_key
from planner.sim.policies.srpt import srpt_key
from planner.sim.policies.wspt import dynamo_wspt_key, wspt_key


@njit(cache=True)
def priority_key(
    code: int,
    weight: float,
    mu_class: float,
    predicted_size: float,
    arrival: float,
    now: float,
    priority_jump: float,
    isl_tokens: float,
    aging_rate: float,
) -> float:
    """The scheduling key of one waiting job under policy ``code`` (larger = served first)."""
    if code == FCFS:
        return fcfs_key(arrival)
    if code == CMU:
        return cmu_key(weight, mu_class)
    if code == WSPT:
        return wspt_key(weight, predicted_size)
    if code == SRPT:
        return srpt_key(predicted_size)
    if code == PRIORITY_AGING:
        return aging_key(priority_jump, aging_rate, now, arrival)
    if code == DRR_FCFS:
        return dynamo_fcfs_key(priority_jump, arrival)
    if code == DRR_WSPT:
        return dynamo_wspt_key(priority_jump, isl_tokens)
    return fcfs_key(arrival)


@njit(cache=True)
def precedes(key_a: float, arrival_a: float, id_a: int, key_b: float, arrival_b: float, id_b: int) -> bool:
    """True when job a is served before job b: (key desc, arrival asc, id asc)."""
    if key_a != key_b:
        return key_a > key_b
    if arrival_a != arrival_b:
        return arrival_a < arrival_b
    return id_a < id_b

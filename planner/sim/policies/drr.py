"""The Deficit Round Robin class arbiter of ``drr-fcfs`` and ``drr-wspt`` (Dynamo's router).

Rule: classes take turns; on its turn a class earns its quantum Q_k of credit
(uncached prompt tokens) and dispatches its head-of-line request while its deficit
D_k covers the request's cost max(1, uncached_tokens). A class whose queue empties
forfeits its deficit (D_k := 0), so credit cannot be hoarded while idle.
Reference: M. Shreedhar & G. Varghese, "Efficient fair queuing using deficit round
robin", SIGCOMM 1995; NVIDIA Dynamo router docs, "Deficit Round Robin Queue
Scheduling" (cost = max(1, uncached_tokens), quantum in uncached tokens, FCFS key
priority_jump − arrival_offset, WSPT key (1 + priority_jump)/isl_tokens).

Bounded arbitration (as Dynamo does it): instead of looping one round at a time, the
number of rounds class k still needs is

    r_k = max(1, ⌈(cost_k − D_k) / Q_k⌉)          (k ≠ the class whose turn it is),

and the winner is the non-empty class minimising (r_k, position of k in the cyclic
order after the current pointer). Every non-empty class j visited on the way earns
its quanta: r* visits if it sits at or before the winner in the cyclic order, r* − 1
otherwise. This is exactly what the round-by-round loop would produce, in O(K),
bit for bit when costs and quanta are whole token counts (as in Dynamo; float64 adds
integers exactly). With fractional values the two can differ by one round where
float rounding lands exactly on a boundary.
If the class whose turn it is still covers its head's cost, it keeps the turn
(the inner "while deficit ≥ cost" loop of the original algorithm).

When every class is backlogged, class k's long-run share of served cost is
Q_k / Σ_j Q_j (the DRR fairness guarantee), whatever the request sizes.
"""

from __future__ import annotations

import math

import numpy as np

from planner.sim.jit import njit


@njit(cache=True)
def drr_cost(uncached_tokens: float) -> float:
    """Dynamo's scheduling cost of a request: max(1, uncached_tokens)."""
    return uncached_tokens if uncached_tokens > 1.0 else 1.0


@njit(cache=True)
def drr_select_class(
    deficits: np.ndarray,
    quanta: np.ndarray,
    head_costs: np.ndarray,
    nonempty_mask: np.ndarray,
    pointer: int,
) -> tuple[int, int]:
    """Pick the class that dispatches next; update ``deficits`` in place.

    ``head_costs[k]`` is the cost of class k's head-of-line request (ignored when k is
    empty); ``pointer`` is the class whose turn it is (−1 before the first dispatch).
    Returns (class, new_pointer), or (−1, pointer) when every class is empty. The
    winner's deficit is already charged with its head's cost.
    """
    n = quanta.shape[0]
    any_nonempty = False
    for k in range(n):
        if nonempty_mask[k]:
            any_nonempty = True
        else:
            deficits[k] = 0.0
    if not any_nonempty:
        return -1, pointer
    if pointer >= 0 and nonempty_mask[pointer] and deficits[pointer] >= head_costs[pointer]:
        deficits[pointer] -= head_costs[pointer]
        return pointer, pointer
    start = pointer if pointer >= 0 else n - 1
    best = -1
    best_rounds = 0
    best_pos = 0
    for pos in range(1, n + 1):
        k = (start + pos) % n
        if not nonempty_mask[k]:
            continue
        need = head_costs[k] - deficits[k]
        rounds = 1
        if need > quanta[k]:
            rounds = int(math.ceil(need / quanta[k]))
        if best < 0 or rounds < best_rounds:
            best = k
            best_rounds = rounds
            best_pos = pos
    for pos in range(1, n + 1):
        k = (start + pos) % n
        if not nonempty_mask[k]:
            continue
        visits = best_rounds if pos <= best_pos else best_rounds - 1
        deficits[k] += visits * quanta[k]
    deficits[best] -= head_costs[best]
    return best, best


@njit(cache=True)
def drr_note_dequeue(deficits: np.ndarray, cls: int, class_now_empty: bool) -> None:
    """Call after removing class ``cls``'s head: an emptied class forfeits its deficit."""
    if class_now_empty:
        deficits[cls] = 0.0


def drr_select_class_reference(
    deficits: list[float],
    quanta: list[float],
    head_costs: list[float],
    nonempty: list[bool],
    pointer: int,
) -> tuple[int, int]:
    """Round-by-round DRR (Shreedhar & Varghese's loop), for checking the bounded version."""
    n = len(quanta)
    for k in range(n):
        if not nonempty[k]:
            deficits[k] = 0.0
    if not any(nonempty):
        return -1, pointer
    if pointer >= 0 and nonempty[pointer] and deficits[pointer] >= head_costs[pointer]:
        deficits[pointer] -= head_costs[pointer]
        return pointer, pointer
    k = pointer if pointer >= 0 else n - 1
    while True:
        k = (k + 1) % n
        if not nonempty[k]:
            continue
        deficits[k] += quanta[k]
        if deficits[k] >= head_costs[k]:
            deficits[k] -= head_costs[k]
            return k, k

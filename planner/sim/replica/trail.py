"""Trail-style limited preemption for ``srpt`` at the replica level (Shahout et al., arXiv:2410.01035).

SRPT at the replica level is preemptive on predicted remaining output p̂ − generated, but
limited as Trail does it: a running request stops being preemptible once it has generated
trail_c · p̂ tokens, because by then it holds a large KV cache that a preemption would throw
away (recompute). When the best waiting request cannot be admitted (batch full, or its KV
reservation does not fit), :func:`make_room` looks for running requests that are both
preemptible and worse than it in the policy order, takes them worst first until the
candidate would fit, and preempts them — or preempts none if even all of them would not
make room. trail_c = 0 never preempts; trail_c = 1 is SRPT on predictions.
"""

from __future__ import annotations

import numpy as np

from planner.sim.jit import njit
from planner.sim.policies.keys import precedes
from planner.sim.replica.requests import preempt, waiting_key
from planner.sim.replica.state import (
    F_PRED,
    H_TRAIL,
    I_GEN,
    I_PRE_POL,
    I_RESERVED,
    P_KVLIM,
    P_MAXB,
    P_NRUN,
    P_RES,
    State,
)


@njit(cache=True)
def make_room(st: State, hkey: np.ndarray, hid: np.ndarray, r: int, cand: int, cand_key: float, need_res: int) -> bool:
    """Trail-limited SRPT: preempt the worst preemptible running requests if that admits ``cand``."""
    req_i = st.req_i
    req_f = st.req_f
    rep_i = st.rep_i
    run_ids = st.run_ids
    arrival = st.arrival
    mark = st.tmp_mark
    trail = st.pol_f[H_TRAIL]
    n = rep_i[r, P_NRUN]
    for i in range(n):
        mark[i] = False
    n_left = n
    res_left = rep_i[r, P_RES]
    while n_left >= rep_i[r, P_MAXB] or res_left + need_res > rep_i[r, P_KVLIM]:
        worst = -1
        worst_key = 0.0
        for i in range(n):
            v = run_ids[r, i]
            if mark[i] or not float(req_i[v, I_GEN]) < trail * req_f[v, F_PRED]:
                continue
            key = waiting_key(st, v, r)
            if not precedes(cand_key, arrival[cand], cand, key, arrival[v], v):
                continue
            if worst < 0 or precedes(worst_key, arrival[run_ids[r, worst]], run_ids[r, worst], key, arrival[v], v):
                worst = i
                worst_key = key
        if worst < 0:
            return False
        mark[worst] = True
        n_left -= 1
        res_left -= req_i[run_ids[r, worst], I_RESERVED]
    for i in range(n - 1, -1, -1):
        if mark[i]:
            req_i[run_ids[r, i], I_PRE_POL] += 1
            preempt(st, hkey, hid, r, i)
    return True


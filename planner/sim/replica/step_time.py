"""One step's duration in the compiled engine: the profile's step model (``planner.profiles.step_model``).

Row r of ``rep_step`` holds replica r's model packed in ``STEP_COLUMNS`` order: the six
attention coefficients, then the dense time at each of ``KNOT_TOKENS``. This is the same
formula as :meth:`planner.profiles.step_model.StepModel.step_ms`, which the tests hold it to.
"""

# mypy: disable-error-code="no-any-return"
# (compiled kernels: numpy's stubs type an element read from an array as Any)

from __future__ import annotations

import numpy as np

from planner.profiles.step_model import ATTENTION_COLUMNS, KNOT_TOKENS
from planner.sim.replica.inline import inlined

KNOTS = np.array(KNOT_TOKENS, dtype=np.float64)
"""A global array: numba freezes it into the compiled code as a constant."""
N_KNOTS = len(KNOT_TOKENS)
N_ATTENTION = len(ATTENTION_COLUMNS)
DEC_FIXED, DEC_SEQ, DEC_KV, PRE_FIXED, PRE_TOKEN, PRE_PAIR = range(N_ATTENTION)


@inlined
def dense_ms(step: np.ndarray, r: int, tokens: float) -> float:
    """Replica r's dense table at ``tokens``: linear between knots (found by bisection), the last slope beyond."""
    if tokens <= KNOTS[0]:
        return step[r, N_ATTENTION]
    lo = 0
    hi = N_KNOTS - 1
    if tokens > KNOTS[hi]:
        lo = hi - 1
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if KNOTS[mid] < tokens:
                lo = mid
            else:
                hi = mid
    y0 = step[r, N_ATTENTION + lo]
    y1 = step[r, N_ATTENTION + lo + 1]
    return y0 + (y1 - y0) * (tokens - KNOTS[lo]) / (KNOTS[lo + 1] - KNOTS[lo])


@inlined
def step_ms(step: np.ndarray, r: int, decodes: int, decode_kv: int, prefill: int, pairs: float) -> float:
    """Duration in ms of a step of replica r with ``decodes`` decodes reading ``decode_kv`` KV tokens
    and prefill chunks of ``prefill`` tokens with ``pairs`` causal query-key pairs."""
    t = dense_ms(step, r, float(decodes + prefill))
    if decodes > 0:
        t += step[r, DEC_FIXED] + step[r, DEC_SEQ] * float(decodes) + step[r, DEC_KV] * float(decode_kv)
    if prefill > 0:
        t += step[r, PRE_FIXED] + step[r, PRE_TOKEN] * float(prefill) + step[r, PRE_PAIR] * pairs
    return t

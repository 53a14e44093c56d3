r"""Fit a step model to your own measurements of one (model, SKU, TP, engine): ``planner profiles fit``.

The input is a frame of step observations, one row per engine step (:data:`STEP_COLUMNS`):
``batch_size`` decoding sequences reading ``kv_tokens`` KV tokens in all, ``prefill_tokens``
prompt tokens with ``prefill_pairs`` causal query-key pairs, and the step's ``step_ms``. The
model is :class:`~planner.profiles.step_model.StepModel`'s, with the same parts as the measured
profiles (``measured.MeasuredEngine.fit``)::

    t = D(n_d + P) + [n_d > 0]·(δ + β·n_d + α·K_d) + [P > 0]·(γ₀ + γ₁·P + γ₂·Q)

How it is fitted, and why:

* **Relative error.** Each step is weighted by 1 / its observed time, because steps span three
  orders of magnitude and a profile's error is judged relative to the step.
* **Non-negative.** Every coefficient is ≥ 0 (``scipy.optimize.lsq_linear`` with bounds): a
  negative cost would make some step faster than doing less work.
* **Non-decreasing dense time.** D is written as its value at the lowest free knot plus one
  non-negative rise per segment between free knots (a ramp from 0 to 1 across the segment), so
  it can never fall as tokens grow; the profile table refuses a dense time that falls.
* **Fewer free knots than** :data:`KNOT_TOKENS`. A free knot is kept only where the data can
  place it: each segment between free knots must hold at least :data:`MIN_STEPS_PER_SEGMENT`
  steps of at least two different token counts. The table's knots are then read off the fitted
  D. Dense data keeps every knot (and the tile jumps between them); sparse data gets a coarser D.
* **Outside the data.** Below the lowest free knot D is flat: no step is faster than the
  smallest one measured. Above the highest it continues with its last segment's slope (dense work
  is compute-bound and linear in tokens there), and so does the profile beyond 16,384 tokens.
  Steps far outside the measured range are extrapolations: :attr:`UserFit.notes` says so.
* **Robust.** Iteratively reweighted least squares with Huber weights: a step more than
  :data:`HUBER_RELATIVE` off the fit counts linearly, not quadratically, so a few stalls
  (a garbage-collection pause, a preemption) do not pull the fit.
* **What the data cannot tell apart goes to the dense time.** With only pure decode and pure
  prefill steps (a benchmark, Splitwise's runs), a fixed or per-token attention cost is
  indistinguishable from dense time of the same tokens. A tiny ridge penalty on δ, β, γ₀ and γ₁
  settles the split in favour of D, the part every step shares; measurements with mixed steps
  identify them and the penalty then changes nothing that matters.

This module is pure: frames in, values out; reading files is ``measurements.py``'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import lsq_linear

from planner.errors import InputError
from planner.profiles.loader import PROFILE_COLUMNS
from planner.profiles.step_model import KNOT_TOKENS, StepError, StepModel, steps_ms

STEP_COLUMNS: tuple[str, ...] = ("batch_size", "kv_tokens", "prefill_tokens", "prefill_pairs", "step_ms")
MIN_STEPS = 8
"""Fewer steps than this cannot pin a dense table and six attention coefficients."""
MIN_STEPS_PER_SEGMENT = 4
HUBER_RELATIVE = 0.05
"""Relative error beyond which a step counts linearly in the fit (5 %)."""
IRLS_ROUNDS = 20
RIDGE = 1e-4
"""Weight of the penalty on the attention terms D can stand in for, against a sum of squared relative errors."""
MIN_DENSE_MS = 1e-4
"""The profile table needs a positive dense time; a fit that leaves D at 0 gets this (0.1 µs) instead."""
SIGNIFICANT_DIGITS = 6
KINDS = ("decode", "prefill", "mixed")

# the columns of the design, in StepModel's order after the dense ones
_ATTENTION = ("decode_fixed", "decode_per_seq", "decode_per_kv", "prefill_fixed", "prefill_per_token",
              "prefill_per_pair")
_PENALISED = ("decode_fixed", "decode_per_seq", "prefill_fixed", "prefill_per_token")


@dataclass(frozen=True)
class UserFit:
    """A fitted step model with its error on the steps it was fitted to."""

    step: StepModel
    error: StepError
    errors_by_kind: dict[str, StepError]
    counts: dict[str, int]
    knots: tuple[int, ...]
    token_range: tuple[float, float]
    notes: tuple[str, ...]


def step_kind(steps: pd.DataFrame) -> np.ndarray:
    """'decode', 'prefill' or 'mixed' for each step."""
    decode = steps["batch_size"].to_numpy(float) > 0
    prefill = steps["prefill_tokens"].to_numpy(float) > 0
    return np.where(decode & prefill, "mixed", np.where(decode, "decode", "prefill"))


def predict_ms(step: StepModel, steps: pd.DataFrame) -> np.ndarray:
    """The step model's time for each step of a frame with :data:`STEP_COLUMNS`."""
    return steps_ms(step, steps["batch_size"], steps["kv_tokens"], steps["prefill_tokens"], steps["prefill_pairs"])


def dense_knots(tokens: np.ndarray) -> tuple[int, ...]:
    """The free knots of D: knots of :data:`KNOT_TOKENS` that the data can place (module docstring)."""
    candidates = np.asarray(KNOT_TOKENS)
    low = int(candidates[candidates <= tokens.min()].max(initial=candidates[0]))
    above = candidates[candidates >= tokens.max()]
    high = int(above[0]) if above.size else int(candidates[-1])
    knots = [low]
    for knot in (int(k) for k in candidates if low < k <= high):
        inside = tokens[(tokens > knots[-1]) & (tokens <= knot)]
        if inside.size >= MIN_STEPS_PER_SEGMENT and np.unique(inside).size >= 2:
            knots.append(knot)
    if knots[-1] < high and (tokens > knots[-1]).any():
        # too few steps above the last knot for a segment of their own: the last segment takes them
        if len(knots) > 1:
            knots[-1] = high
        else:
            knots.append(high)
    return tuple(knots)


def ramps(knots: tuple[int, ...], tokens: np.ndarray) -> np.ndarray:
    """Basis of D: a column of ones (D at the lowest knot), then one ramp per segment.

    Ramp j rises from 0 at knot j−1 to 1 at knot j; the last one keeps rising beyond the last knot,
    which continues D with the last segment's slope.
    """
    tokens = np.asarray(tokens, dtype=np.float64)
    columns = [np.ones_like(tokens)]
    for j in range(1, len(knots)):
        ramp = (tokens - knots[j - 1]) / (knots[j] - knots[j - 1])
        columns.append(np.clip(ramp, 0.0, None if j == len(knots) - 1 else 1.0))
    return np.column_stack(columns)


def _design(steps: pd.DataFrame, knots: tuple[int, ...]) -> np.ndarray:
    batch = steps["batch_size"].to_numpy(float)
    prefill = steps["prefill_tokens"].to_numpy(float)
    decoding, prefilling = (batch > 0).astype(float), (prefill > 0).astype(float)
    attention = np.column_stack([decoding, batch, steps["kv_tokens"].to_numpy(float),
                                 prefilling, prefill, steps["prefill_pairs"].to_numpy(float)])
    return np.hstack([ramps(knots, batch + prefill), attention])


def _solve(design: np.ndarray, observed: np.ndarray, penalised: np.ndarray) -> np.ndarray:
    """Robust non-negative least squares on relative error (module docstring); coefficients in ms units."""
    relative = design / observed[:, None]
    scale = np.abs(relative).max(axis=0)
    used = scale > 0  # a term no step exercises (no prefill at all, say) stays 0
    scaled = relative[:, used] / scale[used]
    penalty = np.sqrt(RIDGE) * np.eye(int(used.sum()))[penalised[used]]
    weights = np.ones(len(observed))
    solution = np.zeros(int(used.sum()))
    for _ in range(IRLS_ROUNDS):
        root = np.sqrt(weights)[:, None]
        matrix = np.vstack([scaled * root, penalty])
        target = np.concatenate([root[:, 0], np.zeros(len(penalty))])
        solution = lsq_linear(matrix, target, bounds=(0.0, np.inf), method="bvls").x
        residual = np.abs(scaled @ solution - 1.0)
        updated = np.minimum(1.0, HUBER_RELATIVE / np.maximum(residual, 1e-12))
        if np.max(np.abs(updated - weights)) < 1e-3:
            break
        weights = updated
    coefficients = np.zeros(design.shape[1])
    coefficients[used] = solution / scale[used]
    return coefficients


def _only_fresh_chunks(steps: pd.DataFrame) -> bool:
    """Whether every prefill is one fresh chunk: its pairs are P(P+1)/2, a function of P alone."""
    prefill = steps["prefill_tokens"].to_numpy(float)
    fresh = prefill * (prefill + 1.0) / 2.0
    return bool(np.allclose(steps["prefill_pairs"].to_numpy(float)[prefill > 0], fresh[prefill > 0], rtol=1e-6))


def _notes(steps: pd.DataFrame, counts: dict[str, int], token_range: tuple[float, float]) -> tuple[str, ...]:
    notes = []
    if counts["decode"] + counts["mixed"] == 0:
        notes.append("no step decodes: the decode attention terms are 0, and decode steps are predicted from the "
                     "dense time alone")
    if counts["prefill"] + counts["mixed"] == 0:
        notes.append("no step prefills: the prefill attention terms are 0, and prefill steps are predicted from the "
                     "dense time alone")
    elif _only_fresh_chunks(steps):
        notes.append("every prefill is a fresh chunk: its attention over query-key pairs cannot be told from the dense "
                     "time's growth, so a chunk after a long cached prefix may be predicted too fast; log "
                     "prefill_pairs of chunked prefills to measure it")
    low, high = token_range
    notes.append(f"measured steps span {low:,.0f} to {high:,.0f} tokens: below, the dense time is flat; above, it "
                 "continues with its last slope")
    return tuple(notes)


def fit_steps(steps: pd.DataFrame, where: str) -> UserFit:
    """Fit a step model to ``steps`` (columns :data:`STEP_COLUMNS`, already checked); ``where`` names them in errors."""
    if len(steps) < MIN_STEPS:
        raise InputError(f"{len(steps)} usable step(s): too few to fit a step model (at least {MIN_STEPS})",
                         where=where, fix="measure more steps: several batch sizes and prompt lengths")
    tokens = steps["batch_size"].to_numpy(float) + steps["prefill_tokens"].to_numpy(float)
    knots = dense_knots(tokens)
    design = _design(steps, knots)
    penalised = np.array([False] * len(knots) + [name in _PENALISED for name in _ATTENTION])
    observed = steps["step_ms"].to_numpy(float)
    coefficients = _solve(design, observed, penalised)
    dense = ramps(knots, np.asarray(KNOT_TOKENS, dtype=np.float64)) @ coefficients[:len(knots)]
    step = StepModel.from_parts(coefficients[len(knots):], tuple(np.maximum(dense, MIN_DENSE_MS)))
    step = step.rounded(SIGNIFICANT_DIGITS)  # judge the model as the profile table will store it
    predicted = predict_ms(step, steps)
    kinds = step_kind(steps)
    counts = {kind: int((kinds == kind).sum()) for kind in KINDS}
    token_range = (float(tokens.min()), float(tokens.max()))
    return UserFit(
        step=step,
        error=StepError.of(predicted, observed),
        errors_by_kind={kind: StepError.of(predicted[kinds == kind], observed[kinds == kind]) for kind in KINDS},
        counts=counts,
        knots=knots,
        token_range=token_range,
        notes=_notes(steps, counts, token_range),
    )


def with_fit(base_row: Mapping[str, object], fit: UserFit, detail: str) -> dict[str, object]:
    """A profile row: ``base_row``'s replica (GPUs, KV cache, engine defaults) with the fitted step model.

    ``base_row`` is the bundled profile of the same (model, SKU, TP, engine) when there is one, so
    a user fit changes only how long steps take, not how the replica is sized.
    """
    row = {column: base_row[column] for column in PROFILE_COLUMNS}
    row.update({
        "source": "user-fit",
        "source_detail": detail,
        "err_points": fit.error.points,
        "err_median_pct": round(fit.error.median_pct, 2),
        "err_p95_pct": round(fit.error.p95_pct, 2),
        "err_max_pct": round(fit.error.max_pct, 2),
    })
    row.update(fit.step.to_row())
    return row


def fit_detail(fit: UserFit, files: str) -> str:
    """What a user fit was fitted on, for its ``source_detail``."""
    counts = ", ".join(f"{fit.counts[kind]:,} {kind}" for kind in KINDS)
    low, high = fit.token_range
    return (f"fitted by `planner profiles fit` to {fit.error.points:,} measured steps ({counts}; {low:,.0f} to "
            f"{high:,.0f} tokens) from {files}; error columns: its error on those steps")

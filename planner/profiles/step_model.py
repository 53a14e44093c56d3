r"""The step-time model: how long one engine iteration takes, from what the iteration does.

One iteration (step) of a continuous-batching engine runs ``n_d`` decoding sequences (one
token each) and ``P`` prompt tokens of prefill chunks through the model at once. Its time
splits the way the kernels do:

    t_step = D(n_d + P)                                         dense work: GEMMs, MoE, norms,
                                                                 all-reduces, sampling
           + [n_d > 0] · (δ + β · n_d + α · K_d)                 decode attention
           + [P > 0]   · (γ₀ + γ₁ · P + γ₂ · Q)                  prefill (context) attention

* ``K_d`` = KV tokens the decodes read: the sum of their contexts (prompt + generated).
* ``Q`` = causal query-key pairs of the prefill chunks: a chunk of q tokens after p tokens
  already prefilled for its request attends to p·q + q(q+1)/2 ≈ q·(p + q/2) keys.
* ``D`` is piecewise linear between knots at :data:`KNOT_TOKENS` tokens, and continues with
  its last slope beyond the last knot. Dense work is flat while the GEMMs are bound by
  reading the weights, and linear once they are bound by compute; the knee sits at a
  different token count on every SKU, so a table follows it where one line cannot.

Decode attention is linear in the KV read because it streams the cache once
(bandwidth-bound); prefill attention is quadratic in the prompt because every token attends
to every earlier one (compute-bound). The seed's three-coefficient form
``a + b·(KV read) + c·(prefill tokens)`` is the special case D ≡ a, α = b, γ₁ = c
(:meth:`StepModel.linear`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np

KNOT_TOKENS: tuple[int, ...] = (
    1, 2, 4, 8, 16, 24, 32, 33, 48, 64, 65, 96, 128, 129, 192, 256, 257, 384, 512, 513, 768,
    1024, 1025, 1536, 2048, 2049, 3072, 4096, 4097, 6144, 8192, 8193, 12288, 16384,
)
"""Token counts at which the dense time D is tabulated: powers of two, the midpoints between
them, and one token past each power of two from 32 on. GEMM kernels work in tiles, so one
token past a tile boundary costs a whole extra tile: the measured tables jump there (by up to
half on some SKUs), and a knot on each side keeps the jump instead of smearing it."""

DENSE_COLUMNS: tuple[str, ...] = tuple(f"dense_ms_{n}" for n in KNOT_TOKENS)
ATTENTION_COLUMNS: tuple[str, ...] = (
    "decode_attn_ms_fixed",
    "decode_attn_ms_per_seq",
    "decode_attn_ms_per_kv_token",
    "prefill_attn_ms_fixed",
    "prefill_attn_ms_per_token",
    "prefill_attn_ms_per_pair",
)
STEP_COLUMNS: tuple[str, ...] = ATTENTION_COLUMNS + DENSE_COLUMNS
"""The profile-table columns that hold one step model, in the order the simulator packs them."""


def causal_pairs(chunk_tokens: float, prefix_tokens: float) -> float:
    """Query-key pairs of a prefill chunk of ``chunk_tokens`` after ``prefix_tokens`` already in KV."""
    return chunk_tokens * (prefix_tokens + (chunk_tokens + 1.0) / 2.0)


class Row(Protocol):
    """A record read by column name: a mapping or a pandas row.

    Its cells are whatever the table holds (numbers, numpy scalars, numeric text); the step
    model converts each one with ``float``.
    """

    def __getitem__(self, column: str, /) -> Any: ...


@dataclass(frozen=True)
class StepParts:
    """One step's time in ms by the kernels that spend it (:meth:`StepModel.parts_ms`)."""

    dense_ms: float
    decode_attention_ms: float
    prefill_attention_ms: float

    @property
    def total_ms(self) -> float:
        return self.dense_ms + self.decode_attention_ms + self.prefill_attention_ms


@dataclass(frozen=True)
class StepModel:
    """One (model, SKU, TP, engine)'s step time in ms; fields are the columns of :data:`STEP_COLUMNS`."""

    decode_attn_ms_fixed: float
    decode_attn_ms_per_seq: float
    decode_attn_ms_per_kv_token: float
    prefill_attn_ms_fixed: float
    prefill_attn_ms_per_token: float
    prefill_attn_ms_per_pair: float
    dense_ms: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.dense_ms) != len(KNOT_TOKENS):
            raise ValueError(f"dense_ms needs {len(KNOT_TOKENS)} values, one per knot, got {len(self.dense_ms)}")

    @classmethod
    def linear(cls, a_ms: float, b_ms_per_kv_token: float, c_ms_per_prefill_token: float) -> StepModel:
        """The three-coefficient form a + b·(KV read) + c·(prefill tokens)."""
        return cls(0.0, 0.0, b_ms_per_kv_token, 0.0, c_ms_per_prefill_token, 0.0,
                   tuple(float(a_ms) for _ in KNOT_TOKENS))

    @classmethod
    def from_parts(cls, attention: Iterable[float], dense_ms: tuple[float, ...]) -> StepModel:
        """From the six attention coefficients in :data:`ATTENTION_COLUMNS` order and the dense table."""
        decode_fixed, decode_per_seq, decode_per_kv, prefill_fixed, prefill_per_token, prefill_per_pair = attention
        return cls(decode_fixed, decode_per_seq, decode_per_kv, prefill_fixed, prefill_per_token, prefill_per_pair,
                   dense_ms)

    @classmethod
    def from_row(cls, row: Row) -> StepModel:
        """From a mapping or pandas row holding :data:`STEP_COLUMNS`."""
        return cls.from_parts([float(row[c]) for c in ATTENTION_COLUMNS], tuple(float(row[c]) for c in DENSE_COLUMNS))

    def to_row(self) -> dict[str, float]:
        row = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "dense_ms"}
        row.update(zip(DENSE_COLUMNS, self.dense_ms, strict=True))
        return row

    def packed(self) -> np.ndarray:
        """The coefficients in :data:`STEP_COLUMNS` order, as the compiled simulator reads them."""
        return np.array([getattr(self, c) for c in ATTENTION_COLUMNS] + list(self.dense_ms), dtype=np.float64)

    def dense(self, tokens: float) -> float:
        """D(n): linear between knots, the last slope beyond the last knot, D(1) below one token."""
        return dense_at(self.dense_ms, tokens)

    def parts_ms(self, decodes: float, decode_kv_tokens: float, prefill_tokens: float,
                 prefill_pairs: float) -> StepParts:
        """One step's time split as the kernels split it: dense work, decode attention, prefill attention."""
        decode = 0.0
        if decodes > 0:
            decode = (self.decode_attn_ms_fixed + self.decode_attn_ms_per_seq * decodes
                      + self.decode_attn_ms_per_kv_token * decode_kv_tokens)
        prefill = 0.0
        if prefill_tokens > 0:
            prefill = (self.prefill_attn_ms_fixed + self.prefill_attn_ms_per_token * prefill_tokens
                       + self.prefill_attn_ms_per_pair * prefill_pairs)
        return StepParts(self.dense(decodes + prefill_tokens), decode, prefill)

    def step_ms(self, decodes: float, decode_kv_tokens: float, prefill_tokens: float, prefill_pairs: float) -> float:
        """One step: ``decodes`` sequences reading ``decode_kv_tokens`` in all, and prefill chunks
        of ``prefill_tokens`` tokens with ``prefill_pairs`` causal query-key pairs."""
        return self.parts_ms(decodes, decode_kv_tokens, prefill_tokens, prefill_pairs).total_ms

    def uniform_parts_ms(self, batch: int, context: float, prefill: int) -> StepParts:
        """The parts of :meth:`uniform_step_ms`."""
        return self.parts_ms(batch, batch * context, prefill, causal_pairs(prefill, 0.0))

    def uniform_step_ms(self, batch: int, context: float, prefill: int) -> float:
        """``batch`` decodes at a mean context of ``context`` tokens plus one fresh prompt chunk of ``prefill``."""
        return self.uniform_parts_ms(batch, context, prefill).total_ms

    def rounded(self, digits: int) -> StepModel:
        """Every coefficient to ``digits`` significant digits: the model as a profile table stores it."""
        return StepModel.from_row({k: float(f"{v:.{digits}g}") for k, v in self.to_row().items()})


def dense_at(dense_ms: tuple[float, ...] | np.ndarray, tokens: float) -> float:
    """Piecewise-linear interpolation of the dense table at ``tokens`` (see :class:`StepModel`)."""
    knots = KNOT_TOKENS
    last = len(knots) - 1
    if tokens <= knots[0]:
        return float(dense_ms[0])
    # the last segment, continued beyond the last knot; the same arithmetic as the compiled engine's
    i = next((i for i in range(1, last + 1) if tokens <= knots[i]), last)
    lo, hi = knots[i - 1], knots[i]
    return float(dense_ms[i - 1] + (dense_ms[i] - dense_ms[i - 1]) * (tokens - lo) / (hi - lo))


# The operating grid on which a profile's error is measured: every decode batch, context and
# prefill chunk a replica can run at once (B·C + P within its KV capacity).
GRID_BATCH: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
GRID_CONTEXT: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
GRID_PREFILL: tuple[int, ...] = (0, 128, 256, 512, 1024, 2048, 4096, 8192)


def operating_grid(kv_capacity_tokens: int) -> list[tuple[int, int, int]]:
    """(batch, context, prefill) points of the grid that fit in ``kv_capacity_tokens`` of KV.

    A pure prefill (batch 0) has no decode context, so it is listed once per chunk size.
    """
    points = []
    for batch in GRID_BATCH:
        for context in GRID_CONTEXT if batch > 0 else (0,):
            for prefill in GRID_PREFILL:
                if batch == 0 and prefill == 0:
                    continue
                if batch * context + prefill <= kv_capacity_tokens:
                    points.append((batch, context, prefill))
    return points


@dataclass(frozen=True)
class StepError:
    """Absolute relative error of a step model against a reference over a set of steps, in per cent."""

    points: int
    median_pct: float
    p95_pct: float
    max_pct: float

    @classmethod
    def of(cls, predicted: np.ndarray, reference: np.ndarray) -> StepError:
        err = 100.0 * np.abs(np.asarray(predicted) / np.asarray(reference) - 1.0)
        if err.size == 0:
            return cls(0, math.nan, math.nan, math.nan)
        return cls(int(err.size), float(np.median(err)), float(np.percentile(err, 95.0)), float(err.max()))


def dense_many(dense_ms: tuple[float, ...] | np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """:func:`dense_at` at many token counts at once."""
    knots = np.asarray(KNOT_TOKENS, dtype=np.float64)
    dense = np.asarray(dense_ms, dtype=np.float64)
    tokens = np.maximum(np.asarray(tokens, dtype=np.float64), knots[0])
    slope = (dense[-1] - dense[-2]) / (knots[-1] - knots[-2])
    dense_at_tokens: np.ndarray = np.where(tokens <= knots[-1], np.interp(tokens, knots, dense),
                                           dense[-1] + slope * (tokens - knots[-1]))
    return dense_at_tokens


def steps_ms(model: StepModel, decodes: np.ndarray, decode_kv_tokens: np.ndarray, prefill_tokens: np.ndarray,
             prefill_pairs: np.ndarray) -> np.ndarray:
    """:meth:`StepModel.step_ms` at many steps at once (arrays of equal length)."""
    decodes, kv, prefill, pairs = (np.asarray(a, dtype=np.float64)
                                   for a in (decodes, decode_kv_tokens, prefill_tokens, prefill_pairs))
    t = dense_many(model.dense_ms, decodes + prefill)
    t = t + np.where(decodes > 0, model.decode_attn_ms_fixed + model.decode_attn_ms_per_seq * decodes
                     + model.decode_attn_ms_per_kv_token * kv, 0.0)
    return t + np.where(prefill > 0, model.prefill_attn_ms_fixed + model.prefill_attn_ms_per_token * prefill
                        + model.prefill_attn_ms_per_pair * pairs, 0.0)


def uniform_steps_ms(model: StepModel, points: np.ndarray) -> np.ndarray:
    """:meth:`StepModel.uniform_step_ms` at many (batch, context, prefill) rows at once."""
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    batch, context, prefill = points[:, 0], points[:, 1], points[:, 2]
    return steps_ms(model, batch, batch * context, prefill, prefill * (prefill + 1.0) / 2.0)

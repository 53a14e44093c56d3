r"""Measured step times of today's serving engines, from NVIDIA's ``aiconfigurator-core`` tables.

``aiconfigurator-core`` (Apache-2.0) holds GEMM, attention, communication and MoE kernel
times measured under vLLM, SGLang and TensorRT-LLM on each GPU it covers, and a compiled
estimator that composes them into one engine iteration. :class:`MeasuredEngine` asks it for
the three parts of a step that :class:`~planner.profiles.step_model.StepModel` separates:

* dense (non-attention) time of ``n`` tokens: the shared pass of a mixed step of ``n``
  prompt tokens and no decodes;
* decode attention of ``B`` sequences at context ``C``;
* context attention of a prompt chunk of ``q`` tokens after ``p`` already prefilled.

:meth:`MeasuredEngine.step_ms` is the **measured estimate** every profile is checked against:
the same three passes for ``B`` decodes at context ``C`` plus one fresh prompt of ``P`` tokens,
which is how the estimator itself composes a mixed step (its ``mixed_step_latency`` ties the
decodes' context to the prompt's length; here they are set apart, so the grid can vary them
independently). A pure decode step is the estimator's own ``decode_step_latency``.

The estimator writes a line to stderr for every table it loads with low-fidelity fallback
rows; those lines are captured and kept as the engine's ``notes``, not printed.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

from planner.profiles.geometry import ModelGeometry, from_hf_config, read_hf_config
from planner.profiles.step_model import KNOT_TOKENS, StepModel, causal_pairs

ENGINES: tuple[str, ...] = ("vllm", "sglang", "trtllm")
DEFAULT_ENGINE = "vllm"

SYSTEMS: dict[str, str] = {
    "A100-80GB": "a100_sxm",
    "H100": "h100_sxm",
    "H200": "h200_sxm",
    "B200": "b200_sxm",
    "B300": "b300_sxm",
    "L40S": "l40s",
}
"""Catalog SKU → the estimator's system with measured tables for every engine. Other catalog SKUs
(A100-40GB, L4, MI300X) have none and take the roofline (``roofline.py``)."""

MODEL_PATHS: dict[str, str] = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
}
"""The served models by their Hugging Face names, whose configs ship with the estimator."""

# Points the attention parts are fitted on (decode: batch × context; prefill: chunk × prefix).
DECODE_FIT_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DECODE_FIT_CONTEXT = (128, 512, 2048, 8192, 32768)
PREFILL_FIT_CHUNK = (16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
PREFILL_FIT_PREFIX = (0, 2048, 8192)
MAX_DENSE_DIP = 0.25
"""A larger step measured this much faster than a smaller one is a fault in the tables, not a kernel
choice: the profile is not built from them."""


class NotMeasured(Exception):
    """The tables have no data for some kernel this (model, SKU, TP, engine) runs."""


def estimator_version() -> str:
    return metadata.version("aiconfigurator-core")


def _quiet_logging() -> None:
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)


@dataclass
class MeasuredEngine:
    """The estimator compiled for one (model, SKU, TP, engine); see the module docstring."""

    model: str
    sku: str
    tp: int
    engine: str
    notes: list[str] = field(default_factory=list)

    @cached_property
    def _handle(self) -> Any:
        from aiconfigurator_core.sdk.engine import EngineHandle

        _quiet_logging()
        extra = {"moe_tp_size": self.tp} if self.model == "qwen3-235b-a22b" else {}
        captured = io.StringIO()
        with contextlib.redirect_stderr(captured):
            handle = EngineHandle.compile(MODEL_PATHS[self.model], SYSTEMS[self.sku], self.engine,
                                          tp_size=self.tp, **extra)
        self.notes.extend(line for line in captured.getvalue().splitlines() if line.strip())
        return handle

    def _parts(self, ctx_tokens: int, decodes: int, isl: int) -> tuple[float, float, float]:
        """(dense, context attention, decode attention) ms of the estimator's mixed step."""
        from aiconfigurator_core.sdk.errors import PerfDataNotAvailableError

        try:
            _total, dense, context, decode = self._handle.mixed_step_breakdown(ctx_tokens, decodes, isl, 2, 0)
        except PerfDataNotAvailableError as error:
            raise NotMeasured(str(error).split(" at /")[0]) from error
        return dense, context, decode

    def dense_ms(self, tokens: int) -> float:
        return self._parts(tokens, 0, tokens)[0]

    def decode_attention_ms(self, batch: int, context: int) -> float:
        # the estimator reads a decode's context as isl + osl/2 + 1: isl = C − 2 with osl = 2 gives C
        return self._parts(1, batch, context - 2)[2]

    def prefill_attention_ms(self, chunk: int, prefix: int) -> float:
        # a prefill after a cached prefix: the estimator's prefill of chunk + prefix tokens with the
        # prefix cached, less the chunk's dense time (its mixed step does not model a prefix)
        if prefix == 0:
            return self._parts(chunk, 0, chunk)[1]
        return float(self._handle.predict_prefill_latency(1, chunk + prefix, prefix)) - self.dense_ms(chunk)

    def step_ms(self, batch: int, context: int, prefill: int) -> float:
        """The measured estimate of one step (module docstring)."""
        if prefill == 0:
            return float(self._handle.decode_step_latency(batch, context - 2, 2))
        dense, attention, _ = self._parts(prefill, batch, prefill)
        if batch > 0:
            attention += self.decode_attention_ms(batch, context)
        return dense + attention

    def fit(self) -> StepModel:
        """The step model: the dense table read at the knots, the attention parts fitted.

        The dense table is made non-decreasing by taking at each knot the least time of any
        knot at or above it: an engine can always pad a step to a larger size it runs faster
        (vLLM pads to its captured CUDA-graph sizes for this reason), so a larger step that
        the tables show as faster bounds the smaller one. This also removes the rare spike
        where a table falls back to poor data.
        """
        measured = np.array([self.dense_ms(n) for n in KNOT_TOKENS])
        floor = np.minimum.accumulate(measured[::-1])[::-1]
        worst = int(np.argmin(floor / measured))
        if floor[worst] < (1.0 - MAX_DENSE_DIP) * measured[worst]:
            larger = next(i for i in range(worst, len(KNOT_TOKENS)) if measured[i] == floor[worst])
            raise NotMeasured(f"a dense table that is not monotone ({KNOT_TOKENS[worst]} tokens take "
                              f"{measured[worst]:.1f} ms, {KNOT_TOKENS[larger]} tokens {measured[larger]:.1f} ms)")
        dense = tuple(float(v) for v in floor)
        decode_rows = [(1.0, b, b * c) for b in DECODE_FIT_BATCH for c in DECODE_FIT_CONTEXT]
        decode = fit_relative([self.decode_attention_ms(b, c) for b in DECODE_FIT_BATCH for c in DECODE_FIT_CONTEXT],
                              decode_rows)
        prefill_rows = [(1.0, q, causal_pairs(q, p)) for q in PREFILL_FIT_CHUNK for p in PREFILL_FIT_PREFIX]
        prefill = fit_relative([self.prefill_attention_ms(q, p) for q in PREFILL_FIT_CHUNK for p in PREFILL_FIT_PREFIX],
                               prefill_rows)
        return StepModel.from_parts(decode + prefill, dense)


def fit_relative(observed: list[float], rows: Sequence[tuple[float, ...]]) -> tuple[float, ...]:
    """Non-negative least squares on relative error: each row is weighted by 1 / its observation.

    Relative, because the attention parts span three orders of magnitude over the grid and the
    profile's error is judged relative to the step; non-negative, because a negative fixed or
    per-sequence cost would make small steps faster than nothing.
    """
    y = np.asarray(observed, dtype=np.float64)
    design = np.asarray(rows, dtype=np.float64)
    weight = 1.0 / np.maximum(y, 1e-6)
    scale = np.abs(design).max(axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(design / scale * weight[:, None], y * weight)
    return tuple(float(v) for v in solution / scale)


def hf_geometries() -> dict[str, ModelGeometry]:
    """Every served model's geometry, from the Hugging Face config shipped with the estimator."""
    import aiconfigurator_core

    configs = Path(aiconfigurator_core.__file__).parent / "model_configs"
    return {model: from_hf_config(model, path, read_hf_config(configs / f"{path.replace('/', '--')}_config.json"))
            for model, path in MODEL_PATHS.items()}

"""Build the profile table: one row per (model, SKU, TP, engine) that fits on one node.

Sizing rules (GB = 1e9 bytes; HBM from the catalog's ``skus.csv``):

* **KV capacity** of a replica of TP GPUs, as a serving engine sizes it: of each GPU's HBM,
  ``gpu_memory_utilization`` (vLLM's default 0.9) is the engine's; from that come the GPU's
  share of the weights and ACTIVATION_RESERVE (peak activations of a full token budget, CUDA
  graphs and collective buffers); the rest is KV cache in whole blocks of the engine's block
  size::

      per_gpu_bytes = HBM · gpu_memory_utilization − weights / TP − ACTIVATION_RESERVE
      kv_capacity_tokens = block · ⌊per_gpu_bytes / kv_bytes_per_token_per_gpu(TP) / block⌋

  with the model's real KV geometry (``geometry.py``: GQA heads, head dim, bf16).
* **Tensor parallelism**: every TP in {1, 2, 4, 8}, up to the SKU's ``max_gpus_per_node``,
  that leaves at least MIN_KV_TOKENS of KV cache, is a candidate; calibration evaluates each
  and the placement program chooses.
* **Engine defaults**: ``max_num_seqs`` and ``max_num_batched_tokens`` are the engine's own
  defaults for an API server; calibration searches around them.

Step models come from the measured tables (``measured.py``) on the SKUs that have them, and
from the roofline (``roofline.py``) elsewhere. Every measured profile's error against the
measured estimate over its operating grid is in its row; a roofline row carries the
roofline's error on the measured SKUs it was not fitted to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import pandas as pd

from planner.profiles.geometry import ModelGeometry
from planner.profiles.measured import ENGINES, SYSTEMS, MeasuredEngine, NotMeasured, estimator_version
from planner.profiles.roofline import Efficiency, Target, calibrate, efficiency_names, roofline_step_model
from planner.profiles.specs import SkuSpec
from planner.profiles.step_model import StepError, StepModel, operating_grid, uniform_steps_ms

GPU_MEMORY_UTILIZATION = 0.9
ACTIVATION_RESERVE_GB_PER_GPU = 2.0
MIN_KV_TOKENS = 16_384
TP_CHOICES = (1, 2, 4, 8)
KV_BLOCK_TOKENS: dict[str, int] = {"vllm": 16, "sglang": 1, "trtllm": 32}
"""KV block (page) size in tokens: vLLM's ``--block-size`` default, SGLang's token-level pool
(page size 1), TensorRT-LLM's ``tokens_per_block`` default."""
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
ROOFLINE_ENGINES: dict[str, tuple[str, ...]] = {"NVIDIA": ENGINES, "AMD": ("vllm", "sglang")}
"""Engines that run on each vendor's GPUs (TensorRT-LLM is NVIDIA-only)."""
SIGNIFICANT_DIGITS = 6


def kv_capacity_tokens(geometry: ModelGeometry, spec: SkuSpec, tp: int, engine: str,
                       gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION) -> int:
    """Tokens of KV cache one replica holds (module docstring); 0 or less when it does not fit."""
    per_gpu = (spec.hbm_bytes * gpu_memory_utilization - geometry.weights_bytes / tp
               - ACTIVATION_RESERVE_GB_PER_GPU * 1e9)
    block = KV_BLOCK_TOKENS[engine]
    return block * math.floor(per_gpu / geometry.kv_bytes_per_token_per_gpu(tp) / block)


def candidate_tps(geometry: ModelGeometry, spec: SkuSpec, engine: str) -> list[int]:
    """The tensor-parallel degrees on one node that leave MIN_KV_TOKENS of KV cache."""
    return [tp for tp in TP_CHOICES
            if tp <= spec.max_gpus_per_node and geometry.attention_heads % tp == 0
            and kv_capacity_tokens(geometry, spec, tp, engine) >= MIN_KV_TOKENS]


def _sig(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


@dataclass(frozen=True)
class ProfileBuild:
    profiles: pd.DataFrame
    roofline_check: pd.DataFrame
    efficiency: pd.DataFrame


@dataclass(frozen=True)
class _Measured:
    geometry: ModelGeometry
    spec: SkuSpec
    tp: int
    engine: str
    step: StepModel
    points: np.ndarray
    measured_ms: np.ndarray


def profile_row(geometry: ModelGeometry, spec: SkuSpec, tp: int, engine: str, step: StepModel, source: str,
                detail: str, error: StepError) -> dict[str, object]:
    """One row of the profile table: the replica sized by the rules above, with ``step`` and its error."""
    row: dict[str, object] = {
        "model": geometry.model, "sku": spec.sku, "tp_degree": tp, "engine": engine,
        "weights_gb": _sig(geometry.weights_bytes / 1e9),
        "kv_bytes_per_token": geometry.kv_bytes_per_token_per_gpu(tp) * tp,
        "kv_block_tokens": KV_BLOCK_TOKENS[engine],
        "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
        "kv_capacity_tokens": kv_capacity_tokens(geometry, spec, tp, engine),
        "max_num_seqs": DEFAULT_MAX_NUM_SEQS,
        "max_num_batched_tokens": DEFAULT_MAX_NUM_BATCHED_TOKENS,
        "source": source,
        "source_detail": detail,
        "err_points": error.points,
        "err_median_pct": round(error.median_pct, 2),
        "err_p95_pct": round(error.p95_pct, 2),
        "err_max_pct": round(error.max_pct, 2),
    }
    row.update(step.rounded(SIGNIFICANT_DIGITS).to_row())
    return row


def _measure(geometry: ModelGeometry, spec: SkuSpec, tp: int, engine: str) -> _Measured:
    measured = MeasuredEngine(geometry.model, spec.sku, tp, engine)
    points = np.asarray(operating_grid(kv_capacity_tokens(geometry, spec, tp, engine)), dtype=np.float64)
    reference = np.array([measured.step_ms(int(b), int(c), int(p)) for b, c, p in points])
    # the table stores 6 significant digits: judge the model as it will be read back
    step = measured.fit().rounded(SIGNIFICANT_DIGITS)
    return _Measured(geometry, spec, tp, engine, step, points, reference)


def _roofline(measured: list[_Measured], held_out: str | None) -> Efficiency:
    return calibrate([Target(m.geometry, m.spec, m.tp, m.points, m.measured_ms)
                      for m in measured if m.spec.sku != held_out])


def build_profiles(geometries: Mapping[str, ModelGeometry], specs: Mapping[str, SkuSpec],
                   progress: Callable[[str], None] | None = None) -> ProfileBuild:
    """Every profile of every model on every catalog SKU it fits, measured where the tables exist."""
    say = progress or (lambda _message: None)
    version = estimator_version()
    rows, efficiencies = [], []
    checks: list[_CheckRow] = []
    for engine in ENGINES:
        measured: list[_Measured] = []
        unmeasured: list[tuple[ModelGeometry, SkuSpec, int, str]] = []
        for geometry in geometries.values():
            for sku in SYSTEMS:
                spec = specs[sku]
                for tp in candidate_tps(geometry, spec, engine):
                    say(f"measuring {geometry.model} on {tp} x {sku} under {engine}")
                    try:
                        m = _measure(geometry, spec, tp, engine)
                    except NotMeasured as why:
                        say(f"  no measured data ({why}): roofline instead")
                        unmeasured.append((geometry, spec, tp, str(why)))
                        continue
                    measured.append(m)
                    error = StepError.of(uniform_steps_ms(m.step, m.points), m.measured_ms)
                    rows.append(profile_row(geometry, spec, tp, engine, m.step, "measured",
                                            f"aiconfigurator-core {version}, {engine} tables", error))
        say(f"fitting the {engine} roofline and checking it on each measured SKU left out of its fit")
        checks.extend(_roofline_checks(engine, measured))
        overall = _error_of(checks[-2])
        eff = _roofline(measured, held_out=None)
        efficiencies.append({"engine": engine, **{k: _sig(getattr(eff, k)) for k in efficiency_names()}})
        detail = (f"roofline fitted to the {engine} tables of aiconfigurator-core {version}; "
                  "error columns: its error on measured SKUs left out of the fit")
        for geometry in geometries.values():
            for sku, spec in specs.items():
                if sku in SYSTEMS or engine not in ROOFLINE_ENGINES.get(spec.vendor, ENGINES):
                    continue
                for tp in candidate_tps(geometry, spec, engine):
                    step = roofline_step_model(geometry, spec, tp, eff)
                    rows.append(profile_row(geometry, spec, tp, engine, step, "roofline", detail, overall))
        for geometry, spec, tp, gap in unmeasured:
            step = roofline_step_model(geometry, spec, tp, eff)
            rows.append(profile_row(geometry, spec, tp, engine, step, "roofline", f"the tables lack {gap}; {detail}",
                                    overall))
    profiles = pd.DataFrame(rows).sort_values(["model", "sku", "tp_degree", "engine"], kind="stable")
    return ProfileBuild(profiles.reset_index(drop=True), pd.DataFrame(checks), pd.DataFrame(efficiencies))


class _ErrorColumns(TypedDict):
    """A step error as the tables store it: per cent to two decimals."""

    err_points: int
    err_median_pct: float
    err_p95_pct: float
    err_max_pct: float


class _CheckRow(_ErrorColumns):
    """One row of the roofline check table."""

    engine: str
    sku: str
    check: str


def _error_columns(error: StepError) -> _ErrorColumns:
    return {"err_points": error.points, "err_median_pct": round(error.median_pct, 2),
            "err_p95_pct": round(error.p95_pct, 2), "err_max_pct": round(error.max_pct, 2)}


def _error_of(columns: _ErrorColumns) -> StepError:
    """The error a table row stores, as rounded there."""
    return StepError(columns["err_points"], columns["err_median_pct"], columns["err_p95_pct"],
                     columns["err_max_pct"])


def _predictable(m: _Measured, measured: list[_Measured], held_out: str) -> bool:
    """Whether the SKUs other than ``held_out`` inform this profile's roofline: a PCIe-only SKU's
    all-reduce across the host (TP > 2) is fitted on PCIe-only SKUs alone."""
    if not (m.spec.pcie_only and m.tp > 2):
        return True
    return any(o.spec.pcie_only and o.tp > 2 and o.spec.sku != held_out for o in measured)


def _roofline_checks(engine: str, measured: list[_Measured]) -> list[_CheckRow]:
    """The roofline's error on each measured SKU from a fit without it, then over all of them
    (the figure a roofline profile carries), then in sample (fitted on every SKU)."""
    rows: list[_CheckRow] = []
    predicted, observed = [], []
    for sku in dict.fromkeys(m.spec.sku for m in measured):
        eff = _roofline(measured, held_out=sku)
        mine = [m for m in measured if m.spec.sku == sku and _predictable(m, measured, sku)]
        skipped = sorted({m.tp for m in measured if m.spec.sku == sku and not _predictable(m, measured, sku)})
        pred = np.concatenate([uniform_steps_ms(roofline_step_model(m.geometry, m.spec, m.tp, eff), m.points)
                               for m in mine])
        obs = np.concatenate([m.measured_ms for m in mine])
        predicted.append(pred)
        observed.append(obs)
        scope = "left out of the fit" + (f"; TP {', '.join(map(str, skipped))} not checked: the all-reduce across "
                                         "the host is fitted on this SKU alone" if skipped else "")
        rows.append({"engine": engine, "sku": sku, "check": scope, **_error_columns(StepError.of(pred, obs))})
    rows.append({"engine": engine, "sku": "all", "check": "each SKU left out of the fit",
                 **_error_columns(StepError.of(np.concatenate(predicted), np.concatenate(observed)))})
    eff = _roofline(measured, held_out=None)
    pred = np.concatenate([uniform_steps_ms(roofline_step_model(m.geometry, m.spec, m.tp, eff), m.points)
                           for m in measured])
    rows.append({"engine": engine, "sku": "all", "check": "in sample (fitted on every SKU)",
                 **_error_columns(StepError.of(pred, np.concatenate([m.measured_ms for m in measured])))})
    return rows

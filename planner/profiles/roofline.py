r"""A roofline step model for SKUs without measured tables, calibrated on the SKUs that have them.

For a replica of TP GPUs of a SKU with HBM bandwidth BW, dense BF16 throughput F and a
per-GPU interconnect of bandwidth L, and a model with ``layers`` layers:

    D(n) = layers · o_dense + max(W(n) / (e_w · BW), 2 · A · n / (e_f · F)) + AR(n)
    W(n) = weight bytes one GPU reads for n tokens (all of its share of a dense model; for a
           mixture of experts, the shared weights plus the experts the n tokens touch,
           E · (1 − (1 − k/E)ⁿ) per layer)
    A    = active parameters per GPU
    AR(n) = [TP > 1] · 2 · layers · (ℓ_ar + 2 (TP − 1)/TP · n · hidden · 2 bytes / (e_l · L))
           (on a GPU fabric, NVLink or Infinity Fabric, and between the two GPUs of a PCIe switch,
           e_l is one efficiency; on PCIe-only SKUs beyond two GPUs the all-reduce crosses the
           host, whose one link the TP/2 switch pairs share: e_l = e_host / (TP/2))

    decode attention  = layers · (δ + β · n_d) + K_d · kv_bytes_per_token_per_gpu / (e_a · BW)
    prefill attention = layers · γ₀ + Q · 4 · layers · (heads / TP) · head_dim / (e_p · F)

Two all-reduces per layer (after attention and after the MLP) of n tokens' hidden states;
4·head_dim FLOPs per query-key pair per head (QKᵀ and PV, a multiply-add each).

The efficiencies e_*, the per-layer overheads o_dense, δ, β, γ₀ and the all-reduce latency
ℓ_ar are one :class:`Efficiency` per serving engine, fitted (:func:`calibrate`) to the
measured estimate of every measured (model, SKU, TP) of that engine by least squares on
log(roofline / measured). Its error on the measured SKUs, each predicted by a fit that did
not see it (leave one SKU out), is what ``roofline_check.csv`` and ``data/README.md`` report for
the roofline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields

import numpy as np
from scipy.optimize import least_squares

from planner.profiles.geometry import ModelGeometry
from planner.profiles.specs import SkuSpec
from planner.profiles.step_model import KNOT_TOKENS, StepModel, uniform_steps_ms


@dataclass(frozen=True)
class Efficiency:
    """The fitted constants of the roofline (module docstring); times in ms."""

    weight_bw: float
    flops: float
    dense_ms_per_layer: float
    link_bw: float
    host_bw: float
    allreduce_ms: float
    attention_bw: float
    decode_ms_per_layer: float
    decode_ms_per_seq_per_layer: float
    prefill_flops: float
    prefill_ms_per_layer: float


START = Efficiency(0.8, 0.6, 0.01, 0.5, 0.5, 0.01, 0.6, 0.005, 0.0001, 0.4, 0.01)


def weight_bytes_read(geometry: ModelGeometry, tp: int, tokens: np.ndarray) -> np.ndarray:
    """W(n): bytes of weights one GPU reads in a step of ``tokens`` tokens."""
    if not geometry.is_moe:
        return np.full_like(tokens, geometry.weights_bytes / tp, dtype=np.float64)
    experts, top_k = geometry.experts, geometry.experts_per_token
    expert_params = (geometry.params_total - geometry.params_active) / (experts - top_k)
    shared_params = geometry.params_total - experts * expert_params
    touched = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    return (shared_params + touched * expert_params) * geometry.bytes_per_value / tp


def roofline_step_model(geometry: ModelGeometry, spec: SkuSpec, tp: int, eff: Efficiency) -> StepModel:
    """The step model of ``geometry`` on ``tp`` GPUs of ``spec`` (module docstring)."""
    n = np.asarray(KNOT_TOKENS, dtype=np.float64)
    memory_ms = weight_bytes_read(geometry, tp, n) / (eff.weight_bw * spec.bandwidth_bytes_per_s) * 1e3
    compute_ms = 2.0 * geometry.params_active / tp * n / (eff.flops * spec.bf16_flops_per_s) * 1e3
    dense = geometry.layers * eff.dense_ms_per_layer + np.maximum(memory_ms, compute_ms)
    if tp > 1:
        message = 2.0 * (tp - 1) / tp * n * geometry.hidden_size * geometry.bytes_per_value
        across_host = spec.pcie_only and tp > 2
        link = (eff.host_bw / (tp / 2) if across_host else eff.link_bw) * spec.link_bytes_per_s
        dense = dense + 2 * geometry.layers * (eff.allreduce_ms + message / link * 1e3)
    heads_per_gpu = geometry.attention_heads / tp
    return StepModel(
        decode_attn_ms_fixed=geometry.layers * eff.decode_ms_per_layer,
        decode_attn_ms_per_seq=geometry.layers * eff.decode_ms_per_seq_per_layer,
        decode_attn_ms_per_kv_token=geometry.kv_bytes_per_token_per_gpu(tp) / (eff.attention_bw
                                                                              * spec.bandwidth_bytes_per_s) * 1e3,
        prefill_attn_ms_fixed=geometry.layers * eff.prefill_ms_per_layer,
        prefill_attn_ms_per_token=0.0,
        prefill_attn_ms_per_pair=4.0 * geometry.layers * heads_per_gpu * geometry.head_dim
        / (eff.prefill_flops * spec.bf16_flops_per_s) * 1e3,
        dense_ms=tuple(float(v) for v in dense),
    )


@dataclass(frozen=True)
class Target:
    """One measured (model, SKU, TP): its steps and their measured estimates in ms."""

    geometry: ModelGeometry
    spec: SkuSpec
    tp: int
    points: np.ndarray  # [i, (batch, context, prefill)]
    measured_ms: np.ndarray  # [i]


def _residuals(log_eff: np.ndarray, targets: Sequence[Target]) -> np.ndarray:
    eff = Efficiency(*np.exp(log_eff))
    parts = [np.log(uniform_steps_ms(roofline_step_model(t.geometry, t.spec, t.tp, eff), t.points) / t.measured_ms)
             for t in targets]
    return np.concatenate(parts)


def calibrate(targets: Sequence[Target]) -> Efficiency:
    """The efficiencies that fit ``targets`` best in log error; deterministic (fixed start, no randomness)."""
    fit = least_squares(_residuals, np.log(np.asarray(astuple(START))), args=(targets,), loss="soft_l1",
                        f_scale=0.1, max_nfev=400)
    return Efficiency(*(float(v) for v in np.exp(fit.x)))


def efficiency_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Efficiency))

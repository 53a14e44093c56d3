"""Build the profile table: one row per (model, SKU) where the model fits on one node.

Sizing rules (GB = 1e9 bytes; HBM figures from the catalog's ``skus.csv``):

* **KV capacity** of a replica of TP GPUs::

      kv_capacity_tokens = floor((TP * HBM * MEM_UTIL - weights - TP * ACTIVATION_RESERVE) / kv_bytes_per_token)

  with MEM_UTIL = 0.9 (the usual serving-engine memory fraction; the rest is CUDA context,
  allocator slack and fragmentation) and ACTIVATION_RESERVE = 2 GB per GPU (peak activations
  of an 8k-token prefill chunk, CUDA graphs and collective-communication buffers).
* **Tensor parallelism**: the smallest TP in {1, 2, 4, 8}, and no larger than the SKU's
  ``max_gpus_per_node``, whose KV capacity is at least MIN_KV_TOKENS = 16,384 tokens (eight
  requests of 2,048 tokens, or one 16k-context request). A model that needs more than one
  node of a SKU does not fit it and gets no row. For llama2-70b on 80 GB GPUs this rule gives
  TP4 (TP2 would leave ~6k tokens), which is also the measured configuration used as the
  production one (``PRODUCTION_TP``); TP2 and TP8 fits are kept in ``fit_report.csv``.
* **max_batch** = min(256, floor(kv_capacity_tokens / 2,048)): 2,048 tokens is the mean
  prompt of the Azure 2023 code trace (and above the conversation trace's mean prompt plus
  output, ~1,370), so this many typical requests fit in the KV cache at once.

Measured pairs (llama2-70b on A100-80GB and H100) take (a, b, c) from the fit at the
production TP; every other pair takes them from the roofline (``roofline.py``), calibrated
on the fits of llama2-70b on those two SKUs at TP 2, 4 and 8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.profiles.fit import StepTimeCoefficients, fit_all
from planner.profiles.geometry import MODELS, ModelGeometry, geometry_for
from planner.profiles.loader import PROFILE_COLUMNS
from planner.profiles.roofline import (
    CalibrationTarget,
    Efficiency,
    calibrate,
    coefficient_ratios,
    roofline_coefficients,
)
from planner.profiles.specs import SkuSpec

MEM_UTIL = 0.9
ACTIVATION_RESERVE_GB_PER_GPU = 2.0
MIN_KV_TOKENS = 16_384
TP_CHOICES = (1, 2, 4, 8)
TYPICAL_CONTEXT_TOKENS = 2_048
MAX_BATCH_CAP = 256
PRODUCTION_TP: dict[str, int] = {"llama2-70b": 4}
"""The measured TP whose fit becomes each measured model's profile."""

SIGNIFICANT_DIGITS = 6


@dataclass(frozen=True)
class ProfileBuild:
    profiles: pd.DataFrame
    fit_report: pd.DataFrame
    efficiency: Efficiency


def kv_capacity_tokens(geometry: ModelGeometry, spec: SkuSpec, tp_degree: int) -> int:
    """Tokens of KV cache a replica holds after weights and activation reserve (may be <= 0)."""
    free_bytes = (
        tp_degree * spec.hbm_bytes * MEM_UTIL
        - geometry.weights_bytes
        - tp_degree * ACTIVATION_RESERVE_GB_PER_GPU * 1e9
    )
    return math.floor(free_bytes / geometry.kv_bytes_per_token)


def choose_tp(geometry: ModelGeometry, spec: SkuSpec) -> int | None:
    """The smallest TP that leaves MIN_KV_TOKENS of KV cache on one node, or None."""
    for tp in TP_CHOICES:
        if tp <= spec.max_gpus_per_node and kv_capacity_tokens(geometry, spec, tp) >= MIN_KV_TOKENS:
            return tp
    return None


def max_batch(kv_tokens: int) -> int:
    return max(1, min(MAX_BATCH_CAP, kv_tokens // TYPICAL_CONTEXT_TOKENS))


def _sig(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    return float(f"{value:.{digits}g}")


def _coefficients(row: pd.Series) -> StepTimeCoefficients:
    return StepTimeCoefficients(
        float(row["a_ms"]), float(row["b_ms_per_kv_token"]), float(row["c_ms_per_prefill_token"])
    )


def _served_fits(fits: pd.DataFrame, specs: dict[str, SkuSpec]) -> pd.DataFrame:
    """Fits of served models on catalog SKUs: the calibration targets."""
    served = fits[fits["model"].isin(list(MODELS)) & (fits["sku"] != "")]
    for _, row in served.iterrows():
        if row["sku"] not in specs:
            raise InputError(
                f"measured hardware {row['hardware']} maps to SKU {row['sku']!r}, which the SKU table lacks",
                where="skus.csv",
                fix=f"add a row for {row['sku']} to the catalog's skus.csv",
            )
    return served


def _production_fits(served: pd.DataFrame) -> dict[tuple[str, str], pd.Series]:
    """The fit rows that become profiles (the production TP), keyed by (model, sku)."""
    return {
        (row["model"], row["sku"]): row
        for _, row in served.iterrows()
        if PRODUCTION_TP.get(row["model"]) == row["tp_degree"]
    }


def _fit_report(fits: pd.DataFrame, specs: dict[str, SkuSpec], efficiency: Efficiency) -> pd.DataFrame:
    report = fits.copy()
    report.insert(4, "production", [PRODUCTION_TP.get(m) == tp for m, tp in zip(report["model"], report["tp_degree"])])
    ratios = []
    for _, row in report.iterrows():
        if row["sku"] in specs:
            predicted = roofline_coefficients(geometry_for(row["model"]), specs[row["sku"]], int(row["tp_degree"]), efficiency)
            ratios.append(coefficient_ratios(predicted, _coefficients(row)))
        else:
            ratios.append(np.full(3, np.nan))
    stacked = np.vstack(ratios)
    for position, name in enumerate(("roofline_a_ratio", "roofline_b_ratio", "roofline_c_ratio")):
        report[name] = np.round(stacked[:, position], 3)
    for column in ("a_ms", "b_ms_per_kv_token", "c_ms_per_prefill_token"):
        report[column] = report[column].map(_sig)
    for column in [c for c in report.columns if c.endswith("_pct")]:
        report[column] = report[column].round(2)
    return report


def _roofline_note(geometry: ModelGeometry, spec: SkuSpec, tp_degree: int, efficiency: Efficiency) -> str:
    parts = [
        f"roofline on {spec.sku} specs (eff_bw_weights {efficiency.eff_bw_weights:.3f}, "
        f"eff_bw_attention {efficiency.eff_bw_attention:.3f}, eff_flops {efficiency.eff_flops:.3f}, "
        f"overhead {efficiency.overhead_ms_per_layer:.3f} ms/layer; calibrated on measured llama2-70b A100/H100 fits)"
    ]
    if geometry.is_moe:
        parts.append("MoE: weight read uses total params, prefill FLOPs use active params")
    if tp_degree >= 8:
        parts.append("TP8: measured b does not shrink from TP4 to TP8, so b here is likely ~2x optimistic")
    if spec.sku.startswith("MI"):
        parts.append("non-NVIDIA SKU projected with NVIDIA-calibrated efficiencies")
    return "; ".join(parts)


def build_profiles(runs: pd.DataFrame, specs: dict[str, SkuSpec]) -> ProfileBuild:
    """Fit, calibrate and size: the profile table, the fit report and the calibrated efficiency."""
    fits = fit_all(runs)
    served = _served_fits(fits, specs)
    production = _production_fits(served)
    efficiency = calibrate(
        [
            CalibrationTarget(MODELS[row["model"]], specs[row["sku"]], int(row["tp_degree"]), _coefficients(row))
            for _, row in served.iterrows()
        ]
    )
    rows = []
    for model, geometry in MODELS.items():
        for sku in sorted(specs):
            spec = specs[sku]
            fit_row = production.get((model, sku))
            tp = int(fit_row["tp_degree"]) if fit_row is not None else choose_tp(geometry, spec)
            if tp is None:
                continue
            capacity = kv_capacity_tokens(geometry, spec, tp)
            if fit_row is not None:
                coefficients = _coefficients(fit_row)
                source, mape = "measured-fit", round(float(fit_row["overall_mape_pct"]), 2)
                note = (
                    f"robust fit of Splitwise perf_model {model} {fit_row['hardware']} TP{tp} "
                    f"({int(fit_row['n_runs'])} runs): prefill MAPE {fit_row['prefill_mape_pct']:.1f} %, "
                    f"decode MAPE {fit_row['decode_mape_pct']:.1f} %; TP2/TP8 fits in fit_report.csv"
                )
            else:
                coefficients = roofline_coefficients(geometry, spec, tp, efficiency)
                source, mape, note = "roofline", float("nan"), _roofline_note(geometry, spec, tp, efficiency)
            rows.append(
                {
                    "model": model,
                    "sku": sku,
                    "tp_degree": tp,
                    "weights_gb": round(geometry.weights_gb, 3),
                    "kv_bytes_per_token": geometry.kv_bytes_per_token,
                    "kv_capacity_tokens": capacity,
                    "a_ms": _sig(coefficients.a_ms),
                    "b_ms_per_kv_token": _sig(coefficients.b_ms_per_kv_token),
                    "c_ms_per_prefill_token": _sig(coefficients.c_ms_per_prefill_token),
                    "max_batch": max_batch(capacity),
                    "source": source,
                    "fit_mape_pct": mape,
                    "notes": note,
                }
            )
    profiles = pd.DataFrame(rows, columns=list(PROFILE_COLUMNS))
    return ProfileBuild(profiles=profiles, fit_report=_fit_report(fits, specs, efficiency), efficiency=efficiency)


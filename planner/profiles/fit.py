"""Fit the step-time model t_step = a + b*(KV tokens read) + c*(prefill tokens) to measured runs.

The measurements are Splitwise's ``perf_model.csv`` (Patel et al., ISCA 2024; MIT licence).
Each row is one run of ``batch_size`` = B requests, each with a prompt of ``prompt_size`` = p
tokens, generating ``token_size`` = T tokens, on one (model, hardware, tensor_parallel)
configuration. Every row gives two observations of one step:

* **Prefill**: ``prompt_time`` (ms) is one step that prefills the B prompts together, so it has
  B*p prefill tokens and reads ~0 cached KV tokens::

      prompt_time ~ a + c * (B * p)

* **Decode**: ``token_time`` (ms) is the mean over the T decode steps. Step j (j = 0..T-1) of a
  batch of B requests reads about B*(p + j) cached KV tokens; averaging over j gives
  B*(p + T/2) (the half-token offset between j and j+1 conventions is immaterial)::

      token_time ~ a + b * B * (p + T/2)

The fit is a robust nonlinear least squares (``scipy.optimize.least_squares``) on the
log-ratio residual r = log(predicted / observed), which is the relative error for small
errors and is symmetric for large ones, with the ``soft_l1`` loss at scale
``F_SCALE`` = 0.05 (residuals beyond about 5 % count linearly, not quadratically) and the
bounds a, b, c >= 0. Parameters are scaled by data-derived magnitudes so the solver is well
conditioned; the start point is deterministic, so the fit is reproducible.

Before fitting, exact duplicate rows are dropped (the sweep centre p=512, B=1, T=128 is
listed three times in the source) and the power-capped hardware ``h100-80gb-pcap`` is
excluded: it is not a catalog SKU, and its ``token_time`` values are copies of ``h100-80gb``.

Quality is reported per configuration as the mean absolute percentage error (MAPE),
separately for prefill and decode observations and overall. An observation whose prediction
is off by more than a factor of two is counted as an outlier (the TP2 batch-64 runs, whose
prefill is reported at an eighth of the batch-32 time, are such) and a MAPE without outliers
is also given.

Residual pattern, stated honestly: decode is fitted to about 3 %. Prefill is fitted to
about 15-20 %: the measured prefill is convex in the number of tokens, so the linear term
over-predicts mid-sized single prompts and under-predicts large batches. A quadratic
attention term d*B*p^2 (``prefill_mape_quadratic_pct``) reduces the prefill MAPE by only a
few points, because most of the curvature comes from batching B prompts (which the source
engine runs at more than B times one prompt's cost), not from prompt length. The
three-coefficient form is kept as the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from planner.errors import InputError
from planner.storage import read_table

PERF_COLUMNS = (
    "model",
    "hardware",
    "prompt_size",
    "batch_size",
    "token_size",
    "prompt_time",
    "token_time",
    "tensor_parallel",
)

MEASURED_HARDWARE: dict[str, str] = {"a100-80gb": "A100-80GB", "h100-80gb": "H100"}
"""Splitwise hardware names and the catalog SKU each one is."""

EXCLUDED_HARDWARE: dict[str, str] = {
    "h100-80gb-pcap": "power-capped H100: not a catalog SKU, and its token_time values copy h100-80gb",
}

F_SCALE = 0.05
"""soft_l1 scale on the log-ratio residual: errors beyond ~5 % are down-weighted."""

OUTLIER_RATIO = 2.0
"""An observation predicted more than 2x too high or too low is an outlier."""


@dataclass(frozen=True)
class StepTimeCoefficients:
    """t_step_ms = a_ms + b_ms_per_kv_token * kv_tokens + c_ms_per_prefill_token * prefill_tokens."""

    a_ms: float
    b_ms_per_kv_token: float
    c_ms_per_prefill_token: float

    def step_ms(self, kv_tokens: np.ndarray | float, prefill_tokens: np.ndarray | float) -> np.ndarray:
        return self.a_ms + self.b_ms_per_kv_token * np.asarray(kv_tokens) + self.c_ms_per_prefill_token * np.asarray(
            prefill_tokens
        )


@dataclass(frozen=True)
class Observations:
    """Step observations of one configuration: prefill rows first, then decode rows."""

    kv_tokens: np.ndarray
    prefill_tokens: np.ndarray
    prefill_tokens_squared: np.ndarray
    step_ms: np.ndarray
    is_prefill: np.ndarray


def read_perf_model(path: Path) -> pd.DataFrame:
    """Read Splitwise ``perf_model.csv``, check it, drop duplicates and excluded hardware."""
    runs = read_table(path)
    missing = [column for column in PERF_COLUMNS if column not in runs.columns]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}",
            where=path,
            fix=f"use Splitwise perf_model.csv with columns {', '.join(PERF_COLUMNS)}",
        )
    numeric = ["prompt_size", "batch_size", "token_size", "prompt_time", "token_time", "tensor_parallel"]
    for column in numeric:
        values = pd.to_numeric(runs[column], errors="coerce")
        bad = np.flatnonzero(~(values > 0))
        if bad.size:
            raise InputError(
                f"column '{column}' must be a positive number, got {runs[column].iloc[bad[0]]!r}",
                where=f"{path}, row {bad[0] + 1} (line {bad[0] + 2}), column '{column}'",
                fix="correct or remove that row",
            )
        runs[column] = values
    runs = runs.loc[~runs["hardware"].isin(list(EXCLUDED_HARDWARE)), list(PERF_COLUMNS)]
    return runs.drop_duplicates().reset_index(drop=True)


def observations(runs: pd.DataFrame) -> Observations:
    """Turn runs into prefill and decode step observations (see the module docstring)."""
    batch = runs["batch_size"].to_numpy(float)
    prompt = runs["prompt_size"].to_numpy(float)
    tokens = runs["token_size"].to_numpy(float)
    zeros = np.zeros_like(batch)
    return Observations(
        kv_tokens=np.concatenate([zeros, batch * (prompt + tokens / 2.0)]),
        prefill_tokens=np.concatenate([batch * prompt, zeros]),
        prefill_tokens_squared=np.concatenate([batch * prompt**2, zeros]),
        step_ms=np.concatenate([runs["prompt_time"].to_numpy(float), runs["token_time"].to_numpy(float)]),
        is_prefill=np.concatenate([np.ones_like(batch, dtype=bool), np.zeros_like(batch, dtype=bool)]),
    )


def _robust_fit(design: np.ndarray, observed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising sum soft_l1(log(design @ x / observed))."""

    def residual(theta: np.ndarray) -> np.ndarray:
        return np.log(design @ (theta * scale) / observed)

    result = least_squares(
        residual,
        np.ones(design.shape[1]),
        bounds=(0.0, np.inf),
        loss="soft_l1",
        f_scale=F_SCALE,
        method="trf",
        x_scale=1.0,
    )
    return result.x * scale


def _scales(obs: Observations) -> np.ndarray:
    """Deterministic magnitudes for a, b, c so the scaled start point (1, 1, 1) is sensible."""
    decode = ~obs.is_prefill
    a0 = float(np.min(obs.step_ms[decode]))
    spread = float(np.max(obs.step_ms[decode]) - a0)
    b0 = max(spread, 1e-3 * a0) / float(np.max(obs.kv_tokens))
    c0 = float(np.median(obs.step_ms[obs.is_prefill] / obs.prefill_tokens[obs.is_prefill]))
    return np.array([a0, b0, c0])


def fit_coefficients(runs: pd.DataFrame) -> StepTimeCoefficients:
    """Robust fit of (a, b, c) to the runs of one configuration."""
    obs = observations(runs)
    design = np.column_stack([np.ones_like(obs.step_ms), obs.kv_tokens, obs.prefill_tokens])
    a, b, c = _robust_fit(design, obs.step_ms, _scales(obs))
    return StepTimeCoefficients(float(a), float(b), float(c))


def quadratic_prefill_mape_pct(runs: pd.DataFrame) -> float:
    """Prefill MAPE of the diagnostic four-term fit a + b*kv + c*prefill + d*B*p^2."""
    obs = observations(runs)
    design = np.column_stack([np.ones_like(obs.step_ms), obs.kv_tokens, obs.prefill_tokens, obs.prefill_tokens_squared])
    scale = np.append(_scales(obs), 1e-3 * _scales(obs)[2] / float(np.median(runs["prompt_size"])))
    coefficients = _robust_fit(design, obs.step_ms, scale)
    predicted = design @ coefficients
    ape = np.abs(predicted - obs.step_ms) / obs.step_ms * 100.0
    return float(np.mean(ape[obs.is_prefill]))


def fit_quality(runs: pd.DataFrame, coefficients: StepTimeCoefficients) -> dict[str, float | int]:
    """MAPE and friends of a fit on its own runs, split by phase (percent)."""
    obs = observations(runs)
    predicted = coefficients.step_ms(obs.kv_tokens, obs.prefill_tokens)
    ape = np.abs(predicted - obs.step_ms) / obs.step_ms * 100.0
    ratio = predicted / obs.step_ms
    outlier = (ratio > OUTLIER_RATIO) | (ratio < 1.0 / OUTLIER_RATIO)
    prefill, decode = obs.is_prefill, ~obs.is_prefill
    return {
        "prefill_mape_pct": float(np.mean(ape[prefill])),
        "decode_mape_pct": float(np.mean(ape[decode])),
        "overall_mape_pct": float(np.mean(ape)),
        "prefill_median_ape_pct": float(np.median(ape[prefill])),
        "decode_median_ape_pct": float(np.median(ape[decode])),
        "max_ape_pct": float(np.max(ape)),
        "n_outliers": int(np.sum(outlier)),
        "overall_mape_excl_outliers_pct": float(np.mean(ape[~outlier])),
    }


def fit_all(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, hardware, tp_degree): coefficients and fit quality, sorted."""
    rows = []
    for (model, hardware, tp), group in runs.groupby(["model", "hardware", "tensor_parallel"], sort=True):
        coefficients = fit_coefficients(group)
        rows.append(
            {
                "model": model,
                "hardware": hardware,
                "sku": MEASURED_HARDWARE.get(hardware, ""),
                "tp_degree": int(tp),
                "n_runs": len(group),
                "a_ms": coefficients.a_ms,
                "b_ms_per_kv_token": coefficients.b_ms_per_kv_token,
                "c_ms_per_prefill_token": coefficients.c_ms_per_prefill_token,
                **fit_quality(group, coefficients),
                "prefill_mape_quadratic_pct": quadratic_prefill_mape_pct(group),
            }
        )
    return pd.DataFrame(rows)

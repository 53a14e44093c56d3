"""Whether measured step times are plausible for the key they are fitted to (``planner profiles fit``).

A step model fits step times in any unit equally well: a step log in seconds where milliseconds
are expected fits with the same small error and gives a profile 1,000 x too fast, which would
size every fleet built on it 1,000 x too small. So each measurement file's times are compared
with a reference before fitting:

* the **bundled profile** of the same (model, SKU, TP, engine) when there is one: the file's
  median ratio of measured to predicted time, step by step at the same batch, KV read and
  prefill, must lie within :data:`OUTLIER_FACTOR` either way (the bundled profiles are within
  about 30 % of measured engines at the p95, a different engine version within a few x);
* else a **physical floor**: every step reads the GPU's share of the weights from HBM at least
  once (``roofline.weight_bytes_read``, bf16), so a file whose median step is more than
  :data:`OUTLIER_FACTOR` x faster than that is no GPU (even 4-bit weights are only 4 x fewer
  bytes). Nothing bounds a slow step, so this side is one-sided.

A user who really measured such times passes :data:`ACCEPT_OPTION`; the outlier is then a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.profiles.geometry import ModelGeometry
from planner.profiles.measurements import Measurements
from planner.profiles.specs import SkuSpec
from planner.profiles.step_model import StepModel
from planner.profiles.user_fit import predict_ms

OUTLIER_FACTOR = 10.0
ACCEPT_OPTION = "--accept-outlier"


@dataclass(frozen=True)
class Reference:
    """What a key's step times are judged against: ``expected_ms`` per step, and whether slow steps count too."""

    what: str
    limit: str
    expected_ms: Callable[[pd.DataFrame], np.ndarray]
    two_sided: bool


def bundled_reference(step: StepModel, key: str) -> Reference:
    return Reference(f"the bundled profile of {key} predicts at the same batch, KV tokens and prefill",
                     f"more than {OUTLIER_FACTOR:g} x either way is not this deployment",
                     lambda steps: predict_ms(step, steps), two_sided=True)


def weights_floor_reference(geometry: ModelGeometry, spec: SkuSpec, tp: int) -> Reference:
    from planner.profiles.roofline import weight_bytes_read

    def floor_ms(steps: pd.DataFrame) -> np.ndarray:
        tokens = steps["batch_size"].to_numpy(float) + steps["prefill_tokens"].to_numpy(float)
        return weight_bytes_read(geometry, tp, tokens) / spec.bandwidth_bytes_per_s * 1e3

    return Reference(f"reading {geometry.model}'s bf16 weights once from HBM takes on {tp} x {spec.sku} "
                     f"({spec.hbm_bandwidth_gb_per_s:,.0f} GB/s per GPU), which every step does",
                     f"more than {OUTLIER_FACTOR:g} x below that is no GPU, even with 4-bit weights",
                     floor_ms, two_sided=False)


def _unit_hint(kind: str, ratio: float) -> str:
    """The likeliest cause of a file's times being ``ratio`` x the reference's."""
    if kind != "step log":  # benchmark_serving writes seconds, which the reader converts
        return "Check the file is the benchmark of this model, SKU, TP and engine"
    if ratio < 1.0:
        return "The unit looks wrong: step_ms in seconds rather than milliseconds"
    return "The unit looks wrong (step_ms in microseconds rather than milliseconds?), or the steps are of another " \
           "model, SKU, TP or engine"


def check_step_times(read: Measurements, reference: Reference, *, accept: bool) -> tuple[str, ...]:
    """Refuse (InputError naming the file) a file whose times are implausible; notes for outliers ``accept``-ed."""
    notes = []
    for source in read.files:
        steps = read.steps[read.steps["source"] == str(source.path)]
        if steps.empty:
            continue
        ratio = float(np.median(steps["step_ms"].to_numpy(float) / reference.expected_ms(steps)))
        too_slow = reference.two_sided and ratio > OUTLIER_FACTOR
        if not (ratio < 1.0 / OUTLIER_FACTOR or too_slow):
            continue
        off = max(ratio, 1.0 / ratio)
        off = round(off, 1 - int(np.floor(np.log10(off))))  # two digits: the noise of a median says no more
        factor = f"{off:,.0f} x {'longer' if ratio > 1.0 else 'shorter'}"
        problem = f"its {len(steps):,} steps are a median {factor} than {reference.what}; {reference.limit}"
        if accept:
            notes.append(f"{source.path}: {problem}; kept, as {ACCEPT_OPTION} asks")
            continue
        unit = "" if source.kind != "step log" else \
            f"give step_ms in milliseconds ({'microseconds / 1000' if ratio > 1.0 else 'seconds x 1000'}) and "
        raise InputError(f"{problem}. {_unit_hint(source.kind, ratio)}", where=source.path,
                         fix=f"{unit}check --model, --sku, --tp and --engine name what was measured; if these really "
                             f"are the times measured, pass {ACCEPT_OPTION}")
    return tuple(notes)

"""Capacity coefficients: the maximum request rate one replica sustains, per (model, SKU, class).

The placement program needs cap(s, m, k), the requests per second one replica of model m
on SKU s can carry for traffic class k. There are two sources:

* a **capacity table** (``--capacity``), columns ``model, sku, traffic_class,
  max_rps_per_replica`` and optionally ``policy, source``: normally the output of the
  fast-loop calibration (simulation against the SLO), validated here;
* until that exists, an **analytic estimate** from the profile's step-time model
  (``planner.profiles``), labelled :data:`ANALYTIC_LABEL` wherever it is used.

The analytic estimate. A replica running continuous batching with B requests in flight,
each with a prompt of P tokens and an output of O tokens (class means), spends per request
``c·P`` ms of step time on prefill and takes O decode steps, each of which serves all B
requests at once::

    t_step(B) = a + b · B · L            L = P + O/2   (mean KV tokens read per request per step)
    time for N requests = (N·O / B) · t_step(B) + N · c · P
    X(B) = B / (O · t_step(B) + B · c · P)          requests per ms

X grows with B (the fixed cost a is shared), so the replica runs at the largest batch it
can hold::

    B* = min(max_batch, floor(kv_fraction · kv_capacity_tokens / (P + O)))

where each request reserves its full P + O tokens of KV and admission keeps reserved KV
under ``kv_fraction`` (the scenario's ``policy.admission.kv_fraction``). If not even one
request fits (B* < 1), the class cannot run on that SKU and gets no row.
``max_rps_per_replica = 1000 · X(B*)``. This is a throughput ceiling: it ignores queueing
and the latency SLOs, which the simulation-based calibration accounts for. The placement
program multiplies every coefficient, from either source, by ``capacity.utilisation_cap``.

Token lengths default to :data:`DEFAULT_TOKEN_LENGTHS`, the request-weighted mean prompt and
output tokens per class of the bundled demo history (``data/history/demo_history.parquet``,
llama-3.1-8b rows: total prompt or output tokens / total requests, rounded to 10 tokens);
:func:`token_lengths_from_history` computes them from any demand history instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import InputError

ANALYTIC_LABEL = "analytic estimate (step-time model × utilisation cap)"
TABLE_LABEL = "capacity table"
REQUIRED_COLUMNS = ("model", "sku", "traffic_class", "max_rps_per_replica")
OPTIONAL_COLUMNS = ("policy", "source")
CAPACITY_COLUMNS = (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)
DECIMALS = 6


@dataclass(frozen=True)
class TokenLengths:
    """Mean tokens per request of one traffic class."""

    prompt_tokens: float
    output_tokens: float


DEFAULT_TOKEN_LENGTHS: dict[str, TokenLengths] = {
    "interactive": TokenLengths(prompt_tokens=1220.0, output_tokens=160.0),
    "standard": TokenLengths(prompt_tokens=1790.0, output_tokens=30.0),
    "batch": TokenLengths(prompt_tokens=1790.0, output_tokens=390.0),
}
"""Demo-history means (llama-3.1-8b): interactive 1,220.5 / 160.2, standard 1,786.0 / 29.4,
batch 1,786.0 / 394.5 prompt / output tokens per request."""

FALLBACK_TOKEN_LENGTHS = TokenLengths(prompt_tokens=1500.0, output_tokens=250.0)
"""For a class name with no default: between the demo classes; reported in the plan JSON."""


def token_lengths_from_history(history: pd.DataFrame) -> dict[str, TokenLengths]:
    """Request-weighted mean prompt and output tokens per traffic class of a demand history.

    Needs the columns ``traffic_class, requests, prompt_tokens_sum, output_tokens_sum``.
    """
    needed = ("traffic_class", "requests", "prompt_tokens_sum", "output_tokens_sum")
    missing = [c for c in needed if c not in history.columns]
    if missing:
        raise InputError(
            f"the demand history lacks {', '.join(missing)}",
            where="demand history",
            fix=f"pass a history with the columns {', '.join(needed)}",
        )
    sums = history.groupby("traffic_class", sort=True)[list(needed[1:])].sum()
    sums = sums[sums["requests"] > 0]
    return {
        str(k): TokenLengths(float(row.prompt_tokens_sum / row.requests), float(row.output_tokens_sum / row.requests))
        for k, row in sums.iterrows()
    }


def requests_per_second(profile: Mapping[str, float], lengths: TokenLengths, kv_fraction: float) -> float:
    """1000 · X(B*) for one profile row and one class's lengths; 0 when no request fits in KV."""
    prompt, output = lengths.prompt_tokens, lengths.output_tokens
    kv_batch = math.floor(kv_fraction * float(profile["kv_capacity_tokens"]) / (prompt + output))
    batch = min(int(profile["max_batch"]), kv_batch)
    if batch < 1:
        return 0.0
    context = prompt + output / 2.0
    t_step_ms = float(profile["a_ms"]) + float(profile["b_ms_per_kv_token"]) * batch * context
    per_ms = batch / (output * t_step_ms + batch * float(profile["c_ms_per_prefill_token"]) * prompt)
    return 1000.0 * per_ms


def analytic_capacity(
    profiles: pd.DataFrame,
    class_names: tuple[str, ...],
    *,
    kv_fraction: float,
    policy: str = "",
    token_lengths: Mapping[str, TokenLengths] | None = None,
) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """The analytic capacity table for every profiled (model, SKU) and every class.

    Returns the table (``CAPACITY_COLUMNS``, sorted by model, sku, class) and the token
    lengths used per class, so the plan JSON can say what the estimate assumed.
    """
    lengths = dict(DEFAULT_TOKEN_LENGTHS)
    if token_lengths:
        lengths.update(token_lengths)
    used: dict[str, dict[str, float]] = {}
    rows = []
    for profile in profiles.sort_values(["model", "sku"], kind="stable").to_dict("records"):
        for klass in sorted(class_names):
            length = lengths.get(klass, FALLBACK_TOKEN_LENGTHS)
            used[klass] = {
                "prompt_tokens": length.prompt_tokens,
                "output_tokens": length.output_tokens,
                "default_fallback": klass not in lengths,
            }
            rps = requests_per_second(profile, length, kv_fraction)
            if rps <= 0:
                continue
            rows.append(
                {
                    "model": profile["model"],
                    "sku": profile["sku"],
                    "traffic_class": klass,
                    "max_rps_per_replica": round(rps, DECIMALS),
                    "policy": policy,
                    "source": f"analytic: profile {profile['source']}, kv_fraction {kv_fraction:g}",
                }
            )
    return pd.DataFrame(rows, columns=list(CAPACITY_COLUMNS)), used


def validate_capacity(frame: pd.DataFrame, where: str | Path = "capacity table") -> pd.DataFrame:
    """Check a capacity table: required columns, positive finite rates, one row per key.

    Rows with a non-positive rate are errors (leave the row out when a class cannot run).
    Returns the table with ``policy`` and ``source`` filled ('' and 'capacity table').
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"the capacity table lacks the column(s) {', '.join(missing)}",
            where=where,
            fix=f"provide the columns {', '.join(REQUIRED_COLUMNS)} (optionally {', '.join(OPTIONAL_COLUMNS)})",
        )
    table = frame.reset_index(drop=True).copy()
    for column in ("model", "sku", "traffic_class"):
        table[column] = table[column].astype("string").fillna("").str.strip().astype(str)
        empty = np.flatnonzero((table[column] == "").to_numpy())
        if empty.size:
            raise InputError(
                f"empty {column}", where=f"{where}, row {empty[0] + 1}, column '{column}'", fix=f"fill in the {column}"
            )
    if pd.api.types.is_bool_dtype(table["max_rps_per_replica"]):
        raise InputError("max_rps_per_replica holds true/false values, not requests per second",
                         where=f"{where}, column 'max_rps_per_replica'",
                         fix="write the calibrated maximum requests per second of one replica (> 0)")
    rates = pd.to_numeric(table["max_rps_per_replica"], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~(np.isfinite(rates) & (rates > 0)))
    if bad.size:
        raise InputError(
            f"max_rps_per_replica must be a positive number, got {frame['max_rps_per_replica'].iloc[bad[0]]!r}",
            where=f"{where}, row {bad[0] + 1}, column 'max_rps_per_replica'",
            fix="write the calibrated maximum requests per second of one replica (> 0), "
            "or drop the row if the class cannot run on that SKU",
        )
    table["max_rps_per_replica"] = rates
    duplicated = np.flatnonzero(table.duplicated(subset=["model", "sku", "traffic_class"]).to_numpy())
    if duplicated.size:
        row = table.iloc[duplicated[0]]
        raise InputError(
            f"two rows for model {row['model']!r}, sku {row['sku']!r}, class {row['traffic_class']!r}",
            where=f"{where}, row {duplicated[0] + 1}",
            fix="keep one row per (model, sku, traffic_class)",
        )
    for column, default in (("policy", ""), ("source", TABLE_LABEL)):
        if column not in table.columns:
            table[column] = default
        table[column] = table[column].astype("string").fillna(default).astype(str)
    return table.loc[:, list(CAPACITY_COLUMNS)]

"""Capacity coefficients: the maximum request rate one replica sustains, per (model, SKU, TP, class).

The placement program needs cap(s, tp, m, k), the requests per second one replica of model
m on ``tp`` GPUs of SKU s can carry for traffic class k. There are two sources:

* a **capacity table** (``--capacity``), columns ``model, sku, tp_degree, traffic_class,
  max_rps_per_replica`` and optionally the engine settings that reach it (``engine,
  max_num_seqs, max_num_batched_tokens``) and ``policy, source``: normally the output of the
  fast-loop calibration (simulation against the SLO), validated here;
* until that exists, an **analytic estimate** from each profile's step-time model at the
  engine's default settings (:mod:`planner.profiles.throughput`: the throughput ceiling of
  the class's mean request), labelled :data:`ANALYTIC_LABEL` wherever it is used. It ignores
  queueing and the latency SLOs, which the simulation-based calibration accounts for. If not
  even one request fits (B* < 1), the class cannot run on that unit and gets no row.

The placement program multiplies every coefficient, from either source, by
``capacity.utilisation_cap``.

The estimate takes each (model, class)'s mean prompt and output tokens from its workload
(:mod:`planner.workloads`: declared, ingested or a built-in law named as a default), the first
turn's prompt for a class with sessions; it does not model prefix caching.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from planner.contracts.columns import CAPACITY_COLUMNS, CAPACITY_KEY, DEPLOYMENT_KEY, ENGINE_SETTING_COLUMNS
from planner.contracts.schemas import Problem, capacity_schema, raise_problems
from planner.errors import InputError
from planner.profiles.step_model import StepModel
from planner.profiles.throughput import ceiling

ANALYTIC_LABEL = "analytic estimate (step-time model × utilisation cap)"
TABLE_LABEL = "capacity table"
REQUIRED_COLUMNS = (*CAPACITY_KEY, "max_rps_per_replica")
POOL_COLUMN = "pool_replicas"
"""The validated table's attribute naming the pool sizes it had rows for above each deployment's smallest."""
OPTIONAL_COLUMNS = (POOL_COLUMN, *ENGINE_SETTING_COLUMNS, "policy", "source")
WHOLE_COLUMNS = ("tp_degree", POOL_COLUMN, "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold")
DECIMALS = 6


@dataclass(frozen=True)
class TokenLengths:
    """Mean tokens per request of one traffic class."""

    prompt_tokens: float
    output_tokens: float


def requests_per_second(profile: Mapping[str, object], lengths: TokenLengths, kv_fraction: float, *,
                        max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None) -> float:
    """The analytic ceiling in req/s for one profile row (at its engine defaults unless settings
    are given) and one class's mean lengths; 0 when no request fits in KV."""
    return ceiling(
        StepModel.from_row(profile), kv_capacity_tokens=int(profile["kv_capacity_tokens"]),  # type: ignore[call-overload]
        max_num_seqs=int(profile["max_num_seqs"] if max_num_seqs is None else max_num_seqs),  # type: ignore[call-overload]
        max_num_batched_tokens=int(profile["max_num_batched_tokens"]  # type: ignore[call-overload]
                                   if max_num_batched_tokens is None else max_num_batched_tokens),
        prompt=lengths.prompt_tokens, output=lengths.output_tokens, kv_fraction=kv_fraction).rps


def analytic_capacity(
    profiles: pd.DataFrame,
    token_lengths: Mapping[tuple[str, str], TokenLengths],
    *,
    kv_fraction: float,
    policy: str = "",
) -> pd.DataFrame:
    """The analytic capacity table for every profile row (model, SKU, TP) and every class with lengths for that
    model in ``token_lengths`` ((model, class) -> mean lengths).

    ``profiles`` holds the rows to place (one engine per model: the scenario's usable rows). Returns the table
    (``CAPACITY_COLUMNS``, sorted by model, sku, tp, class).
    """
    rows = []
    for profile in profiles.sort_values(["model", "sku", "tp_degree"], kind="stable").to_dict("records"):
        for (model, klass), length in sorted(token_lengths.items()):
            if model != profile["model"]:
                continue
            rps = requests_per_second(profile, length, kv_fraction)
            if rps <= 0:
                continue
            rows.append(
                {
                    "model": profile["model"],
                    "sku": profile["sku"],
                    "tp_degree": int(profile["tp_degree"]),
                    "traffic_class": klass,
                    "max_rps_per_replica": round(rps, DECIMALS),
                    "engine": profile["engine"],
                    "max_num_seqs": int(profile["max_num_seqs"]),
                    "max_num_batched_tokens": int(profile["max_num_batched_tokens"]),
                    "long_prefill_token_threshold": 0,
                    "policy": policy,
                    "source": f"analytic: profile {profile['source']}, kv_fraction {kv_fraction:g}",
                }
            )
    return pd.DataFrame(rows, columns=list(CAPACITY_COLUMNS))


def validate_capacity(frame: pd.DataFrame, where: str | Path = "capacity table") -> pd.DataFrame:
    """Check a capacity table: required columns, positive finite rates and whole TP degrees and
    settings, one row per key; every problem is reported in one error.

    Rows with a non-positive rate are errors (leave the row out when a class cannot run).
    Returns the table with the optional columns filled: no engine settings ('' and 0: the
    profile's defaults), ``policy`` '' and ``source`` 'capacity table'. A table calibrated at
    several pool sizes (``pool_replicas``) must not give a class less per replica in a larger
    pool. The result keeps every size (column ``pool_replicas`` where the table has it:
    :func:`pool_gains` reads them).
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
    rate_numeric = not pd.api.types.is_bool_dtype(table["max_rps_per_replica"])
    problems = [] if rate_numeric else [Problem(
        None, "max_rps_per_replica", "max_rps_per_replica holds true/false values, not requests per second",
        "write the calibrated maximum requests per second of one replica (> 0)")]
    whole = [c for c in WHOLE_COLUMNS if c in table.columns]
    problems += capacity_schema(whole, rate_numeric=rate_numeric).problems(table, header_fix=str)
    raise_problems(problems, str(where), _locate)
    table["max_rps_per_replica"] = pd.to_numeric(table["max_rps_per_replica"]).to_numpy(dtype=float)
    for column in WHOLE_COLUMNS:
        # no setting: the profile's defaults; no pool size: one replica
        unset = 1 if column == POOL_COLUMN else 0
        table[column] = pd.to_numeric(table[column]).to_numpy(dtype=np.int64) if column in table.columns else unset
    _check_non_decreasing(table, where)
    for column, default in (("engine", ""), ("policy", ""), ("source", TABLE_LABEL)):
        if column not in table.columns:
            table[column] = default
        table[column] = table[column].astype("string").fillna(default).astype(str)
    return table.loc[:, [*CAPACITY_COLUMNS, *([POOL_COLUMN] if POOL_COLUMN in frame.columns else [])]]


def _check_non_decreasing(table: pd.DataFrame, where: str | Path) -> None:
    """A class's rate per replica never falls as its deployment's pool grows (planner/calibrate/pools.py)."""
    ordered = table.assign(_row=np.arange(len(table))).sort_values([*CAPACITY_KEY, POOL_COLUMN], kind="stable")
    falls = ordered.groupby(list(CAPACITY_KEY), sort=False)["max_rps_per_replica"].diff() < 0
    if falls.any():
        row = ordered[falls].iloc[0]
        raise InputError(
            f"row {int(row['_row']) + 1}: {row['model']} on {row['tp_degree']} x {row['sku']}, class "
            f"{row['traffic_class']!r}, carries {row['max_rps_per_replica']:g} req/s per replica in a pool of "
            f"{row[POOL_COLUMN]}, less than in a smaller pool", where=f"{where}, column 'max_rps_per_replica'",
            fix="give each class a rate per replica that does not fall as pool_replicas grows (planner calibrate "
                "--pool-sizes writes such tables)")


def pool_gains(table: pd.DataFrame) -> dict[tuple[str, str, int], tuple[tuple[int, float], ...]]:
    """Per deployment (model, SKU, TP), the pool sizes N_j above its smallest N_0 at which a replica carries more,
    each with its gain g_j = c(N_j) / c(N_0): the smallest over the classes of the ratio of their rates, so no
    class is charged less than its own row. Only sizes where the gain rises are kept; a deployment without
    larger sizes has none (every pool carries N x c(N_0))."""
    if POOL_COLUMN not in table.columns:
        return {}
    gains: dict[tuple[str, str, int], tuple[tuple[int, float], ...]] = {}
    for (model, sku, tp), rows in table.groupby(list(DEPLOYMENT_KEY), sort=True):
        rates = rows.pivot_table(index=POOL_COLUMN, columns="traffic_class", values="max_rps_per_replica",
                                 aggfunc="first").sort_index()
        if len(rates) < 2:
            continue
        base = rates.iloc[0]
        steps: list[tuple[int, float]] = []
        for size, rates_at in rates.iloc[1:].iterrows():
            shared = base.notna() & rates_at.notna()
            if not shared.any():
                continue
            gain = float((rates_at[shared] / base[shared]).min())
            if gain > (steps[-1][1] if steps else 1.0) * (1.0 + 1e-9):
                steps.append((int(size), gain))
        if steps:
            gains[(str(model), str(sku), int(tp))] = tuple(steps)
    return gains


def pool_gain_at(steps: tuple[tuple[int, float], ...], replicas: float) -> float:
    """g(n): the gain of the largest pool size in ``steps`` (:func:`pool_gains`) up to ``replicas``, 1 below all."""
    return max([1.0] + [gain for size, gain in steps if size <= replicas])


def at_smallest_pool(frame: pd.DataFrame) -> np.ndarray:
    """Which rows are at their deployment's smallest pool size (every row of a table without ``pool_replicas``)."""
    if POOL_COLUMN not in frame.columns:
        return np.ones(len(frame), dtype=bool)
    sizes = pd.to_numeric(frame[POOL_COLUMN], errors="coerce")
    smallest = sizes.groupby([frame[c] for c in DEPLOYMENT_KEY], sort=False).transform("min")
    mask: np.ndarray = (sizes == smallest).to_numpy(dtype=bool)
    return mask


def _locate(problem: Problem) -> str:
    return f"column '{problem.column}'" if problem.row is None else f"row {problem.row + 1}, column '{problem.column}'"


def deployment_settings(table: pd.DataFrame, profiles: pd.DataFrame) -> pd.DataFrame:
    """Per (model, SKU, TP): the engine settings its capacities were measured with.

    A capacity table row that names no setting (engine '' or 0) stands for the profile's
    defaults. One (model, SKU, TP) has one setting; a table that mixes several is refused.
    """
    # no threshold in a profile: its default is off (0)
    profile_defaults = [c for c in ENGINE_SETTING_COLUMNS if c in profiles.columns]
    defaults = profiles.loc[:, [*DEPLOYMENT_KEY, *profile_defaults]].drop_duplicates(list(DEPLOYMENT_KEY))
    defaults = defaults.assign(**{c: 0 for c in ENGINE_SETTING_COLUMNS if c not in profile_defaults})
    merged = table.loc[:, [*DEPLOYMENT_KEY, *ENGINE_SETTING_COLUMNS]].merge(
        defaults, on=list(DEPLOYMENT_KEY), how="left", suffixes=("", "_default"))
    for column in ENGINE_SETTING_COLUMNS:
        given = merged[column].astype(str).isin(["", "0"])
        merged[column] = merged[column].where(~given, merged[f"{column}_default"])
    settings = merged.loc[:, [*DEPLOYMENT_KEY, *ENGINE_SETTING_COLUMNS]].dropna().drop_duplicates()
    clash = settings[settings.duplicated(list(DEPLOYMENT_KEY), keep=False)]
    if len(clash):
        row = clash.iloc[0]
        raise InputError(f"the capacity table gives {row['model']} on {row['tp_degree']} x {row['sku']} more than one "
                         "engine setting", where="capacity table",
                         fix="keep one engine setting (engine, max_num_seqs, max_num_batched_tokens, "
                             "long_prefill_token_threshold) per (model, sku, tp_degree)")
    return settings.astype({"tp_degree": "int64", "max_num_seqs": "int64", "max_num_batched_tokens": "int64",
                            "long_prefill_token_threshold": "int64"}
                           ).sort_values(list(DEPLOYMENT_KEY), kind="stable").reset_index(drop=True)

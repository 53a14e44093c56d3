"""Read and validate the profile tables; look up the profile of one (model, SKU, TP, engine).

``profiles.csv`` has one row per (model, SKU, tensor-parallel degree, serving engine): the
replica's GPUs (``tp_degree``), its KV cache (``kv_capacity_tokens`` in blocks of
``kv_block_tokens``, sized with ``gpu_memory_utilization``), the engine's default batch cap and
token budget, the step model (``step_model.py``; columns :data:`STEP_COLUMNS`), where it came
from (``source``: ``measured``, ``roofline`` or ``user-fit``) and its error against the
reference it was checked on (``err_*``). ``models.csv`` has one row per model's geometry.

Validation happens once, here; every error names the file, the data row (and its line) and
the column, with a fix. A scenario may add profile files of its own (``profiles fit``); they
are validated the same way and take precedence over bundled rows with the same key.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.paths import profiles_dir
from planner.profiles.geometry import ModelGeometry
from planner.profiles.step_model import DENSE_COLUMNS, STEP_COLUMNS, StepModel
from planner.storage import read_table

PROFILES_FILE = "profiles.csv"
MODELS_FILE = "models.csv"
KEY_COLUMNS = ("model", "sku", "tp_degree", "engine")
PROFILE_COLUMNS = (
    *KEY_COLUMNS,
    "weights_gb",
    "kv_bytes_per_token",
    "kv_block_tokens",
    "gpu_memory_utilization",
    "kv_capacity_tokens",
    "max_num_seqs",
    "max_num_batched_tokens",
    "source",
    "source_detail",
    "err_points",
    "err_median_pct",
    "err_p95_pct",
    "err_max_pct",
    *STEP_COLUMNS,
)
SOURCES = ("measured", "roofline", "user-fit")
ENGINE_NAMES = ("vllm", "sglang", "trtllm")
INTEGER_COLUMNS = ("tp_degree", "kv_bytes_per_token", "kv_block_tokens", "kv_capacity_tokens", "max_num_seqs",
                   "max_num_batched_tokens", "err_points")
POSITIVE_COLUMNS = ("weights_gb", "gpu_memory_utilization", *INTEGER_COLUMNS[:-1], *DENSE_COLUMNS)
NON_NEGATIVE_COLUMNS = ("err_points", "err_median_pct", "err_p95_pct", "err_max_pct",
                        *(c for c in STEP_COLUMNS if c not in DENSE_COLUMNS))
MODEL_COLUMNS = ("model", "hf_name", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "vocab_size",
                 "experts", "experts_per_token", "params_total", "params_active", "bytes_per_value")
REBUILD_HINT = "rebuild it with `python data/build/build_profiles.py`, or fit your own with `planner profiles fit`"


def _where(path: str | Path, position: int, column: str) -> str:
    return f"{path}, row {position + 1} (line {position + 2}), column '{column}'"


def _first_bad(mask: np.ndarray) -> int | None:
    positions = np.flatnonzero(mask)
    return int(positions[0]) if positions.size else None


def _require(frame: pd.DataFrame, columns: Sequence[str], where: str | Path) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", where=where,
                         fix=f"the table needs columns {', '.join(columns)}; {REBUILD_HINT}")


def _text(table: pd.DataFrame, frame: pd.DataFrame, column: str, where: str | Path,
          allowed: Sequence[str] = ()) -> None:
    text = table[column].astype("string").str.strip()
    bad = _first_bad(text.isna().to_numpy() | (text.fillna("") == "").to_numpy())
    if bad is not None:
        raise InputError("empty value", where=_where(where, bad, column), fix=f"fill in the {column}")
    if allowed:
        bad = _first_bad(~text.isin(allowed).to_numpy())
        if bad is not None:
            raise InputError(f"unknown {column} {frame[column].iloc[bad]!r}", where=_where(where, bad, column),
                             fix=f"use one of: {', '.join(allowed)}")
    table[column] = text.astype(str)


def _numbers(table: pd.DataFrame, frame: pd.DataFrame, column: str, where: str | Path, *, positive: bool,
             integer: bool) -> None:
    if pd.api.types.is_bool_dtype(frame[column]):
        raise InputError(f"{column} holds true/false values", where=_where(where, 0, column), fix=REBUILD_HINT)
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(values) & ((values > 0) if positive else (values >= 0))
    bad = _first_bad(~ok)
    if bad is not None:
        kind = "a positive" if positive else "a non-negative"
        raise InputError(f"{column} must be {kind} number, got {frame[column].iloc[bad]!r}",
                         where=_where(where, bad, column), fix=REBUILD_HINT)
    if integer:
        bad = _first_bad(values != np.floor(values))
        if bad is not None:
            raise InputError(f"{column} must be a whole number, got {frame[column].iloc[bad]!r}",
                             where=_where(where, bad, column), fix=REBUILD_HINT)
        table[column] = values.astype(np.int64)
    else:
        table[column] = values


def validate_profiles(frame: pd.DataFrame, where: str | Path) -> pd.DataFrame:
    """Check a profile table and return it with clean dtypes, in key order."""
    _require(frame, PROFILE_COLUMNS, where)
    table = frame.loc[:, list(PROFILE_COLUMNS)].copy().reset_index(drop=True)
    frame = frame.reset_index(drop=True)
    for column in ("model", "sku"):
        _text(table, frame, column, where)
    _text(table, frame, "engine", where, ENGINE_NAMES)
    _text(table, frame, "source", where, SOURCES)
    table["source_detail"] = table["source_detail"].astype("string").fillna("").astype(str)
    for column in POSITIVE_COLUMNS:
        _numbers(table, frame, column, where, positive=True, integer=column in INTEGER_COLUMNS)
    for column in NON_NEGATIVE_COLUMNS:
        _numbers(table, frame, column, where, positive=False, integer=column in INTEGER_COLUMNS)
    bad = _first_bad(table["gpu_memory_utilization"].to_numpy() > 1)
    if bad is not None:
        raise InputError(f"gpu_memory_utilization must be at most 1, got {frame['gpu_memory_utilization'].iloc[bad]!r}",
                         where=_where(where, bad, "gpu_memory_utilization"), fix="give a fraction of HBM, e.g. 0.9")
    bad = _first_bad(np.diff(table.loc[:, list(DENSE_COLUMNS)].to_numpy(), axis=1).min(axis=1) < 0)
    if bad is not None:
        raise InputError("the dense step time falls as tokens grow: a step of more tokens cannot be faster",
                         where=_where(where, bad, DENSE_COLUMNS[0]),
                         fix="make dense_ms_<n> non-decreasing in n; " + REBUILD_HINT)
    bad = _first_bad(table.duplicated(subset=list(KEY_COLUMNS), keep="first").to_numpy())
    if bad is not None:
        key = ", ".join(f"{c} {table[c].iloc[bad]!r}" for c in KEY_COLUMNS)
        raise InputError(f"duplicate profile for {key}", where=_where(where, bad, "model"),
                         fix=f"keep one row per ({', '.join(KEY_COLUMNS)})")
    table.attrs["source_path"] = str(where)
    return table


def validate_models(frame: pd.DataFrame, where: str | Path) -> pd.DataFrame:
    _require(frame, MODEL_COLUMNS, where)
    table = frame.loc[:, list(MODEL_COLUMNS)].copy().reset_index(drop=True)
    frame = frame.reset_index(drop=True)
    for column in ("model", "hf_name"):
        _text(table, frame, column, where)
    for column in MODEL_COLUMNS[2:]:
        _numbers(table, frame, column, where, positive=column not in ("experts", "experts_per_token"),
                 integer=column not in ("params_total", "params_active"))
    return table


def load_profiles(directory: Path | None = None, extra: Sequence[Path] = ()) -> pd.DataFrame:
    """The bundled ``profiles.csv`` (or one in ``directory``), then each ``extra`` file over it by key."""
    path = Path(directory if directory is not None else profiles_dir()) / PROFILES_FILE
    if not path.exists():
        raise InputError("profile table not found", where=path,
                         fix="build it with `python data/build/build_profiles.py`, or point PLANNER_DATA_DIR at a "
                             "data folder")
    table = validate_profiles(read_table(path), path)
    sources = [str(path)]
    for extra_path in extra:
        if not Path(extra_path).is_file():
            raise InputError("profile file not found", where=extra_path,
                             fix="write it with `planner profiles fit ... --out PROFILE`, or fix the path")
        own = validate_profiles(read_table(Path(extra_path)), extra_path)
        keys = pd.MultiIndex.from_frame(own.loc[:, list(KEY_COLUMNS)])
        kept = ~pd.MultiIndex.from_frame(table.loc[:, list(KEY_COLUMNS)]).isin(keys)
        table = pd.concat([table[kept], own], ignore_index=True)
        sources.append(str(extra_path))
    table = table.sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)
    table.attrs["source_path"] = " + ".join(sources)
    return table


def load_models(directory: Path | None = None) -> dict[str, ModelGeometry]:
    path = Path(directory if directory is not None else profiles_dir()) / MODELS_FILE
    if not path.exists():
        raise InputError("model table not found", where=path, fix=REBUILD_HINT)
    table = validate_models(read_table(path), path)
    return {str(r["model"]): ModelGeometry.from_row(r) for r in table.to_dict("records")}


def profiles_of(profiles: pd.DataFrame, model: str, sku: str, engine: str) -> pd.DataFrame:
    """Every TP of (model, SKU, engine), smallest first."""
    rows = profiles[(profiles["model"] == model) & (profiles["sku"] == sku) & (profiles["engine"] == engine)]
    return rows.sort_values("tp_degree", kind="stable")


def profile_for(profiles: pd.DataFrame, model: str, sku: str, tp: int, engine: str) -> pd.Series:
    """The profile row of one (model, SKU, TP, engine); the error lists what is available."""
    where = profiles.attrs.get("source_path", PROFILES_FILE)
    rows = profiles_of(profiles, model, sku, engine)
    match = rows[rows["tp_degree"] == int(tp)]
    if len(match) == 1:
        return match.iloc[0]
    if not (profiles["model"] == model).any():
        models = ", ".join(sorted(profiles["model"].unique()))
        raise InputError(f"no profile for model {model!r}", where=where,
                         fix=f"use one of the profiled models: {models}")
    if rows.empty:
        available = sorted({f"{s} ({e})" for s, e in profiles.loc[profiles["model"] == model, ["sku", "engine"]]
                           .itertuples(index=False)})
        raise InputError(f"no profile for model {model!r} on SKU {sku!r} under engine {engine!r}", where=where,
                         fix=f"SKUs and engines profiled for {model}: {', '.join(available)}")
    tps = ", ".join(str(t) for t in rows["tp_degree"])
    raise InputError(f"no profile for model {model!r} on {tp} x {sku} under {engine}", where=where,
                     fix=f"tensor-parallel degrees profiled for {model} on {sku}: {tps}")


def step_model_of(row: pd.Series) -> StepModel:
    return StepModel.from_row(row)

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

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from planner.contracts.columns import PROFILE_KEY
from planner.contracts.schemas import Problem, raise_problems
from planner.contracts.schemas.profiles import NumberColumn, profile_table_schema
from planner.errors import InputError
from planner.paths import profiles_dir
from planner.profiles.geometry import ModelGeometry
from planner.profiles.step_model import DENSE_COLUMNS, STEP_COLUMNS, StepModel
from planner.storage import read_table

PROFILES_FILE = "profiles.csv"
MODELS_FILE = "models.csv"
PROFILE_COLUMNS = (
    *PROFILE_KEY,
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


def _place(problem: Problem) -> str:
    row = problem.row or 0
    return f"row {row + 1} (line {row + 2}), column '{problem.column}'"


def _require(frame: pd.DataFrame, columns: Sequence[str], where: str | Path) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", where=where,
                         fix=f"the table needs columns {', '.join(columns)}; {REBUILD_HINT}")


def _checked(frame: pd.DataFrame, columns: Sequence[str], where: str | Path, text: Mapping[str, Sequence[str]],
             numbers: Mapping[str, NumberColumn], **rules: Sequence[str]) -> pd.DataFrame:
    """``frame``'s ``columns`` with text stripped and numbers typed, after every check at once."""
    _require(frame, columns, where)
    table = frame.loc[:, list(columns)].copy().reset_index(drop=True)
    for column in text:
        table[column] = table[column].astype("string").str.strip().fillna("").astype(str)
    flagged = [c for c in numbers if pd.api.types.is_bool_dtype(table[c])]
    problems = [Problem(0, c, f"{c} holds true/false values", REBUILD_HINT) for c in flagged]
    numeric = {c: kind for c, kind in numbers.items() if c not in flagged}
    schema = profile_table_schema(text, numeric, REBUILD_HINT, **{
        name: [c for c in names if c not in flagged] for name, names in rules.items()})
    problems += schema.problems(table, header_fix=str)
    raise_problems(sorted(problems, key=lambda p: p.row or 0), str(where),
                   _place)
    for column, kind in numbers.items():
        values = pd.to_numeric(table[column]).to_numpy(dtype=float)
        table[column] = values.astype(np.int64) if kind.integer else values
    return table


def validate_profiles(frame: pd.DataFrame, where: str | Path) -> pd.DataFrame:
    """Check a profile table and return it with clean dtypes; every problem is reported in one error."""
    numbers = {c: NumberColumn(positive=True, integer=c in INTEGER_COLUMNS) for c in POSITIVE_COLUMNS}
    numbers |= {c: NumberColumn(positive=False, integer=c in INTEGER_COLUMNS) for c in NON_NEGATIVE_COLUMNS}
    text = {"model": (), "sku": (), "engine": ENGINE_NAMES, "source": SOURCES}
    table = _checked(frame, PROFILE_COLUMNS, where, text, numbers, key=PROFILE_KEY,
                     fractions=("gpu_memory_utilization",), rising=DENSE_COLUMNS)
    table["source_detail"] = table["source_detail"].astype("string").fillna("").astype(str)
    table.attrs["source_path"] = str(where)
    return table


def validate_models(frame: pd.DataFrame, where: str | Path) -> pd.DataFrame:
    numbers = {c: NumberColumn(positive=c not in ("experts", "experts_per_token"),
                               integer=c not in ("params_total", "params_active")) for c in MODEL_COLUMNS[2:]}
    return _checked(frame, MODEL_COLUMNS, where, {"model": (), "hf_name": ()}, numbers)


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
        keys = pd.MultiIndex.from_frame(own.loc[:, list(PROFILE_KEY)])
        kept = ~pd.MultiIndex.from_frame(table.loc[:, list(PROFILE_KEY)]).isin(keys)
        table = pd.concat([table[kept], own], ignore_index=True)
        sources.append(str(extra_path))
    table = table.sort_values(list(PROFILE_KEY), kind="stable").reset_index(drop=True)
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

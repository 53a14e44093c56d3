"""Read and validate ``profiles.csv``; look up the profile of one (model, SKU).

The step-time contract every consumer relies on::

    t_step_ms = a_ms + b_ms_per_kv_token * (KV tokens read) + c_ms_per_prefill_token * (prefill tokens)

A replica of ``tp_degree`` GPUs holds at most ``kv_capacity_tokens`` tokens of KV cache and
runs at most ``max_batch`` requests at once. Validation happens once, here; every error
names the file, the data row (and its line in the file) and the column, with a fix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.paths import profiles_dir
from planner.storage import read_table

PROFILES_FILE = "profiles.csv"
PROFILE_COLUMNS = (
    "model",
    "sku",
    "tp_degree",
    "weights_gb",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "a_ms",
    "b_ms_per_kv_token",
    "c_ms_per_prefill_token",
    "max_batch",
    "source",
    "fit_mape_pct",
    "notes",
)
SOURCES = ("measured-fit", "roofline")
INTEGER_COLUMNS = ("tp_degree", "kv_bytes_per_token", "kv_capacity_tokens", "max_batch")
POSITIVE_FLOAT_COLUMNS = ("weights_gb", "a_ms", "b_ms_per_kv_token", "c_ms_per_prefill_token")
REBUILD_HINT = "rebuild it with `python data/build/build_profiles.py`, or correct the value by hand"


def _where(path: str | Path, position: int, column: str) -> str:
    return f"{path}, row {position + 1} (line {position + 2}), column '{column}'"


def _first_bad(mask: np.ndarray) -> int | None:
    positions = np.flatnonzero(mask)
    return int(positions[0]) if positions.size else None


def validate_profiles(frame: pd.DataFrame, where: str | Path) -> pd.DataFrame:
    """Check a profile table and return it with clean dtypes (ints, floats, strings)."""
    missing = [column for column in PROFILE_COLUMNS if column not in frame.columns]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}",
            where=where,
            fix=f"the profile table needs columns {', '.join(PROFILE_COLUMNS)}; {REBUILD_HINT}",
        )
    table = frame.copy().reset_index(drop=True)
    for column in ("model", "sku", "source"):
        text = table[column].astype("string").str.strip()
        bad = _first_bad(text.isna().to_numpy() | (text.fillna("") == "").to_numpy())
        if bad is not None:
            raise InputError("empty value", where=_where(where, bad, column), fix=f"fill in the {column}")
        table[column] = text.astype(str)
    table["notes"] = table["notes"].astype("string").fillna("").astype(str)

    for column in INTEGER_COLUMNS + POSITIVE_FLOAT_COLUMNS:
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
        bad = _first_bad(~(np.isfinite(values) & (values > 0)))
        if bad is not None:
            raise InputError(
                f"{column} must be a positive number, got {frame[column].iloc[bad]!r}",
                where=_where(where, bad, column),
                fix=REBUILD_HINT,
            )
        if column in INTEGER_COLUMNS:
            bad = _first_bad(values != np.floor(values))
            if bad is not None:
                raise InputError(
                    f"{column} must be a whole number, got {frame[column].iloc[bad]!r}",
                    where=_where(where, bad, column),
                    fix=REBUILD_HINT,
                )
            table[column] = values.astype(np.int64)
        else:
            table[column] = values

    bad = _first_bad(~table["source"].isin(SOURCES).to_numpy())
    if bad is not None:
        raise InputError(
            f"unknown source {table['source'].iloc[bad]!r}",
            where=_where(where, bad, "source"),
            fix=f"use one of: {', '.join(SOURCES)}",
        )

    mape = pd.to_numeric(table["fit_mape_pct"], errors="coerce").to_numpy(dtype=float)
    text_given = table["fit_mape_pct"].notna().to_numpy()
    measured = (table["source"] == "measured-fit").to_numpy()
    bad = _first_bad((text_given & ~np.isfinite(mape)) | (measured & ~(mape >= 0)) | (~measured & np.isfinite(mape)))
    if bad is not None:
        raise InputError(
            f"fit_mape_pct {frame['fit_mape_pct'].iloc[bad]!r} does not match source {table['source'].iloc[bad]!r}",
            where=_where(where, bad, "fit_mape_pct"),
            fix="give a non-negative MAPE for measured-fit rows and leave it empty for roofline rows",
        )
    table["fit_mape_pct"] = mape

    duplicated = table.duplicated(subset=["model", "sku"], keep="first").to_numpy()
    bad = _first_bad(duplicated)
    if bad is not None:
        raise InputError(
            f"duplicate profile for model {table['model'].iloc[bad]!r} on SKU {table['sku'].iloc[bad]!r}",
            where=_where(where, bad, "sku"),
            fix="keep one row per (model, sku)",
        )
    table.attrs["source_path"] = str(where)
    return table


def load_profiles(directory: Path | None = None) -> pd.DataFrame:
    """Read ``profiles.csv`` from ``directory`` (default: the bundled ``data/profiles``) and validate it."""
    path = Path(directory if directory is not None else profiles_dir()) / PROFILES_FILE
    if not path.exists():
        raise InputError(
            "profile table not found",
            where=path,
            fix="build it with `python data/build/build_profiles.py`, or point PLANNER_DATA_DIR at a data folder",
        )
    return validate_profiles(read_table(path), path)


def profile_for(profiles: pd.DataFrame, model: str, sku: str) -> pd.Series:
    """The profile row of ``model`` on ``sku``; the error lists what is available."""
    where = profiles.attrs.get("source_path", PROFILES_FILE)
    rows = profiles[(profiles["model"] == model) & (profiles["sku"] == sku)]
    if len(rows) == 1:
        return rows.iloc[0]
    if len(rows) > 1:
        raise InputError(
            f"{len(rows)} profiles for model {model!r} on SKU {sku!r}",
            where=where,
            fix="keep one row per (model, sku)",
        )
    available = sorted(profiles.loc[profiles["model"] == model, "sku"])
    if not available:
        models = ", ".join(sorted(profiles["model"].unique()))
        raise InputError(f"no profile for model {model!r}", where=where, fix=f"use one of the profiled models: {models}")
    raise InputError(
        f"no profile for model {model!r} on SKU {sku!r}",
        where=where,
        fix=f"SKUs profiled for {model}: {', '.join(available)}",
    )

"""The plan and routed-demand tables ``planner simulate`` reads, checked cell by cell.

A plan has one row per (period, region, sku, tp_degree, model, tier) with whole
``replicas`` and ``gpus`` and a whole ``tp_degree`` >= 1 (GPUs per replica; a hand-written
plan may leave it out, and it is then gpus / replicas, which must be whole); routed demand
(the flows ``planner place`` writes, or any table with a rate) has requests per second per
(period, region, model, traffic_class) and possibly an origin.
Each refusal names the file (recorded by the shell, :mod:`planner.sources`), the 1-based
data row (the header is row 0) and the column:

* a count or rate that is true/false (a boolean is not a number of replicas), not a number,
  NaN, infinite or negative; a replica or GPU count that is not whole. A NaN rate used to be
  summed away as zero, so a pool with unknown demand was reported "no traffic, SLO met";
* two plan rows for the same (period, region, sku, tp_degree, model, tier): summing them would hide
  an edit or a concatenation gone wrong, so both rows are named.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.sources import data_row, source_of

PLAN_KEY = ("period", "region", "sku", "tp_degree", "model", "tier")


def _show(value: object) -> str:
    return str(value.item() if isinstance(value, np.generic) else value)


def numbers(frame: pd.DataFrame, column: str, where: str, *, whole: bool, unit: str) -> np.ndarray:
    """``frame[column]`` as floats, each finite and >= 0 (and whole when asked), or an input error naming the row."""
    cells = frame[column]
    if pd.api.types.is_bool_dtype(cells):
        raise InputError(f"{column} holds true/false values, not a number of {unit}",
                         where=f"{where}, column '{column}'", fix=f"write {column} as a number of {unit}")
    values = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        good = np.isfinite(values) & (values >= 0)
        if whole:
            good &= values == np.floor(values)
    bad = np.flatnonzero(~good)
    if bad.size:
        row = int(bad[0])
        kind = "a whole number >= 0" if whole else "a number >= 0"
        raise InputError(f"{column} must be {kind} ({unit}), got {_show(cells.iloc[row])}",
                         where=f"{where}, {data_row(row)}, column '{column}'",
                         fix=f"write {unit} as {kind} in every row")
    return np.asarray(values)


def validated_plan(plan: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The plan with ``replicas`` as integers, after the checks of the module docstring."""
    where = source_of(plan, "plan")
    missing = [c for c in columns if c not in plan.columns]
    if missing:
        raise InputError(f"the plan lacks column(s) {', '.join(missing)}", where=where,
                         fix=f"pass a plan from `planner place` or `planner plan` (columns {', '.join(columns)})")
    plan = plan.reset_index(drop=True)
    replicas = numbers(plan, "replicas", where, whole=True, unit="replicas")
    gpus = numbers(plan, "gpus", where, whole=True, unit="GPUs")
    if "tp_degree" not in plan.columns:
        plan = plan.assign(tp_degree=_tp_from_counts(replicas, gpus, where))
    tp = numbers(plan, "tp_degree", where, whole=True, unit="GPUs per replica")
    if (tp < 1).any():
        row = int(np.flatnonzero(tp < 1)[0])
        raise InputError(f"tp_degree must be at least 1, got {_show(plan['tp_degree'].iloc[row])}",
                         where=f"{where}, {data_row(row)}, column 'tp_degree'",
                         fix="write the GPUs of one replica (1, 2, 4 or 8)")
    keys = plan.loc[:, list(PLAN_KEY)].astype(str)
    repeated = keys.duplicated(keep=False).to_numpy()
    if repeated.any():
        first = int(np.flatnonzero(repeated)[0])
        same = np.flatnonzero((keys == keys.iloc[first]).all(axis=1).to_numpy())
        rows = " and ".join(str(int(i) + 1) for i in same[:5])
        key = ", ".join(f"{c} {keys.iloc[first][c]}" for c in PLAN_KEY)
        raise InputError(f"the same plan entry ({key}) is given {same.size} times; its replicas would be added "
                         "together", where=f"{where}, rows {rows} (the header is row 0)",
                         fix="keep one row per (period, region, sku, tp_degree, model, tier) with the total replicas")
    return plan.assign(replicas=replicas.astype(np.int64), tp_degree=tp.astype(np.int64))


def _tp_from_counts(replicas: np.ndarray, gpus: np.ndarray, where: str) -> np.ndarray:
    """GPUs per replica from the counts, for a plan without ``tp_degree``; 1 where there are no replicas."""
    with np.errstate(divide="ignore", invalid="ignore"):
        tp = np.where(replicas > 0, gpus / np.maximum(replicas, 1), 1.0)
    bad = np.flatnonzero((tp < 1) | (tp != np.floor(tp)))
    if bad.size:
        row = int(bad[0])
        raise InputError(f"{_show(gpus[row])} GPUs over {_show(replicas[row])} replicas is not a whole number of "
                         "GPUs per replica", where=f"{where}, {data_row(row)}, column 'gpus'",
                         fix="add a tp_degree column (GPUs per replica) or make gpus = replicas x GPUs per replica")
    return tp


def validated_rates(frame: pd.DataFrame, column: str, where: str) -> np.ndarray:
    """A rate column (req/s, or req/h for a forecast's mean) checked row by row."""
    unit = "requests per hour" if column == "mean" else "requests per second"
    return numbers(frame.reset_index(drop=True), column, where, whole=False, unit=unit)

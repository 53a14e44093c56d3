"""The plan and routed-demand tables ``planner simulate`` reads, each checked by one schema
(:func:`planner.contracts.schemas.plan_schema`) that reports every kind of problem at once.

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
import numpy.typing as npt
import pandas as pd

from planner.contracts import PLAN_KEY
from planner.contracts.schemas import Problem, number_schema, plan_schema, raise_problems
from planner.errors import InputError
from planner.sources import data_row, source_of

__all__ = ["PLAN_KEY", "numbers", "validated_plan", "validated_rates"]

UNITS = {"replicas": "replicas", "gpus": "GPUs", "tp_degree": "GPUs per replica"}


def _locate(problem: Problem) -> str:
    return (f"column '{problem.column}'" if problem.row is None
            else f"{data_row(problem.row)}, column '{problem.column}'")


def _flags(frame: pd.DataFrame, columns: tuple[str, ...], units: dict[str, str]) -> list[Problem]:
    """True/false columns where numbers belong (a boolean is not a number of replicas)."""
    return [Problem(None, c, f"{c} holds true/false values, not a number of {units[c]}",
                    f"write {c} as a number of {units[c]}")
            for c in columns if c in frame.columns and pd.api.types.is_bool_dtype(frame[c])]


def _raise(problems: list[Problem], where: str) -> None:
    raise_problems(sorted(problems, key=lambda p: -1 if p.row is None else p.row), where, _locate,
                   many_fix="correct the rows listed above")


def numbers(frame: pd.DataFrame, column: str, where: str, *, whole: bool, unit: str) -> npt.NDArray[np.float64]:
    """``frame[column]`` as floats, each finite and >= 0 (and whole when asked), or an input error naming the row."""
    frame = frame.reset_index(drop=True)
    problems = _flags(frame, (column,), {column: unit})
    if not problems:
        problems = number_schema(column, unit, whole=whole).problems(frame, header_fix=str)
    _raise(problems, where)
    values: npt.NDArray[np.float64] = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    return values


def validated_plan(plan: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The plan with ``replicas`` as integers, after every check of the module docstring, all at once."""
    where = source_of(plan, "plan")
    missing = [c for c in columns if c not in plan.columns]
    if missing:
        raise InputError(f"the plan lacks column(s) {', '.join(missing)}", where=where,
                         fix=f"pass a plan from `planner place` or `planner plan` (columns {', '.join(columns)})")
    plan = plan.reset_index(drop=True)
    tp_written = "tp_degree" in plan.columns
    counts = ("replicas", "gpus", "tp_degree") if tp_written else ("replicas", "gpus")
    problems = _flags(plan, counts, UNITS)
    numeric = tuple(c for c in counts if not any(p.column == c for p in problems))
    replicas = pd.to_numeric(plan["replicas"], errors="coerce").to_numpy(dtype=float)
    gpus = pd.to_numeric(plan["gpus"], errors="coerce").to_numpy(dtype=float)
    if not tp_written:  # GPUs per replica from the counts; 1 where there are no replicas
        with np.errstate(divide="ignore", invalid="ignore"):
            plan = plan.assign(tp_degree=np.where(replicas > 0, gpus / np.maximum(replicas, 1), 1.0))
    problems += plan_schema(tuple(plan.columns), numeric=numeric, tp_written=tp_written).problems(plan, header_fix=str)
    _raise(problems, where)
    tp = pd.to_numeric(plan["tp_degree"], errors="coerce").to_numpy(dtype=float)
    return plan.assign(replicas=replicas.astype(np.int64), tp_degree=tp.astype(np.int64))


def validated_rates(frame: pd.DataFrame, column: str, where: str) -> npt.NDArray[np.float64]:
    """A rate column (req/s, or req/h for a forecast's mean) checked row by row."""
    unit = "requests per hour" if column == "mean" else "requests per second"
    return numbers(frame.reset_index(drop=True), column, where, whole=False, unit=unit)

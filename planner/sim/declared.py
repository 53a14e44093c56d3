"""A plan and its routed demand name only what the scenario declares, checked before any simulation.

A plan or flows file from another scenario (or edited by hand) can name a model or a serving
region the scenario lacks. Left alone, a model the scenario lacks failed deep in the simulator
(a ``KeyError``, exit 1) or its rows were silently dropped, and demand routed to an undeclared
region was reported as an SLO miss ("demand but no replicas", exit 5) after writing results.
Each check here refuses with an input error naming the file, the 1-based data row (the header
is row 0), the column, the value and what the scenario declares.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.scenario import Scenario
from planner.sources import data_row, source_of


def _refuse_undeclared(frame: pd.DataFrame, column: str, declared: Sequence[str], what: str, many: str,
                       where: str, fix: str) -> None:
    cells = frame[column].astype(str).reset_index(drop=True)
    unknown = np.flatnonzero(~cells.isin(list(declared)).to_numpy())
    if not unknown.size:
        return
    names = sorted(set(cells.iloc[unknown]))
    raise InputError(f"{what}(s) {', '.join(names)} that the scenario does not declare",
                     where=f"{where}, {data_row(int(unknown[0]))}, column '{column}'",
                     fix=f"{fix} (the scenario's {many}: {', '.join(declared)})")


def check_plan_declared(plan: pd.DataFrame, scenario: Scenario) -> None:
    """Every plan row's model and serving region is one the scenario declares."""
    where = source_of(plan, "plan")
    fix = "simulate the plan with the scenario it was placed for, or place again with this scenario"
    _refuse_undeclared(plan, "model", scenario.model_names, "the plan names model", "models", where, fix)
    _refuse_undeclared(plan, "region", scenario.serving_keys, "the plan names serving region", "serving regions",
                       where, fix)


def check_flows_declared(flows: pd.DataFrame, scenario: Scenario) -> None:
    """Every routed-demand row goes to a declared serving region, for a declared model and class, from a
    declared origin (when the file has one)."""
    where = source_of(flows, "flows")
    fix = "pass the flows of a plan placed with this scenario"
    for column, declared, what, many in (
            ("region", scenario.serving_keys, "the flows route demand to serving region", "serving regions"),
            ("model", scenario.model_names, "the flows name model", "models"),
            ("traffic_class", scenario.class_names, "the flows name traffic class", "traffic classes"),
            ("origin", scenario.origin_names, "the flows name origin", "origins")):
        if column in flows.columns:
            _refuse_undeclared(flows, column, declared, what, many, where, fix)

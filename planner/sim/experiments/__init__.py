"""The reference experiments of docs/theory.md (E1–E4), by name.

``run_experiment(name, seed=, scale=)`` returns an :class:`ExperimentResult`;
the shell (:func:`planner.workflows.files.write_experiment`) writes ``<name>.csv`` and
``<name>.png``.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.errors import InputError
from planner.sim.experiments.common import ExperimentResult
from planner.sim.experiments.e1_policies import run_e1
from planner.sim.experiments.e2_predictions import run_e2
from planner.sim.experiments.e3_routing import run_e3
from planner.sim.experiments.e4_dynamo_drr import run_e4

EXPERIMENTS: dict[str, Callable[..., ExperimentResult]] = {
    "e1": run_e1,
    "e2": run_e2,
    "e3": run_e3,
    "e4": run_e4,
}


def run_experiment(name: str, *, seed: int = 0, scale: float = 1.0) -> ExperimentResult:
    """Run reference experiment ``name`` (e1..e4) with ``seed`` at ``scale`` of its full size."""
    key = name.strip().lower()
    if key not in EXPERIMENTS:
        raise InputError(f"unknown experiment '{name}'", where="experiment NAME",
                         fix=f"use one of: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[key](seed=seed, scale=scale)


__all__ = ["EXPERIMENTS", "ExperimentResult", "run_experiment"]

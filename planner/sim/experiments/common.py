"""What every reference experiment shares: its result type, the E1 class mix, sizing.

Each experiment (E1–E4 in ``docs/theory.md``) is a pure function of (seed, scale)
returning an :class:`ExperimentResult`: a table (one row per configuration), a
matplotlib Figure, a short summary for the terminal, and ``checks``: the predictions
of theory tested on this run's numbers, each with its evidence. All configurations
of one experiment use the same seed, so they see the same arrivals and job sizes
(common random numbers): differences between rows are the policies', not noise.
Times are in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from planner.errors import InputError
from planner.sim.queue import QueueClass, ServiceDist

FULL_JOBS = 120_000
FULL_WARMUP = 20_000
E1_SIGMA = 1.05
E1_LOADS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)


@dataclass
class ExperimentResult:
    """A finished experiment: ``table`` (CSV), ``figure`` (PNG), ``summary`` rows, ``checks``."""

    name: str
    table: pd.DataFrame
    figure: Figure
    summary: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)


def e1_classes(sigma: float = E1_SIGMA) -> tuple[QueueClass, ...]:
    """E1's three classes: (weight, mean service s, share) = (8, 0.30, 50%), (2, 1.00, 35%), (0.5, 4.00, 15%)."""
    return (
        QueueClass("interactive", 8.0, 0.50, ServiceDist("lognormal", 0.30, sigma)),
        QueueClass("standard", 2.0, 0.35, ServiceDist("lognormal", 1.00, sigma)),
        QueueClass("batch", 0.5, 0.15, ServiceDist("lognormal", 4.00, sigma)),
    )


def sized(scale: float) -> tuple[int, int]:
    """(jobs, warm-up) at ``scale`` of the full 120,000 / 20,000 (at least 1,200 / 200)."""
    if not 0 < scale <= 1:
        raise InputError(f"scale must be in (0, 1], got {scale}", where="experiment --scale",
                         fix="use 1 for the full size, or a fraction for a quick run")
    n = max(1_200, int(round(FULL_JOBS * scale)))
    return n, int(round(n * FULL_WARMUP / FULL_JOBS))


def new_figure(width: float, height: float) -> Figure:
    """A Figure on the Agg canvas (no pyplot state, no display)."""
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def check(claim: str, holds: bool, evidence: str) -> dict[str, Any]:
    """One prediction of theory tested against this run."""
    return {"claim": claim, "holds": bool(holds), "evidence": evidence}

r"""The pool sizes the loop calibrates: powers of two up to the largest pool a plan can need.

A replica of a unit of model m carries λ₁ req/s alone (its rate at the smallest pool size, on
the model's mix) and at most u · λ₁ · g in a pool, with u the utilisation cap and g ≥ 1 the
pool's gain. Placement never runs more replicas of one unit in one pool than the whole of the
model's demand needs at the lone rate, so no pool exceeds

    N_max = ⌈peak_m / (u · λ₁)⌉,

peak_m the model's demand summed over every origin and class in its busiest planning period at
the placement quantile (as if one region served all of it). The loop calibrates each unit at
2, 4, 8, ... up to N_max (:func:`planner.calibrate.calibrate`'s ``pool_sizes_for``): a pool
between two sizes takes the smaller size's capacity, so a size above N_max could never be read,
and a unit whose N_max is below 2 is calibrated alone only. Sizes the simulator cannot run are
left out by the calibration.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from planner.placement.periods import demand_from_forecast, parse_periods
from planner.placement.window import PlanningWindow
from planner.scenario import Scenario

if TYPE_CHECKING:
    from planner.loop.run import LoopSettings


def model_peaks(scenario: Scenario, forecast: pd.DataFrame, quantile: float, periods: str,
                window: PlanningWindow | None = None) -> dict[str, float]:
    """Per model, its demand in req/s over every origin and class in its busiest planning period."""
    demand = demand_from_forecast(forecast, scenario, quantile, parse_periods(periods), window=window)
    per_model = demand.rps.sum(axis=(0, 2))  # [m, t]
    return {m: float(np.max(per_model[i], initial=0.0)) for i, m in enumerate(scenario.model_names)}


def largest_pool(peak_rps: float, lone_rate_rps: float, utilisation_cap: float) -> int:
    """N_max of the module docstring (0 for a unit that carries nothing)."""
    if lone_rate_rps <= 0 or peak_rps <= 0:
        return 0
    return math.ceil(peak_rps / (utilisation_cap * lone_rate_rps) - 1e-9)


def powers_of_two_up_to(most: int) -> tuple[int, ...]:
    """2, 4, 8, ... up to ``most``."""
    sizes, n = [], 2
    while n <= most:
        sizes.append(n)
        n *= 2
    return tuple(sizes)


def pool_sizes_for(peaks: dict[str, float], utilisation_cap: float) -> Callable[[str, float], tuple[int, ...]]:
    """The calibration's ``pool_sizes_for``: a unit's larger pool sizes from its model and its lone rate."""
    def sizes(model: str, lone_rate_rps: float) -> tuple[int, ...]:
        return powers_of_two_up_to(largest_pool(peaks.get(model, 0.0), lone_rate_rps, utilisation_cap))
    return sizes


def loop_pool_sizes(scenario: Scenario, forecast: pd.DataFrame, settings: LoopSettings,
                    window: PlanningWindow | None = None) -> Callable[[str, float], tuple[int, ...]] | None:
    """The loop's ``pool_sizes_for`` at its placement quantile, utilisation cap and periods; None when the loop
    calibrates one replica only (``settings.pools`` false)."""
    if not settings.pools:
        return None
    level = scenario.capacity.forecast_quantile if settings.quantile is None else settings.quantile
    peaks = model_peaks(scenario, forecast, level, settings.periods, window)
    return pool_sizes_for(peaks, scenario.capacity.utilisation_cap)

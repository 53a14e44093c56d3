"""``planner simulate`` and ``planner experiment``: read a plan and its demand, simulate, write, record."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from planner.errors import InputError
from planner.settings import resolve_settings
from planner.workflows.common import (
    NO_CHANGES,
    Announce,
    WhatIf,
    load_scenario_inputs,
    prepare_simulator,
    read_histograms,
    read_named,
    record_settings,
)
from planner.workflows.files import write_experiment, write_simulation_outputs

if TYPE_CHECKING:
    from planner.runs import RunContext
    from planner.scenario import Scenario
    from planner.sim.experiments.common import ExperimentResult
    from planner.sim.result import SimulationResult

ProgressDisplay = Callable[[str], AbstractContextManager[Callable[[int, int], None]]]
"""Opens a progress display for the plan period being simulated; yields ``advance(done, total)``."""


@dataclass(frozen=True)
class SimulateOptions:
    """What to simulate and where it runs (``planner simulate``'s options)."""

    policy: str | None
    window: str
    duration_s: float
    replications: int
    seed: int | None
    engine: str
    workers: int | None
    scheduler: str | None


@dataclass(frozen=True)
class Simulated:
    result: SimulationResult
    period: str
    written: list[Path]


def forecast_window(scenario: Scenario, plan: pd.DataFrame, forecast: pd.DataFrame, window: str) -> tuple[str, Any]:
    """(plan period, serving demand) from a forecast hour, for plans without flows."""
    from planner.placement.forecast_check import check_forecast_contract
    from planner.sim.forecast_demand import forecast_hour, provisioned_column, route_forecast

    check_forecast_contract(forecast, scenario, hours=scenario.horizon_hours)
    column = provisioned_column(scenario, forecast)
    hour = forecast_hour(forecast, column, window, scenario)
    periods = list(dict.fromkeys(plan["period"].astype(str))) if "period" in plan.columns else []
    if len(periods) == 1:
        period = periods[0]
    elif hour in periods:
        period = hour
    else:
        raise InputError(
            f"the plan has {len(periods)} periods and none is the forecast hour {hour}",
            where="--plan", fix="pass a one-period plan, or --window with an hour that is one of the plan's periods",
        )
    rows = plan[plan["period"].astype(str) == period]
    return period, route_forecast(scenario, rows, forecast, column, hour)


def simulate(scenario_file: Path, plan_file: Path, out: Path, options: SimulateOptions, *,
             flows_file: Path | None = None, forecast_file: Path | None = None, histogram_file: Sequence[Path] = (),
             progress: ProgressDisplay, announce: Announce | None = None, what_if: WhatIf = NO_CHANGES,
             run: RunContext | None = None) -> Simulated:
    """Simulate one window of the plan (its flows', or the forecast's demand, scaled by ``what_if``) and write
    the per-class results.

    Exactly one of ``flows_file`` and ``forecast_file`` gives the demand.
    """
    from planner.catalog import load_catalog
    from planner.forecast.scaling import scale_flows, scale_forecast
    from planner.sim.declared import check_flows_declared, check_plan_declared
    from planner.sim.plan_input import validated_plan
    from planner.sim.simulate import PLAN_COLUMNS, select_window, simulate_plan
    from planner.sim.work import check_evidence

    scenario, profiles = load_scenario_inputs(scenario_file, what_if.overrides)
    what_if.record(run)
    settings = resolve_settings(os.environ, seed=options.seed, default_seed=scenario.seeds.base,
                                engine=options.engine, workers=options.workers, scheduler=options.scheduler)
    plan = validated_plan(read_named(plan_file), PLAN_COLUMNS)
    check_plan_declared(plan, scenario)
    if forecast_file is not None:
        forecast = scale_forecast(read_named(forecast_file), what_if.demand)
        period, demand = forecast_window(scenario, plan, forecast, options.window)
    elif flows_file is not None:
        flows = read_named(flows_file)
        check_flows_declared(flows, scenario)
        period, demand = select_window(plan, scale_flows(flows, what_if.demand), options.window)
    else:
        raise ValueError("simulate needs flows_file or forecast_file")
    prepare_simulator(announce)
    with progress(period) as advance:
        result = simulate_plan(
            scenario, plan, demand, profiles, load_catalog(),
            policy=options.policy, duration_s=options.duration_s, replications=options.replications,
            seed=settings.seed, histogram=read_histograms(histogram_file), period=period,
            engine=settings.engine, workers=settings.workers, scheduler=settings.scheduler, progress=advance,
        )
    check_evidence(result.per_class, duration_s=options.duration_s, warmup_s=float(result.meta["warmup_s"]))
    written = write_simulation_outputs(result, out)
    record_settings(run, settings)
    if run is not None:
        run.add_output(*written)
    return Simulated(result, period, written)


def experiment(name: str, out_dir: Path, *, seed: int, scale: float, run: RunContext | None = None
               ) -> tuple[ExperimentResult, list[Path]]:
    """Run a reference experiment (E1-E4 of theory.md) and write its table and chart."""
    from planner.sim.experiments import run_experiment

    result = run_experiment(name, seed=seed, scale=scale)
    written = write_experiment(result, out_dir)
    if run is not None:
        run.add_seeds(seed=seed)
        run.add_output(*written)
    return result, written

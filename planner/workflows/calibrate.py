"""``planner calibrate``: read the scenario and histogram, calibrate through the cache, write the table, record."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.settings import resolve_settings
from planner.workflows.calibration_cache import folder_store
from planner.workflows.common import (
    NO_CHANGES,
    Announce,
    WhatIf,
    load_scenario_inputs,
    prepare_simulator,
    read_histograms,
    record_settings,
)
from planner.workflows.files import write_calibration

if TYPE_CHECKING:
    import pandas as pd

    from planner.calibrate.table import CalibrationResult
    from planner.runs import RunContext
    from planner.scenario import Scenario


@dataclass(frozen=True)
class CalibrateOptions:
    """``planner calibrate``'s options: what to calibrate, how long, and where it runs."""

    policy: str | None = None
    models: list[str] | None = None
    skus: list[str] | None = None
    duration_s: float | None = None
    replications: int | None = None
    rel_tol: float = 0.02
    pool_replicas: int = 1
    larger_pools: tuple[int, ...] = ()
    seed: int | None = None
    use_cache: bool = True
    cache_dir: Path | None = None
    search_settings: bool = True
    prune: bool = True
    engine: str = "auto"
    workers: int | None = None
    scheduler: str | None = None


def calibrate_scenario(scenario: Scenario, profiles: pd.DataFrame, options: CalibrateOptions, *,
                       histogram: pd.DataFrame | None = None, class_mix: dict[str, float] | None = None,
                       confidence: float = 0.95, progress: Callable[[int, int], None] | None = None,
                       run: RunContext | None = None) -> CalibrationResult:
    """:func:`planner.calibrate.calibrate` with the settings resolved (seed, cache folder, scheduler)
    and the cache in its folder; the seed it used is recorded in ``run``."""
    from planner.calibrate import DEFAULT_DURATION_S, DEFAULT_REPLICATIONS, calibrate

    settings = resolve_settings(os.environ, seed=options.seed, default_seed=scenario.seeds.base,
                                engine=options.engine, workers=options.workers, scheduler=options.scheduler,
                                cache_dir=options.cache_dir, use_cache=options.use_cache)
    record_settings(run, settings)
    return calibrate(
        scenario, profiles, policy=options.policy, class_mix=class_mix, histogram=histogram, models=options.models,
        skus=options.skus, pool_replicas=options.pool_replicas, larger_pools=options.larger_pools,
        duration_s=DEFAULT_DURATION_S if options.duration_s is None else options.duration_s,
        replications=DEFAULT_REPLICATIONS if options.replications is None else options.replications,
        seed=settings.seed, rel_tol=options.rel_tol, confidence=confidence, engine=settings.engine,
        workers=settings.workers, scheduler=settings.scheduler, store=folder_store(settings.cache_dir),
        progress=progress, search_settings=options.search_settings, prune=options.prune,
    )


@dataclass(frozen=True)
class Calibrated:
    result: CalibrationResult
    written: list[Path]


def calibrate_files(scenario_file: Path, out: Path, options: CalibrateOptions, *,
                    histogram_file: Sequence[Path] = (), progress: Callable[[int, int], None] | None = None,
                    announce: Announce | None = None, what_if: WhatIf = NO_CHANGES,
                    run: RunContext | None = None) -> Calibrated:
    """Calibrate the scenario's units (with ``what_if``'s ``--set``) and write the capacity table ``out`` and its
    JSON (both or neither)."""
    scenario, profiles = load_scenario_inputs(scenario_file, what_if.overrides)
    what_if.record(run)
    histogram = read_histograms(histogram_file)
    prepare_simulator(announce)
    result = calibrate_scenario(scenario, profiles, options, histogram=histogram, progress=progress, run=run)
    written = write_calibration(result, out)
    if run is not None:
        run.add_figures(units=int(result.table[["model", "sku", "tp_degree"]].drop_duplicates().shape[0]),
                        simulated=result.n_simulated, cached=result.n_cached, failures=len(result.failures))
        run.add_output(*written)
    return Calibrated(result, written)


def calibrate_with_cache(scenario: Scenario, profiles: pd.DataFrame, *, seed: int | None = None,
                         cache_dir: Path | None = None, use_cache: bool = True, engine: str = "auto",
                         workers: int | None = None, scheduler: str | None = None,
                         **options: Any) -> CalibrationResult:
    """:func:`planner.calibrate.calibrate` for a library caller: the settings resolved as the CLI resolves them
    (the scenario's seed, the cache folder from ``cache_dir`` or the environment) and the cache in that folder.

    ``options`` are the core function's other keywords (``policy``, ``models``, ``duration_s``, ...).
    """
    from planner.calibrate import calibrate

    settings = resolve_settings(os.environ, seed=seed, default_seed=scenario.seeds.base, engine=engine,
                                workers=workers, scheduler=scheduler, cache_dir=cache_dir, use_cache=use_cache)
    return calibrate(scenario, profiles, seed=settings.seed, engine=settings.engine, workers=settings.workers,
                     scheduler=settings.scheduler, store=folder_store(settings.cache_dir), **options)

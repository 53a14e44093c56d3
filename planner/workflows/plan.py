"""``planner plan`` and ``planner report``: read the history, run the loop, write the plan folder or the report."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.contracts import DEFAULT_MAX_GROWTH
from planner.settings import Settings, resolve_settings
from planner.storage import file_sha256, read_table
from planner.workflows.calibration_cache import folder_store
from planner.workflows.common import (
    NO_CHANGES,
    Announce,
    WhatIf,
    load_planning_inputs,
    prepare_simulator,
    read_histograms,
    read_named,
    record_settings,
    scenario_hashes,
)
from planner.workflows.files import check_plan_folder, write_plan_run

if TYPE_CHECKING:
    import pandas as pd

    from planner.loop.pipeline import PipelineResult
    from planner.loop.run import LoopSettings
    from planner.placement.window import PlanningWindow
    from planner.report.model import ReportModel
    from planner.runs import RunContext
    from planner.scenario import Scenario
    from planner.workflows.report_files import WrittenReport

Notify = Callable[[str], None]


@dataclass(frozen=True)
class LoopOptions:
    """The loop's options shared by ``planner plan`` and ``planner report`` (durations already parsed)."""

    max_rounds: int
    periods: str
    solver: str
    node_limit: int
    time_limit_s: float
    gap: float
    sim_duration_s: float
    sim_replications: int
    quantile: float | None = None
    seed: int | None = None
    cache_dir: Path | None = None
    search_settings: bool = True
    pools: bool = True
    engine: str = "auto"
    workers: int | None = None
    scheduler: str | None = None
    min_history_hours: int | None = None
    max_growth: float = DEFAULT_MAX_GROWTH
    commit_on_short_history: bool = False
    partial_hours: str = "mask"


def resolve_loop(options: LoopOptions, scenario: Scenario) -> tuple[Settings, LoopSettings]:
    """The run's settings (seed, quantile, engine, scheduler, cache folder) and the loop's, from them."""
    from planner.forecast.model import ModelSpec
    from planner.loop import LoopSettings

    settings = resolve_settings(os.environ, seed=options.seed, default_seed=scenario.seeds.base,
                                quantile=options.quantile, default_quantile=scenario.capacity.forecast_quantile,
                                engine=options.engine, workers=options.workers, scheduler=options.scheduler,
                                cache_dir=options.cache_dir, use_cache=True)
    loop = LoopSettings(max_rounds=options.max_rounds, periods=options.periods, solver=options.solver,
                        node_limit=options.node_limit, time_limit_s=options.time_limit_s, gap=options.gap,
                        quantile=settings.quantile, sim_duration_s=options.sim_duration_s,
                        sim_replications=options.sim_replications, seed=settings.seed, engine=settings.engine,
                        workers=settings.workers, scheduler=settings.scheduler,
                        search_settings=options.search_settings, pools=options.pools,
                        min_history_hours=ModelSpec.min_history_hours if options.min_history_hours is None
                        else options.min_history_hours, max_growth=options.max_growth,
                        commit_on_short_history=options.commit_on_short_history, partial_hours=options.partial_hours)
    return settings, loop


def record_pipeline(run: RunContext | None, result: PipelineResult, **extra: Any) -> None:
    """The key figures, the forecast and the plan of a pipeline run, for the run history."""
    if run is None:
        return
    loop = result.loop
    figures = {"plan_cost_usd": round(loop.cost_usd, 2), "total_gpus": loop.gpus_peak,
               "slo_classes_failed": len(loop.misses), "rounds": len(loop.rounds), "converged": loop.converged,
               "policy": loop.policy, "n_series": int(result.forecast.metadata.get("n_series", 0)),
               "forecast_requests_total": round(float(result.forecast.forecast["mean"].sum()), 1)}
    if result.comparison:
        figures["policies"] = {o.policy: {"usd": round(o.result.cost_usd, 2), "gpus": o.result.gpus_peak,
                                          "slo_met": o.result.converged} for o in result.comparison}
    run.add_figures(**extra, **figures)
    run.save_forecast(result.forecast.forecast)
    run.save_plan(result.loop.placement.plan)
    run.add_warnings(*pipeline_warnings(result))


def pipeline_warnings(result: PipelineResult) -> list[str]:
    """Every placement warning of the run (its own loop and each compared policy's), and every (model, class) whose
    token lengths a built-in law stands in for, once each."""
    loops = [result.loop, *(o.result for o in result.comparison or [])]
    defaults = [note for loop in loops
                for meta in [getattr(loop.calibration, "meta", None) or {}, *loop.simulation_meta]
                for note in meta.get("length_defaults", [])]
    return list(dict.fromkeys([*(w for loop in loops for w in loop.warnings), *defaults]))


@dataclass(frozen=True)
class Planned:
    result: PipelineResult
    written: list[Path]


def plan(scenario_file: Path, history_file: Path, out: Path, options: LoopOptions, *, as_of: str | None = None,
         compare: str | None = None, capacity_file: Path | None = None, histogram_file: Sequence[Path] = (),
         notify: Notify | None = None, announce: Announce | None = None, what_if: WhatIf = NO_CHANGES,
         run: RunContext | None = None) -> Planned:
    """Forecast, calibrate, place and simulate until every SLO holds; write the folder ``out`` as a whole.

    ``what_if`` changes the scenario (``--set``) and scales the forecast (``--demand-scale``)."""
    from planner.catalog import load_catalog
    from planner.loop.compare import parse_policies
    from planner.loop.pipeline import check_as_of_in_history, parse_as_of, run_pipeline
    from planner.placement.capacity import validate_capacity

    check_plan_folder(out)
    policies = parse_policies(compare) if compare else None
    scenario, profiles = load_planning_inputs(scenario_file, what_if.overrides)
    settings, loop = resolve_loop(options, scenario)
    record_settings(run, settings)
    what_if.record(run)
    capacity = validate_capacity(read_table(capacity_file), where=capacity_file) if capacity_file else None
    hashes = {**scenario_hashes(scenario_file, scenario), "history": file_sha256(history_file)}
    history, stamp = read_named(history_file), parse_as_of(as_of)
    check_as_of_in_history(history, stamp, where=str(history_file))
    prepare_simulator(announce)
    result = run_pipeline(scenario, history, load_catalog(), profiles, loop,
                          as_of=stamp, compare=policies, capacity=capacity,
                          histogram=read_histograms(histogram_file), input_hashes=hashes, notify=notify,
                          store=folder_store(settings.cache_dir), demand_scales=what_if.demand)
    written = write_plan_run(result, loop, out)
    record_pipeline(run, result)
    if run is not None:
        run.add_output(*written)
    return Planned(result, written)


@dataclass(frozen=True)
class Reported:
    result: PipelineResult
    model: ReportModel
    written: WrittenReport
    window: PlanningWindow
    as_of: pd.Timestamp
    previous_month_found: bool


def report(month: str, scenario_file: Path, history_file: Path, reports: Path, options: LoopOptions, *,
           as_of: str | None = None, allow_stale_history: bool = False, compare: str | None = None,
           histogram_file: Sequence[Path] = (), history_db: Path | None = None, notify: Notify | None = None,
           warn: Notify | None = None, announce: Announce | None = None, what_if: WhatIf = NO_CHANGES,
           run: RunContext | None = None) -> Reported:
    """Write ``<reports>/<month>/``: plan the month and build the report, under the reports folder's lock.

    ``history_db`` is the run history the previous month's plan and forecast are read from.
    """
    import pandas as pd

    from planner.catalog import load_catalog
    from planner.loop.alternatives import what_would_change
    from planner.loop.compare import parse_policies
    from planner.loop.pipeline import history_as_of, last_history_hour, parse_as_of, run_pipeline, with_evidence
    from planner.report import build_report
    from planner.report.assemble import report_inputs
    from planner.report.period import check_as_of, check_history_fresh, month_notes, month_window
    from planner.runs import RunHistory, last_month
    from planner.workflows.report_files import write_report
    from planner.workflows.report_lock import report_lock

    window = month_window(month)
    stamp = check_as_of(parse_as_of(as_of) if as_of is not None else window.start, window)
    policies = None if compare is None or compare.strip().lower() in ("", "none") else parse_policies(compare)
    scenario, profiles = load_planning_inputs(scenario_file, what_if.overrides)
    settings, loop = resolve_loop(options, scenario)
    record_settings(run, settings)
    what_if.record(run)
    with report_lock(reports) as lock:
        notice = lock.takeover_notice()
        if notice and warn is not None:
            warn(notice)
        catalog = load_catalog()
        previous = last_month(RunHistory(history_db), month)
        hashes = {**scenario_hashes(scenario_file, scenario), "history": file_sha256(history_file)}
        prepare_simulator(announce)
        say = notify or (lambda _text: None)
        frame = read_named(history_file)
        known = history_as_of(frame, stamp, where=str(history_file), month=month if as_of is None else None)
        for note in month_notes(month, window, last_history_hour(frame, where=str(history_file)),
                                pd.Timestamp(datetime.now(UTC))):
            (warn or say)(note)
        check_history_fresh(last_history_hour(known, where=str(history_file)), window, month,
                            allow_stale=allow_stale_history, where=history_file)
        loop = with_evidence(loop, scenario, known)  # the plan and its alternatives weigh the same history
        result = run_pipeline(scenario, known, catalog, profiles, loop, as_of=stamp, compare=policies,
                              histogram=read_histograms(histogram_file), input_hashes=hashes, notify=say,
                              window=window, store=folder_store(settings.cache_dir), demand_scales=what_if.demand)
        say("pricing the neighbouring tier choices and the prefix cache")
        alternatives = what_would_change(result.loop, scenario, result.forecast.forecast, catalog, profiles, loop,
                                         window, store=folder_store(settings.cache_dir))
        say("writing the report")
        inputs = report_inputs(month, f"{stamp:%Y-%m-%dT%H:%M:%SZ}", scenario, result, catalog,
                               previous_plan=previous.plan if previous else None,
                               previous_forecast=previous.forecast if previous else None,
                               what_if=what_if.describe(), alternatives=alternatives)
        model = build_report(inputs)
        written = write_report(model, reports, generated_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                               lock=lock)
    record_pipeline(run, result, report_spend_usd=round(result.loop.cost_usd, 2))
    if run is not None:
        run.add_output(written.directory)
    return Reported(result, model, written, window, stamp, previous is not None)

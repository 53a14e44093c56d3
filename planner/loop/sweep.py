"""``planner sweep``: the plan loop once per value of one scenario field, on the same forecast.

A sweep answers "what does a tighter SLO cost?" or "what if demand grows?" as a curve:
``--vary classes.interactive.ttft_p99_ms=300,500,800`` runs the whole loop (calibrate,
place, simulate, correct) with each value in turn, as ``--set`` would set it, and
``--vary demand-scale=1,1.5,2`` scales the forecast instead. Every point shares the
forecast (made once), so the points differ only by the value.

Points are independent, so they run in parallel through the engine layer, each loop in
its worker process on its own (``engine = local`` inside): the same bits whatever ran
where. A value that makes the placement infeasible is a row with the diagnosis, not a
failed sweep; a value the scenario refuses is refused before any work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from planner.errors import InfeasibleError, InputError
from planner.forecast.scaling import SELECTORS, DemandScale, parse_demand_scale, scale_forecast
from planner.loop.run import LoopResult, LoopSettings, run_loop
from planner.scenario import Scenario, parse_scenario
from planner.scenario.overrides import apply_overrides, parse_override

if TYPE_CHECKING:
    from planner.calibrate.cache import CalibrationStore
    from planner.catalog import Catalog

OPTION = "--vary"
DEMAND_SCALE = "demand-scale"
VARY_SCALE_EXAMPLE = f"write e.g. {OPTION} {DEMAND_SCALE}=1,1.5,2 or {OPTION} {DEMAND_SCALE}=1,region=eu-west:1.5"
SWEEP_COLUMNS = ("value", "feasible", "cost_usd", "gpus_peak", "slo_status", "binding", "rounds", "diagnosis")
"""``sweep.csv``: one row per value, in the order given."""


@dataclass(frozen=True)
class Vary:
    """``--vary PATH=V1,V2,...``: the field (or ``demand-scale``) and its values as written."""

    path: str
    values: tuple[str, ...]

    @property
    def scales_demand(self) -> bool:
        return self.path == DEMAND_SCALE


def parse_vary(text: str) -> Vary:
    """``PATH=V1,V2,...``; commas inside brackets or quotes belong to a value (``skus=["H100","H200"],["H100"]``)."""
    path, sep, rest = text.partition("=")
    values = tuple(v.strip() for v in _top_level_split(rest))
    if not sep or not path.strip() or not values or any(not v for v in values):
        raise InputError(f"'{text}' is not PATH=V1,V2,...", where=OPTION,
                         fix="write e.g. --vary classes.interactive.ttft_p99_ms=300,500,800 or "
                             "--vary demand-scale=1,1.5,2")
    if len(set(values)) != len(values):
        raise InputError(f"'{text}' repeats a value", where=OPTION, fix="give each value once")
    return Vary(path.strip(), values)


def _top_level_split(text: str) -> list[str]:
    parts, current, depth, quote = [], "", 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    parts.append(current)
    return parts


@dataclass(frozen=True)
class SweepPoint:
    """One value's inputs: the scenario with the value set, and the demand scales with it applied."""

    value: str
    scenario: Scenario
    demand: tuple[DemandScale, ...]


def sweep_points(vary: Vary, data: dict[str, Any], source: str, demand: tuple[DemandScale, ...]) -> list[SweepPoint]:
    """Every value's scenario (``data`` is the scenario file's TOML with any ``--set`` applied), each validated
    like the file: a value the scenario refuses raises before any work, naming ``--vary``."""
    points = []
    for value in vary.values:
        if vary.scales_demand:
            scenario = parse_scenario(data, source)
            scale = parse_demand_scale(value, option=OPTION, example=VARY_SCALE_EXAMPLE)
            _check_selects(scale, scenario)
            points.append(SweepPoint(value, scenario, (*demand, scale)))
            continue
        override = parse_override(f"{vary.path}={value}", option=OPTION)
        scenario = parse_scenario(apply_overrides(data, [override]), f"{source} with {OPTION} {vary.path}={value}")
        points.append(SweepPoint(value, scenario, demand))
    return points


def _check_selects(scale: DemandScale, scenario: Scenario) -> None:
    """A ``region=``, ``model=`` or ``class=`` value names one of the scenario's series: else no point would
    scale anything, and the sweep would fail only after forecasting, in a worker."""
    if scale.column is None:
        return
    names = {SELECTORS["region"]: scenario.origin_names, SELECTORS["model"]: scenario.model_names,
             SELECTORS["class"]: scenario.class_names}[scale.column]
    if scale.value not in names:
        raise InputError(f"'{scale.text}': the scenario has no {scale.column} '{scale.value}'", where=OPTION,
                         fix=f"use one of: {', '.join(names)}")


@dataclass(frozen=True)
class SweepTask:
    """What one worker needs to run the loop for one point (everything pickles)."""

    point: SweepPoint
    forecast: pd.DataFrame
    catalog: Catalog
    profiles: pd.DataFrame
    settings: LoopSettings
    histogram: pd.DataFrame | None
    store: CalibrationStore | None
    capacity: pd.DataFrame | None = None


def run_point(task: SweepTask) -> dict[str, Any]:
    """One row of ``sweep.csv`` (a top-level function, so that a worker process can run it)."""
    point = task.point
    try:
        loop = run_loop(point.scenario, scale_forecast(task.forecast, point.demand), task.catalog, task.profiles,
                        task.settings, capacity=task.capacity, histogram=task.histogram, store=task.store)
    except InfeasibleError as exc:
        reason = exc.message.split(":", 1)[0].removeprefix("placement is infeasible").strip(" ()")
        return {"value": point.value, "feasible": False, "cost_usd": None, "gpus_peak": None,
                "slo_status": "not simulated", "binding": reason, "rounds": 0,
                "diagnosis": f"{exc.message} To fix: {exc.fix}" if exc.fix else exc.message}
    return {"value": point.value, "feasible": True, "cost_usd": round(loop.cost_usd, 2), "gpus_peak": loop.gpus_peak,
            "slo_status": "met" if loop.converged else f"missed ({len(loop.misses)} class(es))",
            "binding": binding_constraint(loop), "rounds": len(loop.rounds),
            "diagnosis": "; ".join(m.describe() for m in loop.misses[:3])}


def binding_constraint(loop: LoopResult) -> str:
    """The SLO that limits the plan's capacity most: the (class, metric) that binds the calibration of the
    deployments holding the most GPUs at the plan's peak, with their share of those GPUs."""
    capacity, plan = loop.capacity, loop.placement.plan
    if plan.empty or not {"binding_class", "binding_metric"} <= set(capacity.columns):
        return ""
    peak = plan.groupby(plan["period"].astype(str))["gpus"].sum().idxmax()
    gpus = plan[plan["period"].astype(str) == peak].groupby(["model", "sku", "tp_degree"])["gpus"].sum()
    binds = capacity.drop_duplicates(["model", "sku", "tp_degree"]).set_index(["model", "sku", "tp_degree"])
    joined = pd.DataFrame({"gpus": gpus}).join(binds[["binding_class", "binding_metric"]], how="inner").dropna()
    if joined.empty:
        return ""
    shares = joined.groupby(["binding_class", "binding_metric"])["gpus"].sum().sort_index()
    (klass, metric), top = shares.idxmax(), shares.max()
    return f"{klass} {metric} p99 ({100 * top / gpus.sum():.0f}% of peak GPUs)"


def run_sweep(points: list[SweepPoint], forecast: pd.DataFrame, catalog: Catalog, profiles: pd.DataFrame,
              settings: LoopSettings, *, histogram: pd.DataFrame | None = None,
              store: CalibrationStore | None = None, capacity: pd.DataFrame | None = None,
              progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """``sweep.csv``'s table: the loop for every point, in parallel on ``settings``' engine.

    Every loop starts from ``capacity`` when given. Otherwise, when every point has the same scenario (a
    demand sweep), its capacity is calibrated once, here, on the whole engine, and every loop starts from that
    table: the table a loop would calibrate itself. Else each loop calibrates its own scenario.
    """
    from planner.engine import run_tasks

    if capacity is None and len(points) > 1 and all(p.scenario == points[0].scenario for p in points):
        from planner.calibrate import calibrate
        from planner.workloads import forecast_mixes

        scenario = points[0].scenario
        mixes = forecast_mixes(forecast, scenario.model_names, scenario.class_names)
        capacity = calibrate(scenario, profiles, policy=scenario.policy.name, histogram=histogram, mixes=mixes,
                             seed=settings.seed, search_settings=settings.search_settings, engine=settings.engine,
                             workers=settings.workers, scheduler=settings.scheduler, store=store).table
    inner = replace(settings, engine="local", workers=1, scheduler=None)
    tasks = [SweepTask(p, forecast, catalog, profiles, inner, histogram, store, capacity) for p in points]
    rows = run_tasks(run_point, tasks, engine=settings.engine, workers=settings.workers, progress=progress,
                     scheduler=settings.scheduler)
    table = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    return table.astype({"gpus_peak": "Int64", "rounds": "int64"})

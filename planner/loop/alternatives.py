"""What would change the plan: its cost under each neighbouring purchase-tier choice, and the price of each margin.

For every tier the scenario allows (when it allows more than one) the plan is placed again
without it, and for every tier it does not allow, with it. Each is one placement with the
loop's final capacity table, over the same forecast and periods: it prices the choice
without re-simulating it, which is right for tiers (a tier changes the price and the
spot-tolerance of the replicas, not how fast a replica serves). An SLO choice changes the
capacity per replica and needs calibration and the simulator again: that is what
``planner sweep`` does, and the report names the command.

Every safety margin the plan carries is priced the same way, by placing the forecast again with
that margin alone removed (:data:`MARGINS`): the forecast quantile (the median instead), the
utilisation cap (1), redundancy (0), the pool floor (1), and calibration's confidence level (the
plan's deployments calibrated again at 50 % on one replica, and the loop's final table scaled by
the change, at every pool size). The difference in USD and GPUs at the fleet peak is
what the margin costs; none of them is re-simulated, so it is a price, not a recommendation.

The rows' placements share nothing, so they run side by side on the loop's engine (each on one
core; a placement's search is bounded by counts, never the clock, so where a row runs changes
nothing). The recalibrations they need run first, on the whole engine.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from planner.contracts.columns import ENGINE_SETTING_COLUMNS
from planner.contracts.names import Tier
from planner.engine import run_tasks
from planner.errors import InfeasibleError
from planner.loop.run import peak_gpus
from planner.placement.capacity import at_smallest_pool
from planner.placement.place import place_plan
from planner.workloads import forecast_mixes

if TYPE_CHECKING:
    from planner.calibrate.cache import CalibrationStore
    from planner.catalog import Catalog
    from planner.loop.run import LoopResult, LoopSettings
    from planner.placement.window import PlanningWindow
    from planner.scenario import Scenario

CACHE_CHOICE = "prefix caching off"
ALTERNATIVE_COLUMNS = ("choice", "kind", "set", "feasible", "usd", "usd_vs_plan", "usd_vs_plan_pct", "gpus_peak",
                       "gpus_vs_plan", "note")
TIER, CACHE, MARGIN = "tier", "prefix cache", "margin"
"""The kinds of row: a neighbouring tier choice, prefix caching off, a safety margin removed."""
LOW_CONFIDENCE = 0.5
MARGINS = {
    "forecast quantile": "forecast error: demand above the median forecast in the plan's busiest hours",
    "utilisation cap": "traffic burstier than the Poisson arrivals calibration assumes within an hour, and a class "
                       "mix that shifts within the hour",
    "redundancy": "losing a replica (or a region's capacity) to a failure or a rollout",
    "pool floor": "a pool of one replica: no replica to drain to during restarts and upgrades",
    "calibration confidence": "the simulator's sampling error: a coefficient measured from a few replications "
                              "could sit above the true capacity",
}
"""Each margin and what it protects against."""


def tier_choices(scenario: Scenario) -> list[tuple[str, tuple[str, ...]]]:
    """(label, tiers) of every neighbouring tier choice: each allowed tier dropped, each other tier added."""
    allowed = [str(t) for t in scenario.capacity.tiers]
    choices = []
    for tier in (str(t) for t in Tier):
        if tier in allowed and len(allowed) > 1:
            choices.append((f"without {tier}", tuple(t for t in allowed if t != tier)))
        elif tier not in allowed:
            choices.append((f"with {tier}", (*allowed, tier)))
    return choices


@dataclass(frozen=True)
class Alternative:
    """One row of the table before it is placed: its label, and the scenario, capacity table and forecast
    quantile it is placed with. ``note`` says what the row is, given the GPUs its plan runs at the fleet peak."""

    row: dict[str, object]
    scenario: Scenario
    capacity: pd.DataFrame
    quantile: float | None
    note: Callable[[int], str]


@dataclass(frozen=True)
class AlternativePlacement:
    """What a worker needs to place one row (:func:`place_alternative`)."""

    scenario: Scenario
    capacity: pd.DataFrame
    quantile: float | None
    forecast: pd.DataFrame
    catalog: Catalog
    profiles: pd.DataFrame
    settings: LoopSettings
    window: PlanningWindow | None


def place_alternative(task: AlternativePlacement) -> tuple[float, int] | str:
    """The plan cost (USD) and GPUs at the fleet peak of one row's placement, or why it is infeasible."""
    s = task.settings
    try:
        placed = place_plan(task.scenario, task.forecast, task.catalog, task.profiles, capacity=task.capacity,
                            solver=s.solver, node_limit=s.node_limit, time_limit_s=s.time_limit_s, gap=s.gap,
                            quantile=task.quantile, periods=s.periods, baselines=False, window=task.window,
                            reserved_evidence=s.reserved_evidence)
    except InfeasibleError as exc:
        return exc.message.split("\n")[0].rstrip(": ")
    return float(placed.meta["cost_usd"]["total"]), peak_gpus(placed.plan)


def what_would_change(loop: LoopResult, scenario: Scenario, forecast: pd.DataFrame, catalog: Catalog,
                      profiles: pd.DataFrame, settings: LoopSettings, window: PlanningWindow | None = None,
                      store: CalibrationStore | None = None) -> pd.DataFrame:
    """One row per tier choice, one for prefix caching off (:func:`cache_choice`) and one per margin
    (:func:`margin_rows`): its plan cost and GPUs against the loop's plan, or why it is infeasible; cheapest first."""
    alternatives = [*tier_rows(loop, scenario, settings),
                    *cache_choice(loop, scenario, forecast, profiles, settings, store=store),
                    *margin_rows(loop, scenario, forecast, profiles, settings, store=store)]
    one_core = replace(settings, engine="local", workers=1, scheduler=None)
    tasks = [AlternativePlacement(a.scenario, a.capacity, a.quantile, forecast, catalog, profiles, one_core, window)
             for a in alternatives]
    engine = "local" if settings.engine in ("local", "dask") else settings.engine
    placed = run_tasks(place_alternative, tasks, engine=engine, workers=settings.workers)
    rows = [_priced(loop, a, outcome) for a, outcome in zip(alternatives, placed, strict=True)]
    table = pd.DataFrame(rows, columns=list(ALTERNATIVE_COLUMNS))
    return table.sort_values(["feasible", "usd", "choice"], ascending=[False, True, True], kind="stable",
                             na_position="last").reset_index(drop=True)


def tier_rows(loop: LoopResult, scenario: Scenario, settings: LoopSettings) -> list[Alternative]:
    """One row per neighbouring tier choice (:func:`tier_choices`), placed on the loop's final capacity."""
    rows = []
    for label, tiers in tier_choices(scenario):
        changed = scenario.model_copy(update={"capacity": scenario.capacity.model_copy(update={"tiers": tiers})})
        rows.append(Alternative({"choice": label, "kind": TIER,
                                 "set": f"--set 'capacity.tiers={json.dumps(list(tiers))}'"},
                                changed, loop.capacity, settings.quantile,
                                lambda _gpus: "placement only: not re-simulated"))
    return rows


def _priced(loop: LoopResult, alternative: Alternative, placed: tuple[float, int] | str) -> dict[str, object]:
    """The row with the cost and GPUs of its plan against the loop's, or why it is infeasible."""
    row = alternative.row
    if isinstance(placed, str):
        return {**row, "feasible": False, "note": placed}
    usd, gpus = placed
    return {**row, "feasible": True, "usd": usd, "usd_vs_plan": usd - loop.cost_usd,
            "usd_vs_plan_pct": 100.0 * (usd - loop.cost_usd) / loop.cost_usd if loop.cost_usd else None,
            "gpus_peak": gpus, "gpus_vs_plan": gpus - loop.gpus_peak, "note": alternative.note(gpus)}


def margin_rows(loop: LoopResult, scenario: Scenario, forecast: pd.DataFrame, profiles: pd.DataFrame,
                settings: LoopSettings, *, store: CalibrationStore | None = None) -> list[Alternative]:
    """One row per margin the plan carries (:data:`MARGINS`): the plan placed again without it."""
    capacity = scenario.capacity
    level = capacity.forecast_quantile if settings.quantile is None else settings.quantile

    def rule(**update: object) -> Scenario:
        return scenario.model_copy(update={"capacity": capacity.model_copy(update=update)})

    def without(name: str, change: str, option: str, changed: Scenario, table: pd.DataFrame | None = None,
                quantile: float | None = settings.quantile) -> Alternative:
        return Alternative({"choice": f"{name}: {change}", "kind": MARGIN, "set": option}, changed,
                           loop.capacity if table is None else table, quantile, partial(_margin_note, name))

    rows: list[Alternative] = []
    if level > 0.5:
        rows.append(without("forecast quantile", f"the median instead of q{100 * level:g}", "--quantile 0.5",
                            scenario, quantile=0.5))
    if capacity.utilisation_cap < 1:
        rows.append(without("utilisation cap", f"1 instead of {capacity.utilisation_cap:g}",
                            "--set capacity.utilisation_cap=1", rule(utilisation_cap=1.0)))
    if capacity.redundancy > 0:
        rows.append(without("redundancy", f"0 instead of {capacity.redundancy}", "--set capacity.redundancy=0",
                            rule(redundancy=0)))
    if capacity.min_replicas_per_pool > 1:
        rows.append(without("pool floor", f"1 instead of {capacity.min_replicas_per_pool}",
                            "--set capacity.min_replicas_per_pool=1", rule(min_replicas_per_pool=1)))
    confident = _low_confidence_table(loop, scenario, forecast, profiles, settings, store)
    if confident is not None:
        rows.append(without("calibration confidence", f"{100 * LOW_CONFIDENCE:g} % instead of 95 %",
                            f"planner calibrate --confidence {LOW_CONFIDENCE:g}", scenario, confident))
    return rows


def _margin_note(name: str, _gpus: int) -> str:
    return f"what the margin costs; it protects against {MARGINS[name]}; placement only: not re-simulated"


def _low_confidence_table(loop: LoopResult, scenario: Scenario, forecast: pd.DataFrame, profiles: pd.DataFrame,
                          settings: LoopSettings, store: CalibrationStore | None) -> pd.DataFrame | None:
    """The loop's final table with the plan's deployments calibrated again at :data:`LOW_CONFIDENCE` (None when
    the loop's capacity was not calibrated)."""
    calibration = getattr(loop, "calibration", None)
    if calibration is None or float(calibration.meta.get("confidence", 0.0)) <= LOW_CONFIDENCE:
        return None
    models = sorted(set(loop.placement.plan.loc[loop.placement.plan["replicas"] > 0, "model"].astype(str)))
    if not models:
        return None
    return _recalibrated(loop, scenario, models, forecast, profiles, settings, store, {},
                         confidence=LOW_CONFIDENCE)[1]


def _recalibrated(loop: LoopResult, scenario: Scenario, models: list[str], forecast: pd.DataFrame,
                  profiles: pd.DataFrame, settings: LoopSettings, store: CalibrationStore | None,
                  change: dict[str, object], **options: Any) -> tuple[Scenario, pd.DataFrame]:
    """The scenario with ``change`` made to ``models``, each cut to the (SKU, TP) deployments the plan runs, and the
    loop's final table with those deployments calibrated again on it on one replica (``options`` go to the
    calibration; :func:`_headroom_applied`), the models' other deployments left out."""
    from planner.calibrate import calibrate

    deployed = _deployed(loop.placement.plan, models)
    changed = scenario.model_copy(update={"models": tuple(
        m.model_copy(update={**change, "skus": tuple(sorted({s for s, _ in deployed[m.name]})),
                             "tp": tuple(sorted({t for _, t in deployed[m.name]}))})
        if m.name in models else m for m in scenario.models)})
    mixes = forecast_mixes(forecast, scenario.model_names, scenario.class_names)
    fresh = calibrate(changed, profiles, policy=loop.policy, mixes=mixes, models=models, seed=settings.seed,
                      search_settings=settings.search_settings, engine=settings.engine, workers=settings.workers,
                      scheduler=settings.scheduler, store=store, **options).table
    table = _headroom_applied(loop.capacity, loop.calibration.table, fresh)
    kept = [str(m) not in deployed or (str(s), int(t)) in deployed[str(m)]
            for m, s, t in zip(table["model"], table["sku"], table["tp_degree"], strict=True)]
    return changed, table[kept].reset_index(drop=True)


def cached_models(scenario: Scenario, forecast: pd.DataFrame) -> list[str]:
    """The models whose prefix cache serves something: caching on, and a class with traffic that declares reuse."""
    mixes = forecast_mixes(forecast, scenario.model_names, scenario.class_names)
    return [m for m in scenario.model_names if scenario.model(m).prefix_caching and any(
        share > 0 and any(d.reuse is not None for d in scenario.declared_lengths(m, k))
        for k, share in mixes.get(m, {}).items())]


def cache_choice(loop: LoopResult, scenario: Scenario, forecast: pd.DataFrame, profiles: pd.DataFrame,
                 settings: LoopSettings, *, store: CalibrationStore | None = None) -> list[Alternative]:
    """What the prefix cache saves: the same plan's deployments, placed again on capacity calibrated with caching off.

    For the models whose cache serves something, the deployments (SKU, TP) the plan runs are calibrated again
    with ``prefix_caching = false`` on one replica (the loop's policy, mixes and seed; the calibration cache keeps
    them for the next run), the loop's final table scaled by the change at every pool size
    (:func:`_headroom_applied`), and the forecast placed on those deployments alone (other models keep every unit).
    Placement only: the caching-off plan is not re-simulated. No row when no model's cache serves anything, or
    when the loop's capacity was not calibrated.
    """
    models = [m for m in cached_models(scenario, forecast) if m in set(loop.placement.plan["model"].astype(str))] \
        if getattr(loop, "calibration", None) is not None else []
    if not models:
        return []
    off, table = _recalibrated(loop, scenario, models, forecast, profiles, settings, store, {"prefix_caching": False})

    def note(gpus: int) -> str:
        return (f"{gpus - loop.gpus_peak:+d} GPUs at the fleet peak ({gpus} against {loop.gpus_peak}): "
                f"what the prefix cache of {', '.join(models)} saves; calibrated with caching off, "
                "placement only: not re-simulated")

    return [Alternative({"choice": CACHE_CHOICE, "kind": CACHE,
                         "set": " ".join(f"--set models.{m}.prefix_caching=false" for m in models)},
                        off, table, settings.quantile, note)]


def _deployed(plan: pd.DataFrame, models: list[str]) -> dict[str, set[tuple[str, int]]]:
    """Per model, the (SKU, TP) deployments the plan runs in any period."""
    rows = plan[plan["model"].astype(str).isin(models) & (plan["replicas"] > 0)]
    out: dict[str, set[tuple[str, int]]] = {m: set() for m in models}
    for model, sku, tp in zip(rows["model"], rows["sku"], rows["tp_degree"], strict=True):
        out[str(model)].add((str(sku), int(tp)))
    return out


def _headroom_applied(final: pd.DataFrame, calibrated: pd.DataFrame, recalibrated: pd.DataFrame) -> pd.DataFrame:
    """``final`` with every row (every pool size) of each unit ``recalibrated`` holds scaled by recalibrated /
    calibrated of the same (model, sku, tp_degree, traffic_class) at the smallest pool size, with the
    recalibration's engine setting: the loop's derates and raises and the pool gains carried over, the change
    measured on one replica. A class only ``recalibrated`` has keeps its own rate; one it lacks is dropped."""
    key = ["model", "sku", "tp_degree", "traffic_class"]
    lone = calibrated[at_smallest_pool(calibrated)].set_index(key)["max_rps_per_replica"]
    fresh = recalibrated[at_smallest_pool(recalibrated)].set_index(key)
    units = set(map(tuple, recalibrated[["model", "sku", "tp_degree"]].itertuples(index=False)))
    in_unit = np.array([tuple(r) in units for r in final[["model", "sku", "tp_degree"]].itertuples(index=False)],
                       dtype=bool)
    rows = final[in_unit].copy()
    index = pd.MultiIndex.from_frame(rows[key])
    ratio = (fresh["max_rps_per_replica"] / lone).reindex(index).to_numpy()
    rows = rows[~np.isnan(ratio)].assign(max_rps_per_replica=rows["max_rps_per_replica"].to_numpy()[
        ~np.isnan(ratio)] * ratio[~np.isnan(ratio)])
    settings = [c for c in ENGINE_SETTING_COLUMNS if c in rows.columns and c in fresh.columns]
    if settings:
        chosen = fresh[settings].reindex(pd.MultiIndex.from_frame(rows[key]))
        for column in settings:
            rows[column] = chosen[column].to_numpy()
    known = set(map(tuple, final[key].itertuples(index=False)))
    added = fresh.reset_index()
    added = added[[tuple(r) not in known for r in added[key].itertuples(index=False)]]
    if "pool_replicas" in final.columns:
        added = added.assign(pool_replicas=1)
    return pd.concat([final[~in_unit], rows, added[final.columns.intersection(added.columns)]],
                     ignore_index=True)[final.columns]

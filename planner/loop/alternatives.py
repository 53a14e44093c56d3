"""What would change the plan: its cost under each neighbouring purchase-tier choice, from a small built-in sweep.

For every tier the scenario allows (when it allows more than one) the plan is placed again
without it, and for every tier it does not allow, with it. Each is one placement with the
loop's final capacity table, over the same forecast and periods: it prices the choice
without re-simulating it, which is right for tiers (a tier changes the price and the
spot-tolerance of the replicas, not how fast a replica serves). An SLO choice changes the
capacity per replica and needs calibration and the simulator again: that is what
``planner sweep`` does, and the report names the command.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd

from planner.contracts.names import Tier
from planner.errors import InfeasibleError
from planner.loop.run import peak_gpus
from planner.placement.place import place_plan
from planner.workloads import forecast_mixes

if TYPE_CHECKING:
    from planner.calibrate.cache import CalibrationStore
    from planner.catalog import Catalog
    from planner.loop.run import LoopResult, LoopSettings
    from planner.placement.window import PlanningWindow
    from planner.scenario import Scenario

CACHE_CHOICE = "prefix caching off"
ALTERNATIVE_COLUMNS = ("choice", "set", "feasible", "usd", "usd_vs_plan", "usd_vs_plan_pct", "note")


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


def what_would_change(loop: LoopResult, scenario: Scenario, forecast: pd.DataFrame, catalog: Catalog,
                      profiles: pd.DataFrame, settings: LoopSettings, window: PlanningWindow | None = None,
                      store: CalibrationStore | None = None) -> pd.DataFrame:
    """One row per tier choice, and one for prefix caching off (:func:`cache_choice`): its plan cost against the
    loop's plan, or why it is infeasible; cheapest first."""
    rows = []
    for label, tiers in tier_choices(scenario):
        changed = scenario.model_copy(update={"capacity": scenario.capacity.model_copy(update={"tiers": tiers})})
        row = {"choice": label, "set": f"--set 'capacity.tiers={json.dumps(list(tiers))}'"}
        try:
            placed = place_plan(changed, forecast, catalog, profiles, capacity=loop.capacity, solver=settings.solver,
                                node_limit=settings.node_limit, time_limit_s=settings.time_limit_s, gap=settings.gap,
                                quantile=settings.quantile, periods=settings.periods, baselines=False,
                                window=window)
        except InfeasibleError as exc:
            rows.append({**row, "feasible": False, "note": exc.message.split("\n")[0].rstrip(": ")})
            continue
        usd = float(placed.meta["cost_usd"]["total"])
        rows.append({**row, "feasible": True, "usd": usd, "usd_vs_plan": usd - loop.cost_usd,
                     "usd_vs_plan_pct": 100.0 * (usd - loop.cost_usd) / loop.cost_usd if loop.cost_usd else None,
                     "note": "placement only: not re-simulated"})
    rows += cache_choice(loop, scenario, forecast, catalog, profiles, settings, window=window, store=store)
    table = pd.DataFrame(rows, columns=list(ALTERNATIVE_COLUMNS))
    return table.sort_values(["feasible", "usd", "choice"], ascending=[False, True, True], kind="stable",
                             na_position="last").reset_index(drop=True)


def cached_models(scenario: Scenario, forecast: pd.DataFrame) -> list[str]:
    """The models whose prefix cache serves something: caching on, and a class with traffic that declares reuse."""
    mixes = forecast_mixes(forecast, scenario.model_names, scenario.class_names)
    return [m for m in scenario.model_names if scenario.model(m).prefix_caching and any(
        share > 0 and any(d.reuse is not None for d in scenario.declared_lengths(m, k))
        for k, share in mixes.get(m, {}).items())]


def cache_choice(loop: LoopResult, scenario: Scenario, forecast: pd.DataFrame, catalog: Catalog,
                 profiles: pd.DataFrame, settings: LoopSettings, *, window: PlanningWindow | None = None,
                 store: CalibrationStore | None = None) -> list[dict[str, object]]:
    """What the prefix cache saves: the same plan's deployments, placed again on capacity calibrated with caching off.

    For the models whose cache serves something, the deployments (SKU, TP) the plan runs are calibrated again
    with ``prefix_caching = false`` (the loop's policy, mixes and seed; the calibration cache keeps them for the
    next run), each coefficient scaled by the loop's own headroom change of that row (its final table over its
    calibration), and the forecast placed on those deployments alone (other models keep every unit).
    Placement only: the caching-off plan is not re-simulated. No row when no model's cache serves anything, or
    when the loop's capacity was not calibrated.
    """
    from planner.calibrate import calibrate

    models = [m for m in cached_models(scenario, forecast) if m in set(loop.placement.plan["model"].astype(str))] \
        if getattr(loop, "calibration", None) is not None else []
    if not models:
        return []
    deployed = _deployed(loop.placement.plan, models)
    off = scenario.model_copy(update={"models": tuple(
        m.model_copy(update={"prefix_caching": False, "skus": tuple(sorted({s for s, _ in deployed[m.name]})),
                             "tp": tuple(sorted({t for _, t in deployed[m.name]}))})
        if m.name in models else m for m in scenario.models)})
    mixes = forecast_mixes(forecast, scenario.model_names, scenario.class_names)
    uncached = calibrate(off, profiles, policy=loop.policy, mixes=mixes, models=models, seed=settings.seed,
                         search_settings=settings.search_settings, engine=settings.engine, workers=settings.workers,
                         scheduler=settings.scheduler, store=store).table
    table = _headroom_applied(loop.capacity, loop.calibration.table, uncached)
    kept = [str(m) not in deployed or (str(s), int(t)) in deployed[str(m)]
            for m, s, t in zip(table["model"], table["sku"], table["tp_degree"], strict=True)]
    table = table[kept].reset_index(drop=True)
    row: dict[str, object] = {"choice": CACHE_CHOICE,
                              "set": " ".join(f"--set models.{m}.prefix_caching=false" for m in models)}
    try:
        placed = place_plan(off, forecast, catalog, profiles, capacity=table, solver=settings.solver,
                            node_limit=settings.node_limit, time_limit_s=settings.time_limit_s, gap=settings.gap,
                            quantile=settings.quantile, periods=settings.periods, baselines=False, window=window)
    except InfeasibleError as exc:
        return [{**row, "feasible": False, "note": exc.message.split("\n")[0].rstrip(": ")}]
    usd, gpus = float(placed.meta["cost_usd"]["total"]), peak_gpus(placed.plan)
    return [{**row, "feasible": True, "usd": usd, "usd_vs_plan": usd - loop.cost_usd,
             "usd_vs_plan_pct": 100.0 * (usd - loop.cost_usd) / loop.cost_usd if loop.cost_usd else None,
             "note": f"{gpus - loop.gpus_peak:+d} GPUs at the fleet peak ({gpus} against {loop.gpus_peak}): what "
                     f"the prefix cache of {', '.join(models)} saves; calibrated with caching off, placement only: "
                     "not re-simulated"}]


def _deployed(plan: pd.DataFrame, models: list[str]) -> dict[str, set[tuple[str, int]]]:
    """Per model, the (SKU, TP) deployments the plan runs in any period."""
    rows = plan[plan["model"].astype(str).isin(models) & (plan["replicas"] > 0)]
    out: dict[str, set[tuple[str, int]]] = {m: set() for m in models}
    for model, sku, tp in zip(rows["model"], rows["sku"], rows["tp_degree"], strict=True):
        out[str(model)].add((str(sku), int(tp)))
    return out


def _headroom_applied(final: pd.DataFrame, calibrated: pd.DataFrame, uncached: pd.DataFrame) -> pd.DataFrame:
    """``final`` with the rows of ``uncached``'s units replaced by them, each scaled by final / calibrated of the
    same (model, sku, tp_degree, traffic_class): the loop's derates and raises carried over."""
    key = ["model", "sku", "tp_degree", "traffic_class"]
    ratio = final.set_index(key)["max_rps_per_replica"] / calibrated.set_index(key)["max_rps_per_replica"]
    scaled = uncached.set_index(key)
    scaled["max_rps_per_replica"] = scaled["max_rps_per_replica"] * ratio.reindex(scaled.index).fillna(1.0)
    units = set(map(tuple, uncached[["model", "sku", "tp_degree"]].itertuples(index=False)))
    kept = final[[tuple(r) not in units for r in final[["model", "sku", "tp_degree"]].itertuples(index=False)]]
    return pd.concat([kept, scaled.reset_index()[final.columns.intersection(scaled.reset_index().columns)]],
                     ignore_index=True)[final.columns]

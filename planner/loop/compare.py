"""What each scheduling policy costs: the loop run once per policy on the same forecast and SLOs.

For every policy the capacity is calibrated under that policy (same requests, thanks to
common random numbers: calibration seeds do not depend on the policy), the plan is
placed and corrected until the SLOs hold, and the outcome is the plan's peak GPUs and
USD over the horizon. A policy that cannot meet the SLOs within the rounds is reported
with ``slo_met`` false and what still fails, never dropped: that is itself an answer
("FCFS cannot hold interactive TTFT at any affordable size").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from planner.catalog import Catalog
from planner.errors import InputError
from planner.loop.run import LoopResult, LoopSettings, Notify, capacity_key, run_loop
from planner.placement.result import PlacementResult
from planner.placement.window import PlanningWindow
from planner.scenario import Scenario
from planner.sim.policies import get_policy

if TYPE_CHECKING:
    from planner.calibrate.cache import CalibrationStore
    from planner.calibrate.table import CalibrationResult
    from planner.placement.result import PlacementResult


@dataclass(frozen=True)
class PolicyOutcome:
    policy: str
    result: LoopResult

    def row(self) -> dict[str, object]:
        result = self.result
        return {"policy": self.policy, "gpus": result.gpus_peak, "usd": round(result.cost_usd, 2),
                "slo_met": result.converged, "rounds": len(result.rounds), "binding": binding(result),
                "capacity": capacity_summary(result),
                "still_failing": "; ".join(m.describe() for m in result.misses[:3])}


def _calibrated_units(result: LoopResult, *columns: str) -> pd.DataFrame | None:
    """One row per calibrated (model, SKU, TP) of this policy's capacity table, or None without those columns."""
    table = getattr(result.calibration, "table", None)
    if table is None or table.empty or not {"model", "sku", "tp_degree", *columns} <= set(table.columns):
        return None
    return table.drop_duplicates(["model", "sku", "tp_degree"])


def binding(result: LoopResult) -> str:
    """What limits capacity under this policy: the calibration's binding (class, metric), most frequent first.

    When every policy ties, this says why: e.g. an end-to-end SLO that binds through the
    slower decode steps of a larger batch, before any request waits for admission, is the
    same under every order of the admission queue.
    """
    units = _calibrated_units(result, "binding_class", "binding_metric")
    if units is None:
        return "capacity table given" if result.calibration is None else "not reported"
    counts = (units["binding_class"].astype(str) + " " + units["binding_metric"].astype(str)).value_counts()
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} on {n} of {len(units)} (model, SKU, TP)" for name, n in ordered)


def capacity_summary(result: LoopResult) -> str:
    """Per model, the unit with the most SLO-compliant req/s per GPU under this policy, and how close it runs to its
    throughput ceiling: e.g. ``llama-3.1-8b H100 TP1 24.1 req/s/GPU at 78 % of ceiling``.

    The ceiling is what the replica's steps can carry with no latency target at all, so it is the same under
    every policy; the share of it a policy reaches before the binding SLO breaks is what the policy buys.
    """
    units = _calibrated_units(result, "mix_rps_per_gpu", "utilisation_at_capacity")
    if units is None:
        return ""
    best = units.sort_values(["model", "mix_rps_per_gpu", "sku", "tp_degree"], ascending=[True, False, True, True],
                             kind="stable").drop_duplicates("model")
    return "; ".join(f"{r.model} {r.sku} TP{int(r.tp_degree)} {r.mix_rps_per_gpu:.3g} req/s/GPU at "
                     f"{100 * r.utilisation_at_capacity:.0f} % of ceiling" for r in best.itertuples())


def parse_policies(text: str) -> list[str]:
    """``fcfs,cmu,wspt,drr-wspt`` -> the names, each checked against the policy registry, in order, no repeats."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    if not names:
        raise InputError("no policy given", where="--compare-policies", fix="pass e.g. fcfs,cmu,wspt,drr-wspt")
    for name in names:
        get_policy(name)  # raises InputError naming the known policies
    return list(dict.fromkeys(names))


def compare_policies(scenario: Scenario, forecast: pd.DataFrame, catalog: Catalog, profiles: pd.DataFrame,
                     settings: LoopSettings, policies: list[str], *, histogram: pd.DataFrame | None = None,
                     known: dict[str, LoopResult] | None = None, notify: Notify | None = None,
                     planning_window: PlanningWindow | None = None,
                     store: CalibrationStore | None = None,
                     calibrations: dict[str, CalibrationResult] | None = None) -> list[PolicyOutcome]:
    """Run the loop for each policy (re-using ``known`` results, e.g. the scenario policy's own run, and the
    policies' ``calibrations`` already made, :func:`planner.loop.run.calibrate_policies`).

    Every policy plans the same hours: the scenario's horizon, or ``planning_window`` when given.
    """
    outcomes = []
    placements: dict[str, PlacementResult] = {}
    for earlier in (known or {}).values():
        placements[capacity_key(earlier.capacity)] = earlier.placement
    for policy in policies:
        result = (known or {}).get(policy)
        if result is None:
            result = run_loop(scenario, forecast, catalog, profiles, settings, policy=policy, histogram=histogram,
                              notify=notify, placements=placements,
                              planning_window=planning_window, store=store,
                              calibration=(calibrations or {}).get(policy))
        outcomes.append(PolicyOutcome(policy, result))
    return outcomes


def comparison_table(outcomes: list[PolicyOutcome]) -> pd.DataFrame:
    """policy, gpus, usd, slo_met, rounds, binding, capacity, still_failing: one row per policy, in the order asked."""
    return pd.DataFrame([o.row() for o in outcomes],
                        columns=["policy", "gpus", "usd", "slo_met", "rounds", "binding", "capacity", "still_failing"])

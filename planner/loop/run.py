"""The two-timescale loop for one policy: calibrate, place, simulate every pool's windows, correct, re-solve.

Round r:

1. place the forecast with the current capacity table (``planner.placement``);
2. replay the plan in the simulator at the fleet peak and at every serving (region, model)
   pool's own peak and trough (``windows``), each pool with its routed demand and the
   scenario's policy;
3. lower the missed (model, SKU, TP, class) coefficients by the measured shortfall
   (``derate``), and raise, one bounded step towards its calibrated value, each coefficient
   whose pools sit below half of every SLO in every window (``headroom``, which also backs
   off a raise that a later round finds missing);
4. if no class missed and nothing was raised, stop: converged and settled; otherwise go
   to round r + 1.

The loop stops after ``max_rounds`` rounds (not converged: the CLI exits 5 and names
what still fails), or earlier when a miss cannot be corrected (no coefficient of the
failing pool is in the table). A last round that misses after an earlier round met every
SLO (a raise went too far and no round was left to back it off) returns that earlier
round's plan. Every round is recorded: what failed and by how much, what changed in
either direction and why, the plan's cost and GPUs, and the solver's status.

The capacity table starts from the fast-loop calibration (``planner.calibrate``) for the
policy, unless one is given; its coefficients are the ceilings of every raise. The
forecast is computed once by the caller and shared by every policy, so a policy
comparison differs only in the policy.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pandas as pd

from planner.catalog import Catalog
from planner.forecast.model import ModelSpec
from planner.loop.derate import Miss, find_misses
from planner.loop.headroom import Headroom
from planner.loop.pool_sizes import loop_pool_sizes
from planner.loop.windows import Pool, loop_windows
from planner.pace import Remaining
from planner.placement.limits import DEFAULT_NODE_LIMIT, DEFAULT_TIME_LIMIT_S
from planner.placement.place import DEFAULT_GAP, DEFAULT_PERIODS, place_plan
from planner.placement.result import PlacementResult
from planner.placement.window import PlanningWindow
from planner.scenario import Scenario
from planner.sim.simulate import simulate_plan
from planner.workloads import forecast_mixes

if TYPE_CHECKING:
    from planner.calibrate import CalibrationPlan
    from planner.calibrate.cache import CalibrationStore
    from planner.calibrate.table import CalibrationResult

Notify = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class LoopSettings:
    """How hard each step works. Defaults suit a monthly run of a scenario like the demo on two cores.

    ``seed`` has no default: it is resolved once, at the front door (:mod:`planner.settings`).
    """

    max_rounds: int = 4
    periods: str = DEFAULT_PERIODS
    solver: str = "highs"
    node_limit: int = DEFAULT_NODE_LIMIT
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    gap: float = DEFAULT_GAP
    quantile: float | None = None
    sim_duration_s: float = 1800.0
    sim_replications: int = 3
    seed: int
    engine: str = "auto"
    workers: int | None = None
    scheduler: str | None = None
    search_settings: bool = True
    pools: bool = True
    """Calibrate every unit at the pool sizes the forecast can need (``pool_sizes.py``); False: one replica only."""
    min_history_hours: int = ModelSpec.min_history_hours
    max_growth: float = ModelSpec.max_growth
    """Every forecast value at most this multiple of its series' peak (:mod:`planner.forecast.growth`)."""
    commit_on_short_history: bool = False
    """Reserve beyond the history's steady load even when the history is short for the term."""
    reserved_evidence: dict[str, Any] | None = None
    """What the history offers a commitment (:func:`planner.placement.reserved.history_evidence`); None: not read."""
    partial_hours: str = ModelSpec.partial_hours
    """Partly collected history hours: ``mask`` (not learned as demand) or ``keep`` (``planner.forecast.quality``)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LoopResult:
    """The outcome of the loop for one policy."""

    policy: str
    capacity: pd.DataFrame
    placement: PlacementResult
    slo: pd.DataFrame
    rounds: list[dict[str, Any]]
    converged: bool
    misses: list[Miss]
    calibration: Any = None
    simulation_meta: list[dict[str, Any]] = field(default_factory=list)
    plan_round: int = 0
    """The round whose plan this is (an earlier one than the last when the last missed after a raise)."""

    @property
    def cost_usd(self) -> float:
        return float(self.placement.meta.get("cost_usd", {}).get("total", float(self.placement.plan["usd"].sum())))

    @property
    def gpus_peak(self) -> int:
        return peak_gpus(self.placement.plan)

    @property
    def warnings(self) -> list[str]:
        """The placement warnings of every round (e.g. a search the wall-clock safety net cut short)."""
        return list(dict.fromkeys(w for r in self.rounds for w in r.get("warnings", [])))


def peak_gpus(plan: pd.DataFrame) -> int:
    """The most GPUs the plan runs in any one period."""
    if plan.empty:
        return 0
    return int(plan.groupby(plan["period"].astype(str))["gpus"].sum().max())


def capacity_key(table: pd.DataFrame) -> str:
    """The capacity coefficients that placement reads, as a hash."""
    columns = ["model", "sku", "tp_degree", "traffic_class", *(["pool_replicas"] if "pool_replicas" in table else []),
               "max_rps_per_replica", "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold"]
    text = table[columns].sort_values(columns[:-4]).to_csv(index=False, lineterminator="\n")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _pool_units(plan: pd.DataFrame, period: str) -> dict[tuple[str, str], tuple[tuple[str, int], ...]]:
    """(SKU, TP) of every deployment in each (region, model) pool of one period."""
    rows = plan[(plan["period"].astype(str) == period) & (plan["replicas"] > 0)]
    return {(str(r), str(m)): tuple(sorted({(str(s), int(t)) for s, t in zip(group["sku"], group["tp_degree"],
                                                                              strict=True)}))
            for (r, m), group in rows.groupby(["region", "model"], sort=True)}


def _describe_change(change: dict[str, Any]) -> str:
    pool = int(change.get("pool_replicas", 1))
    return (f"{change.get('kind', 'derate')} {change['model']}/{change['tp_degree']} x {change['sku']}/"
            f"{change['traffic_class']}{f' in pools of {pool}' if pool > 1 else ''} {change['before_rps']:g} -> "
            f"{change['after_rps']:g}")


def _round_record(number: int, placement: PlacementResult, misses: list[Miss], changes: list[dict[str, Any]],
                  windows: list[str], seconds: float) -> dict[str, Any]:
    worst = max((m.shortfall for m in misses), default=None)
    meta = placement.meta
    return {
        "round": number,
        "failed": len(misses),
        "shortfall": None if worst is None else (round(worst, 4) if worst != float("inf") else "rejections"),
        "change": "; ".join(_describe_change(c) for c in changes)
                  or ("none: every SLO met, nothing to raise" if not misses else "none possible"),
        "raised": sum(c.get("kind") == "raise" for c in changes),
        "cost_usd": round(float(meta.get("cost_usd", {}).get("total", 0.0)), 2),
        "gpus_peak": peak_gpus(placement.plan),
        "placement_status": meta.get("status"),
        "placement_gap": meta.get("gap"),
        "warnings": list(meta.get("warnings", [])),
        "windows": windows,
        "misses": [m.to_dict() for m in misses],
        "changes": changes,
        "seconds": round(seconds, 1),
    }


@dataclass
class _Inputs:
    """What every round of one policy's loop reads."""

    scenario: Scenario
    forecast: pd.DataFrame
    catalog: Catalog
    profiles: pd.DataFrame
    settings: LoopSettings
    policy: str
    histogram: pd.DataFrame | None
    input_hashes: dict[str, str] | None
    planning_window: PlanningWindow | None
    say: Notify

    @cached_property
    def mixes(self) -> dict[str, dict[str, float]]:
        """Each model's class mix in the forecast (:func:`planner.workloads.forecast_mixes`): what it is calibrated
        and simulated with."""
        return forecast_mixes(self.forecast, self.scenario.model_names, self.scenario.class_names)

    @cached_property
    def pool_sizes_for(self) -> Callable[[str, float], tuple[int, ...]] | None:
        """Each unit's larger pool sizes to calibrate (:mod:`planner.loop.pool_sizes`); None: one replica only."""
        return loop_pool_sizes(self.scenario, self.forecast, self.settings, self.planning_window)


@dataclass
class _Simulated:
    """One round's simulation of a plan's windows: per-class results, run metadata and the SLO misses."""

    slo: pd.DataFrame
    meta: list[dict[str, Any]]
    misses: list[Miss]
    windows: list[str]
    pool_units: dict[Pool, set[tuple[str, int]]]


def _place(run: _Inputs, table: pd.DataFrame, number: int,
           placements: dict[str, PlacementResult] | None) -> PlacementResult:
    """The plan for ``table``: a plan already placed with the same capacity table, or a new solve."""
    key = capacity_key(table)
    known = placements.get(key) if placements is not None else None
    if known is not None:
        run.say(f"{run.policy}: round {number}, same capacity table as an earlier policy: same plan")
        return known
    settings = run.settings
    placement = place_plan(run.scenario, run.forecast, run.catalog, run.profiles, capacity=table,
                           solver=settings.solver, node_limit=settings.node_limit,
                           time_limit_s=settings.time_limit_s, gap=settings.gap, quantile=settings.quantile,
                           periods=settings.periods, input_hashes=run.input_hashes, window=run.planning_window,
                           reserved_evidence=settings.reserved_evidence)
    if placements is not None:
        placements[key] = placement
    return placement


def _simulate(run: _Inputs, placement: PlacementResult, number: int) -> _Simulated:
    """Replay the plan at the fleet peak and every pool's own peak and trough; collect the SLO misses."""
    settings = run.settings
    frames, meta, misses = [], [], []
    pool_units: dict[Pool, set[tuple[str, int]]] = {}
    windows = loop_windows(placement.plan, placement.flows)
    for window in windows:
        run.say(f"{run.policy}: round {number}, simulating the {window.describe()}")
        plan = window.rows_of(placement.plan)
        result = simulate_plan(run.scenario, plan, window.demand, run.profiles, run.catalog,
                               policy=run.policy, duration_s=settings.sim_duration_s,
                               replications=settings.sim_replications, seed=settings.seed,
                               histogram=run.histogram, period=window.period, engine=settings.engine,
                               workers=settings.workers, scheduler=settings.scheduler, mixes=run.mixes)
        per_class = result.per_class
        labels = [window.label(str(r), str(m)) for r, m in zip(per_class["region"], per_class["model"], strict=True)]
        per_class = per_class.assign(window=labels, period=window.period)
        frames.append(per_class)
        meta.append({"window": window.name, **result.meta})
        units = _pool_units(plan, window.period)
        misses += find_misses(per_class, window.name, window.period, units)
        for pool, deployed in units.items():
            pool_units.setdefault(pool, set()).update(deployed)
    slo = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return _Simulated(slo, meta, misses, [w.describe() for w in windows], pool_units)


def _calibration_plan(run: _Inputs) -> CalibrationPlan:
    """The fast-loop calibration of the run's policy, checked and ready to run."""
    from planner.calibrate import plan_calibration

    settings = run.settings
    return plan_calibration(run.scenario, run.profiles, policy=run.policy, histogram=run.histogram, mixes=run.mixes,
                            seed=settings.seed, pool_sizes_for=run.pool_sizes_for,
                            search_settings=settings.search_settings, engine=settings.engine,
                            workers=settings.workers)


def _calibrated(runs: list[_Inputs], store: CalibrationStore | None) -> list[CalibrationResult]:
    """The fast-loop calibration of each run's policy, as one stream of engine tasks
    (:func:`planner.calibrate.calibrate_together`)."""
    from planner.calibrate import calibrate_together

    settings, say = runs[0].settings, runs[0].say
    names = ", ".join(run.policy for run in runs)
    say(f"calibrating capacity for {names}")
    units, pools = Remaining(), Remaining()
    return calibrate_together([_calibration_plan(run) for run in runs], engine=settings.engine,
                              workers=settings.workers, scheduler=settings.scheduler, store=store,
                              progress=lambda done, total: say(
                                  f"calibrating capacity for {names}: {units.text(done, total, 'units')}"),
                              pool_progress=lambda done, total: say(
                                  f"calibrating capacity for {names} in larger pools: "
                                  f"{pools.text(done, total, 'units')}"))


def calibrate_policies(scenario: Scenario, forecast: pd.DataFrame, catalog: Catalog, profiles: pd.DataFrame,
                       settings: LoopSettings, policies: list[str], *, histogram: pd.DataFrame | None = None,
                       notify: Notify | None = None, planning_window: PlanningWindow | None = None,
                       store: CalibrationStore | None = None) -> dict[str, CalibrationResult]:
    """Each policy's fast-loop calibration, exactly as :func:`run_loop` makes it, all run at once so that a policy
    comparison's cores stay busy from its first unit to its last; pass each to :func:`run_loop`."""
    runs = [_Inputs(scenario, forecast, catalog, profiles, settings, policy, histogram, None, planning_window,
                    notify or (lambda _text: None)) for policy in dict.fromkeys(policies)]
    return {run.policy: result for run, result in zip(runs, _calibrated(runs, store), strict=True)}


def run_loop(scenario: Scenario, forecast: pd.DataFrame, catalog: Catalog, profiles: pd.DataFrame,
             settings: LoopSettings, *, policy: str | None = None, capacity: pd.DataFrame | None = None,
             histogram: pd.DataFrame | None = None, input_hashes: dict[str, str] | None = None,
             notify: Notify | None = None, placements: dict[str, PlacementResult] | None = None,
             planning_window: PlanningWindow | None = None, store: CalibrationStore | None = None,
             calibration: CalibrationResult | None = None) -> LoopResult:
    """Run the loop for ``policy`` (default: the scenario's); see the module docstring.

    Every plan covers the scenario's horizon, or exactly ``planning_window``'s hours when given.

    ``placements`` memoises plans by the capacity table they were placed with (a policy
    comparison passes one dict to every policy): placement depends on the policy only
    through that table, so two policies whose calibrations agree share one solve, and
    each is still simulated under its own policy. ``store`` is the calibration cache
    (:func:`planner.calibrate.calibrate`); ``calibration``, the policy's calibration already made
    (:func:`calibrate_policies`), is used instead of calibrating again.
    """
    if settings.max_rounds < 1:
        raise ValueError(f"the loop needs at least one round, got max_rounds={settings.max_rounds}")
    run = _Inputs(scenario, forecast, catalog, profiles, settings, policy or scenario.policy.name, histogram,
                  input_hashes, planning_window, notify or (lambda _text: None))
    if capacity is not None:
        calibration = None
    else:
        calibration = calibration if calibration is not None else _calibrated([run], store)[0]
        capacity = calibration.table
    table = capacity.copy()
    headroom = Headroom.of(table)
    rounds: list[dict[str, Any]] = []
    met: tuple[int, pd.DataFrame, PlacementResult, _Simulated] | None = None  # the last round that met every SLO
    for number in range(1, settings.max_rounds + 1):
        began = time.perf_counter()
        run.say(f"{run.policy}: round {number}, placing")
        placed_with = table
        placement = _place(run, table, number, placements)
        simulated = _simulate(run, placement, number)
        changes: list[dict[str, Any]] = []
        if number < settings.max_rounds:
            table, changes = headroom.adjust(table, simulated.misses, simulated.slo, simulated.pool_units)
        rounds.append(_round_record(number, placement, simulated.misses, changes, simulated.windows,
                                    time.perf_counter() - began))
        if not simulated.misses:
            met = (number, placed_with, placement, simulated)
        if not changes:
            break
    number, table = len(rounds), placed_with
    if simulated.misses and met is not None:
        number, table, placement, simulated = met
        run.say(f"{run.policy}: the last round missed after a raise; keeping round {number}'s plan")
    return LoopResult(run.policy, table, placement, simulated.slo, rounds, not simulated.misses, simulated.misses,
                      calibration, simulated.meta, plan_round=number)

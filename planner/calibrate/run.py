"""``calibrate``: the fast loop's capacity coefficients, one simulated search per (model, SKU, TP, engine).

Order of work: check every input (nothing is simulated before the inputs are known to be
good); build one :class:`~planner.calibrate.inputs.UnitTask` per unit the scenario allows
and the profile table has, with its cache key; answer each unit from the cache (the
caller's ``store``) when an entry for its key exists; fan the rest out through
:func:`planner.engine.run_tasks` (one task per unit), each unit's larger pools as a task of their
own that starts as soon as the unit's answer arrives (:class:`_Answers`); store the new answers
in the cache; build the table and its metadata. Every task's answer depends on its inputs only,
so neither the engine nor the order in which tasks finish changes an output.

Defaults: at least ten simulated minutes per replication (``DEFAULT_DURATION_S``), with the
first 10 % as warm-up like ``planner simulate``, and ``DEFAULT_REPLICATIONS`` = 8
replications per probed rate. What gives a p99 its power is the number of requests, and the
run is lengthened until the rarest class has ``min_class_requests`` of them
(:func:`planner.calibrate.probe.run_length_s`); a longer floor (an hour, the planning period)
only adds requests at high rates, where a fast replica then simulates hundreds of thousands of
requests per replication for the same verdict.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from planner import __version__
from planner.calibrate.cache import CalibrationStore, cache_key
from planner.calibrate.fingerprint import CALIBRATION_VERSION
from planner.calibrate.inputs import (
    LONG_PREFILL_TOKEN_THRESHOLDS,
    MAX_NUM_BATCHED_TOKENS,
    MAX_NUM_SEQS,
    MixSource,
    Settings,
    UnitTask,
    build_unit_tasks,
    check_settings,
    model_mixes,
    select_units,
)
from planner.calibrate.pools import (
    PoolTask,
    calibrate_pools,
    check_pool_sizes,
    check_pool_work,
    pool_key,
    runnable_sizes,
)
from planner.calibrate.probe import pair_seed, run_length_s
from planner.calibrate.probe_memo import ProbeStore
from planner.calibrate.search import FLOOR_FRACTION, GROWTH, MAX_GROWTHS
from planner.calibrate.table import CalibrationResult, build_table, chosen_replica, unit_meta, unit_rows
from planner.calibrate.unit import CEILING_MARGIN, calibrate_unit
from planner.engine import resolve_engine, run_tasks
from planner.errors import InputError
from planner.scenario import Scenario
from planner.sim.policies import get_policy, policy_values
from planner.sim.simulate import WARMUP_FRACTION
from planner.sim.work import PoolWork, check_work
from planner.slo import SLO_METRICS
from planner.workloads import Workload, default_notes, resolve_workloads, reuse_notes

DEFAULT_DURATION_S = 600.0
DEFAULT_REPLICATIONS = 8


def _policy_name(scenario: Scenario, policy: str | None) -> str:
    name = scenario.policy.name if policy is None else policy
    try:
        return get_policy(name).name
    except InputError as exc:
        raise InputError(exc.message, where="--policy", fix=exc.fix) from exc


def calibrate(
    scenario: Scenario,
    profiles: pd.DataFrame,
    *,
    policy: str | None = None,
    class_mix: dict[str, float] | None = None,
    mixes: Mapping[str, Mapping[str, float]] | None = None,
    histogram: pd.DataFrame | None = None,
    models: list[str] | None = None,
    skus: list[str] | None = None,
    pool_replicas: int = 1,
    larger_pools: Sequence[int] = (),
    pool_sizes_for: Callable[[str, float], Sequence[int]] | None = None,
    duration_s: float = DEFAULT_DURATION_S,
    replications: int = DEFAULT_REPLICATIONS,
    seed: int,
    rel_tol: float = 0.02,
    confidence: float = 0.95,
    engine: str = "auto",
    workers: int | None = None,
    scheduler: str | None = None,
    store: CalibrationStore | None = None,
    progress: Callable[[int, int], None] | None = None,
    pool_progress: Callable[[int, int], None] | None = None,
    search_settings: bool = True,
    prune: bool = True,
) -> CalibrationResult:
    """Per (model, SKU, TP, engine) the scenario may deploy: the engine setting and the highest request
    rate per replica at which every class's p99 SLOs hold.

    See the package docstring for the method; the table feeds ``planner place --capacity``.
    ``larger_pools`` (sizes above ``pool_replicas``) are calibrated with each unit's chosen setting
    (:mod:`planner.calibrate.pools`) and tabulated beside it; ``pool_sizes_for(model, rate)`` instead gives each
    unit its own larger sizes from its rate at ``pool_replicas`` (sizes the simulator cannot run are left out, and
    the unit's meta says so). ``search_settings`` tries the engine
    settings of :data:`planner.calibrate.inputs.MAX_NUM_SEQS` × ``MAX_NUM_BATCHED_TOKENS`` (else only each
    profile's defaults); ``prune`` skips the settings that cannot beat the best one
    (:mod:`planner.calibrate.unit`). ``store`` answers units calibrated before and keeps the new answers;
    without one every unit is simulated. ``progress(done, total)`` follows the units, ``pool_progress`` the units'
    larger pools.
    """
    plan = plan_calibration(scenario, profiles, policy=policy, class_mix=class_mix, mixes=mixes, histogram=histogram,
                            models=models, skus=skus, pool_replicas=pool_replicas, larger_pools=larger_pools,
                            pool_sizes_for=pool_sizes_for, duration_s=duration_s, replications=replications,
                            seed=seed, rel_tol=rel_tol, confidence=confidence, search_settings=search_settings,
                            prune=prune, engine=engine, workers=workers)
    return calibrate_together([plan], engine=engine, workers=workers, scheduler=scheduler, store=store,
                              progress=progress, pool_progress=pool_progress)[0]


@dataclass(frozen=True)
class CalibrationPlan:
    """One calibration, checked and ready to run: its unit tasks (with their cache keys) and what its table and
    metadata need (:func:`plan_calibration`)."""

    scenario: Scenario
    settings: Settings
    tasks: list[UnitTask]
    shares: dict[str, MixSource]
    workloads: dict[tuple[str, str], Workload]
    skipped: list[dict[str, str]]
    histogram: bool
    larger: tuple[int, ...]
    pool_replicas: int
    pool_sizes_for: Callable[[str, float], Sequence[int]] | None

    def larger_sizes(self, task: UnitTask, result: dict[str, Any]) -> tuple[int, ...]:
        return _larger_sizes(task, result, self.larger, self.pool_replicas, self.pool_sizes_for)


def plan_calibration(scenario: Scenario, profiles: pd.DataFrame, *, policy: str | None = None,
                     class_mix: dict[str, float] | None = None, mixes: Mapping[str, Mapping[str, float]] | None = None,
                     histogram: pd.DataFrame | None = None, models: list[str] | None = None,
                     skus: list[str] | None = None, pool_replicas: int = 1, larger_pools: Sequence[int] = (),
                     pool_sizes_for: Callable[[str, float], Sequence[int]] | None = None,
                     duration_s: float = DEFAULT_DURATION_S, replications: int = DEFAULT_REPLICATIONS, seed: int,
                     rel_tol: float = 0.02, confidence: float = 0.95, search_settings: bool = True,
                     prune: bool = True, engine: str = "auto", workers: int | None = None) -> CalibrationPlan:
    """Check :func:`calibrate`'s inputs (nothing is simulated before all are known to be good) and build its unit
    tasks; :func:`calibrate_together` runs them."""
    check_settings(duration_s=duration_s, replications=replications, seed=seed, rel_tol=rel_tol,
                   confidence=confidence, pool_replicas=pool_replicas)
    larger = check_pool_sizes((pool_replicas, *larger_pools))[1:] if larger_pools else ()
    resolve_engine(engine, 1, workers)
    policy_name = _policy_name(scenario, policy)
    shares = model_mixes(scenario, class_mix, mixes)
    units, skipped = select_units(scenario, profiles, models, skus)
    calibrated = list(dict.fromkeys(units["model"].astype(str)))
    workloads = resolve_workloads(scenario, {m: shares[m][0] for m in calibrated}, histogram=histogram,
                                  include_idle=True)
    params, admission = scenario.policy.params, scenario.policy.admission
    settings = Settings(
        duration_s=float(duration_s), warmup_fraction=WARMUP_FRACTION, replications=replications,
        seed=seed, rel_tol=float(rel_tol), confidence=float(confidence), pool_replicas=pool_replicas,
        policy=policy_name, prediction_sigma=params.prediction_noise_sigma,
        policy_params=tuple(policy_values(params.model_dump()).items()), kv_fraction=admission.kv_fraction,
        output_quantile_reserve=admission.output_quantile_reserve, search_settings=search_settings, prune=prune,
        router=scenario.policy.routing.router, router_overlap_weight=scenario.policy.routing.overlap_weight)
    tasks = build_unit_tasks(scenario, units, workloads, settings)
    check_unit_work(tasks)
    for task in tasks:
        for replica in task.candidates:
            check_pool_work(task, replica, larger)
    return CalibrationPlan(scenario, settings, [replace(t, key=cache_key(t)) for t in tasks],
                           {m: shares[m] for m in calibrated}, dict(workloads), skipped, histogram is not None,
                           larger, pool_replicas, pool_sizes_for)


def calibrate_together(plans: Sequence[CalibrationPlan], *, engine: str = "auto", workers: int | None = None,
                       scheduler: str | None = None, store: CalibrationStore | None = None,
                       progress: Callable[[int, int], None] | None = None,
                       pool_progress: Callable[[int, int], None] | None = None) -> list[CalibrationResult]:
    """Each plan's :func:`calibrate` result, their units and pools run as one stream of engine tasks
    (:class:`_Answers`): a policy comparison's calibrations keep every core busy until the last task, where one
    after the other each would end on its slowest unit. ``progress`` and ``pool_progress`` count over all plans."""
    tasks = [task for plan in plans for task in plan.tasks]
    sizes_of = [plan.larger_sizes for plan in plans for _ in plan.tasks]
    answers = _Answers(tasks, store, sizes_of, progress, pool_progress)
    answers.run(engine, workers, scheduler)
    results, first = [], 0
    for plan in plans:
        part = slice(first, first + len(plan.tasks))
        first = part.stop
        notes = [note for i, _, note in sorted(answers.notes) if part.start <= i < part.stop]
        results.append(_result(plan, answers.units[part], answers.cached[part], answers.pools[part],
                               answers.sizes[part], notes, store is not None))
    return results


def _result(plan: CalibrationPlan, units: list[dict[str, Any] | None], cached: list[bool],
            pools: list[dict[str, Any] | None], sizes: list[tuple[int, ...]], notes: list[str],
            use_cache: bool) -> CalibrationResult:
    """One plan's table and metadata from its units' and pools' answers."""
    results = [r for r in units if r is not None]
    n_cached, n_simulated = sum(cached), sum(not hit for hit in cached)
    rows, unit_notes, failures = _tabulated(plan.tasks, results, cached, pools)
    measured = plan.larger if plan.pool_sizes_for is None else tuple(sorted({n for unit in sizes for n in unit}))
    meta = _meta(plan.scenario, plan.settings, plan.shares, plan.workloads, plan.histogram, unit_notes, plan.skipped,
                 failures, use_cache, notes, n_simulated, n_cached, measured)
    return CalibrationResult(build_table(rows), meta, failures, n_simulated, n_cached, tuple(plan.tasks))


def _tabulated(tasks: list[UnitTask], results: list[dict[str, Any]], cached: list[bool],
               pools: list[dict[str, Any] | None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                           list[dict[str, Any]]]:
    """The table rows, the per-unit meta and the failures of the answered units."""
    rows: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    unit_notes = []
    for task, result, hit, pool in zip(tasks, results, cached, pools, strict=True):
        rows.extend(unit_rows(task, result, hit, pool))
        unit_notes.append(unit_meta(task, result, hit, pool))
        if result["status"] == "infeasible":
            failures.append({"model": task.model, "sku": task.sku, "tp_degree": task.tp, "reason": result["reason"]})
    return rows, unit_notes, failures


def calibrate_task(task: UnitTask | PoolTask, memo: ProbeStore | None = None) -> dict[str, Any]:
    """A unit's search (:func:`calibrate_unit`) or its larger pools' (:func:`calibrate_pools`): what one engine
    task of :class:`_Answers` runs."""
    if isinstance(task, PoolTask):
        return calibrate_pools(task, memo)
    return calibrate_unit(task, memo)


class _Answers:
    """Each unit's answer and its larger pools', from the store where it has them, else simulated.

    Both stages run as one stream of engine tasks: a unit's pool task needs only that unit's answer, so it starts
    as soon as the answer arrives (:func:`planner.engine.run_tasks`'s ``follow``), beside the units still running,
    and no core waits for the slowest unit of the stage. Every task's answer is a function of its own inputs, so
    the answers are the ones the two stages run one after the other give. Answers are stored as they arrive.
    """

    def __init__(self, tasks: list[UnitTask], store: CalibrationStore | None,
                 larger_sizes: Sequence[Callable[[UnitTask, dict[str, Any]], tuple[int, ...]]],
                 progress: Callable[[int, int], None] | None,
                 pool_progress: Callable[[int, int], None] | None) -> None:
        self.tasks, self.store, self.larger_sizes = tasks, store, larger_sizes
        self.progress, self.pool_progress = progress, pool_progress
        self.units: list[dict[str, Any] | None] = [store.get(t.key) if store is not None else None for t in tasks]
        self.cached = [r is not None for r in self.units]
        self.sizes: list[tuple[int, ...]] = [()] * len(tasks)
        self.pools: list[dict[str, Any] | None] = [None] * len(tasks)
        self.notes: list[tuple[int, int, str]] = []  # (unit, 0 for its answer or 1 for its pools', why not stored)
        self.owner: list[int] = []  # per engine task, the unit it answers
        self.pool_tasks: dict[int, PoolTask] = {}  # per unit with larger sizes, its pool task

    def run(self, engine: str, workers: int | None, scheduler: str | None) -> None:
        first: list[UnitTask | PoolTask] = []
        for i, unit in enumerate(self.units):
            if unit is None:
                first.append(self.tasks[i])
                self.owner.append(i)
        if self.progress and any(self.cached):
            self.progress(sum(self.cached), len(self.tasks))  # one report for the units answered at once
        for i, unit in enumerate(self.units):
            if unit is not None and (pool := self._pool_task(i)) is not None:
                first.append(pool)
                self.owner.append(i)
        self._report_pools()
        memo = self.store.probes if self.store is not None else None
        run_tasks(functools.partial(calibrate_task, memo=memo), first, engine=engine, workers=workers,
                  scheduler=scheduler, follow=self._arrived)

    def _arrived(self, index: int, result: dict[str, Any]) -> list[PoolTask]:
        """Keep engine task ``index``'s answer; a unit's answer calls for its pool task."""
        i = self.owner[index]
        if self.units[i] is not None:  # the answer of the unit's larger pools
            self.pools[i] = result
            self._keep(i, self.pool_tasks[i], result)
            self._report_pools()
            return []
        self.units[i] = result
        self._keep(i, self.tasks[i], result)
        if self.progress:
            self.progress(sum(r is not None for r in self.units), len(self.tasks))
        pool = self._pool_task(i)
        if self.sizes[i]:  # one more pool known (and perhaps answered from the store)
            self._report_pools()
        if pool is None:
            return []
        self.owner.append(i)
        return [pool]

    def _pool_task(self, i: int) -> PoolTask | None:
        """Unit i's pool task when its larger pools still need simulating; their answer when the store has it."""
        unit = self.units[i]
        assert unit is not None
        self.sizes[i] = self.larger_sizes[i](self.tasks[i], unit)
        if not self.sizes[i]:
            return None
        pool = PoolTask(self.tasks[i], chosen_replica(self.tasks[i], unit), float(unit["rate_rps_per_replica"]),
                        self.sizes[i])
        pool = replace(pool, key=pool_key(pool))
        self.pool_tasks[i] = pool
        stored = self.store.get(pool.key) if self.store is not None else None
        if stored is None:
            return pool
        self.pools[i] = stored
        return None

    def _keep(self, i: int, task: UnitTask | PoolTask, result: dict[str, Any]) -> None:
        if self.store is not None and (note := self.store.put(task, result)):
            self.notes.append((i, int(isinstance(task, PoolTask)), note))

    def _report_pools(self) -> None:
        """Pools answered of the pools known so far; none when no unit has larger pools (yet)."""
        if self.pool_progress and self.pool_tasks:
            self.pool_progress(sum(p is not None for p in self.pools), len(self.pool_tasks))


def _larger_sizes(task: UnitTask, result: dict[str, Any], larger: tuple[int, ...], pool_replicas: int,
                  pool_sizes_for: Callable[[str, float], Sequence[int]] | None) -> tuple[int, ...]:
    """The unit's pool sizes above ``pool_replicas`` to calibrate: ``larger``, or those ``pool_sizes_for`` gives
    from the unit's rate that the simulator can run (none for an infeasible unit)."""
    rate = float(result["rate_rps_per_replica"]) if result["status"] != "infeasible" else 0.0
    if rate <= 0:
        return ()
    if pool_sizes_for is None:
        return larger
    wanted = tuple(sorted({int(n) for n in pool_sizes_for(task.model, rate) if int(n) > pool_replicas}))
    return runnable_sizes(task, chosen_replica(task, result), wanted)


def check_unit_work(tasks: list[UnitTask]) -> None:
    """Refuse a calibration whose pool is too big to simulate (:mod:`planner.sim.work`), before any probe.

    The estimate is one probe at a setting's analytic ceiling: N replicas x the mix's ceiling in
    req/s x the run length D at that rate, per replication; the search probes a handful of rates
    around it, each at the same order of work.
    """
    for task in tasks:
        for replica in task.candidates:
            ceiling = task.mix_ceiling_rps(replica)
            pool = PoolWork(task.label, replica.count * replica.max_batch, ceiling * replica.count)
            duration = run_length_s(task, replica, ceiling) if ceiling > 0 else task.settings.duration_s
            check_work([pool], duration_s=duration, replications=task.settings.replications,
                       size_where="--pool-replicas", size_fix="lower --pool-replicas", rate_where="--pool-replicas",
                       rate_fix="lower --pool-replicas (the pool's rate grows with its replicas)")


def _meta(scenario: Scenario, s: Settings, shares: Mapping[str, MixSource],
          workloads: Mapping[tuple[str, str], Workload], histogram: bool, units: list[dict[str, Any]],
          skipped: list[dict[str, str]],
          failures: list[dict[str, Any]], use_cache: bool, cache_notes: list[str], n_simulated: int,
          n_cached: int, larger: tuple[int, ...]) -> dict[str, Any]:
    return {
        "scenario": scenario.name, "version": __version__, "calibration_version": CALIBRATION_VERSION,
        "policy": s.policy,
        "class_mix": {m: {k: p for k, p in mix.items() if p > 0} for m, (mix, _) in shares.items()},
        "class_mix_source": {m: source for m, (_, source) in shares.items()},
        "length_source": "ingest histogram" if histogram else "scenario declarations or built-in laws",
        "workloads": [w.describe() for w in workloads.values() if w.share > 0],
        "no_traffic": [{"model": m, "traffic_class": k} for m, (mix, _) in shares.items() for k, p in mix.items()
                       if p <= 0],
        "length_defaults": default_notes(workloads),
        "reuse_fits": reuse_notes(workloads),
        "pool_replicas": s.pool_replicas, "pool_sizes": [s.pool_replicas, *larger],
        **({"pool_law": "per-replica capacity at each pool size: the running minimum from the right of the answers "
                        "measured at that size and every larger one (non-decreasing, never above a measured answer); "
                        "a pool between two sizes takes the smaller size's; see planner/calibrate/pools.py"}
           if larger else {}),
        "duration_s": s.duration_s, "warmup_fraction": s.warmup_fraction,
        "min_class_requests": s.min_class_requests, "max_requests_per_replication": s.max_requests,
        "replications": s.replications, "seed": s.seed,
        "seeds": {"rule": "SeedSequence(seed, spawn_key=(crc32(model), crc32(sku), replication)): every TP degree "
                          "and engine setting of a (model, SKU) sees the same requests",
                  "pairs": {f"{p['model']}/{p['sku']}": list(pair_seed(s.seed, p["model"], p["sku"]).spawn_key)
                            for p in units}},
        "confidence": s.confidence, "rel_tol": s.rel_tol,
        "predicate": (f"for every class with share > 0 and every metric in ({', '.join(SLO_METRICS)}) whose SLO it "
                      f"sets for the model: mean + t-quantile half-width ({100 * s.confidence:g} % two-sided "
                      "interval over replications) of the p99, rejections at +inf, <= that SLO"),
        "search": {"method": "bisection with common random numbers", "floor_fraction_of_ceiling": FLOOR_FRACTION,
                   "growth": GROWTH, "max_growths": MAX_GROWTHS,
                   "stop": "hi - lo <= rel_tol * hi; answer = lo (highest rate verified to meet every SLO)"},
        "engine_settings": {"searched": s.search_settings, "pruned": s.prune, "max_num_seqs": list(MAX_NUM_SEQS),
                            "max_num_batched_tokens": list(MAX_NUM_BATCHED_TOKENS),
                            "long_prefill_token_threshold": list(LONG_PREFILL_TOKEN_THRESHOLDS),
                            "ceiling_margin": CEILING_MARGIN,
                            "rule": "the setting with the highest calibrated rate; see planner/calibrate/unit.py"},
        "router": s.router, "kv_fraction": s.kv_fraction,
        "output_quantile_reserve": s.output_quantile_reserve, "prediction_noise_sigma": s.prediction_sigma,
        **dict(s.policy_params),
        "cache": {"used": use_cache, "units_cached": n_cached, "units_simulated": n_simulated,
                  "notes": cache_notes},
        "units": units, "skipped_pairs": skipped, "failures": failures,
    }

r"""Per-replica capacity as the pool grows: a calibrated unit simulated again at larger pool sizes.

A request that arrives at a pool of N replicas waits for the first of N to have room, not for
one, and the router spreads long prompts: at the same load per replica a larger pool meets a
p99 SLO with more to spare, so it carries more per replica at the SLO (the economy of scale of
queueing theory: for M/M/N, Erlang C's waiting probability falls with N at fixed utilisation).
A capacity table calibrated on one replica undercounts every fleet-sized pool.

**What is measured.** The unit's search (:mod:`.unit`) chooses its engine setting and λ*(N₀) at
its own pool size N₀ (``--pool-replicas``, default 1). For each larger size N₁ < N₂ < … of the
list, with the same setting, policy, router, predicate, replications and common random
numbers (:mod:`.probe`), the search (:func:`.search.bisect_capacity`) runs on a pool of N_j
replicas, its bracket starting from the next smaller size's answer λ*(N_{j−1}), assumed to hold
and probed only if no rate above it holds (:mod:`.search`), so each larger pool costs the few
probes between that rate and the analytic ceiling. When it is probed and misses (sampling noise,
or a router that does worse with more replicas), the search runs from the floor up to that rate.

**The table's law.** Let m(N) be the measured answers. The tabulated capacity is the running
minimum from the right,

    c(N_j) = min_{i ≥ j} m(N_i),

non-decreasing in N, and never above the answer measured at N_j or at any larger size: a pool
that can grow never gets a capacity a larger pool failed to verify. Between measured sizes a
pool of x replicas takes c(N_j) for the largest N_j ≤ x, and beyond the largest measured size
c(N_last) (``planner.placement``): never above a measured point.

**Cost.** A pool's probe simulates N replicas, but calibration's run length (:mod:`.probe`)
fixes the requests of the rarest class, not the time, so until N·λ·``duration_s`` passes that
count a larger pool's probe draws about as many requests as the lone replica's; beyond, it
grows with N. The sizes a plan calibrates stop at the largest pool it can need, and the
measurements stop where the pool has saturated: once a size carries less than ``SATURATION``
(5 %) more per replica than the size before it, or the smaller size already runs within
``SATURATION`` of the replica's analytic ceiling, the larger sizes are not simulated, and pools
above the last measured size take its rate (the law above): capacity never falls as the pool
grows, so this can only undercount, by less than the gains left, which the measured sequence
shows shrinking (on the 70B question 41, 30, 9, 8, 3 % from 1 to 32 replicas).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from planner import __version__
from planner.calibrate.inputs import UnitTask
from planner.calibrate.probe import Probe, probe, run_length_s
from planner.calibrate.probe_memo import ProbeStore
from planner.calibrate.search import FLOOR_FRACTION, GROWTH, INFEASIBLE, MAX_GROWTHS, SearchOutcome, bisect_capacity
from planner.calibrate.unit import binding_bound, probe_record
from planner.errors import InputError
from planner.sim.replica.pool import ReplicaSpec
from planner.sim.work import MAX_BATCH_SLOTS_PER_POOL, PoolWork, check_work

POOL_SIZES_OPTION = "--pool-sizes"
POOL_STAGE_VERSION = 2
"""Raise when the pool search or its result's layout changes what a stored entry means."""
POOL_RESULT_FIELDS = {"model": str, "sku": str, "tp_degree": int, "engine": str, "key": str, "stage": str,
                      "lone_rate_rps_per_replica": float, "pools": list}


def parse_pool_sizes(text: str, where: str = POOL_SIZES_OPTION) -> tuple[int, ...]:
    """``"1,2,4,8"`` as (1, 2, 4, 8), checked by :func:`check_pool_sizes`."""
    parts = [p.strip() for p in text.split(",")]
    try:
        sizes = tuple(int(p) for p in parts if p)
    except ValueError:
        raise InputError(f"pool sizes must be whole numbers separated by commas, got {text!r}", where=where,
                         fix="e.g. --pool-sizes 1,2,4,8,16") from None
    return check_pool_sizes(sizes, where)


def check_pool_sizes(sizes: Sequence[int], where: str = POOL_SIZES_OPTION) -> tuple[int, ...]:
    """A non-empty, strictly increasing list of pool sizes >= 1 (the ceiling is checked per unit, by
    :func:`check_pool_work`)."""
    if not sizes:
        raise InputError("the list of pool sizes is empty", where=where, fix="e.g. --pool-sizes 1,2,4,8,16")
    if any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in sizes):
        raise InputError(f"pool sizes must be whole numbers >= 1, got {list(sizes)}", where=where,
                         fix="e.g. --pool-sizes 1,2,4,8,16")
    for a, b in zip(sizes, sizes[1:], strict=False):
        if b <= a:
            raise InputError(f"pool sizes must increase, got {b} after {a} in {list(sizes)}", where=where,
                             fix=f"list each size once, smallest first, e.g. {','.join(map(str, sorted(set(sizes))))}")
    return tuple(sizes)


@dataclass(frozen=True)
class PoolTask:
    """One calibrated unit at its larger pool sizes: the unit, its chosen engine setting, its answer at its own
    size and the sizes to measure (all larger); ``key`` is filled in by :func:`pool_key`."""

    unit: UnitTask
    replica: ReplicaSpec
    lone_rate_rps: float
    sizes: tuple[int, ...]
    key: str = ""

    @property
    def label(self) -> str:
        return f"{self.unit.label} in pools of {', '.join(map(str, self.sizes))}"


def pool_key_material(task: PoolTask) -> dict[str, Any]:
    """Everything that decides a pool task's answer: the unit's key (all of its inputs), the chosen setting,
    the answer it starts from, the sizes and the search constants."""
    r = task.replica
    return {"stage": "pools", "pool_stage_version": POOL_STAGE_VERSION, "planner_version": __version__,
            "unit_key": task.unit.key, "setting": [r.max_batch, r.token_budget, r.prefill_chunk_cap],
            "lone_rate_rps_per_replica": repr(float(task.lone_rate_rps)), "sizes": list(task.sizes),
            "search": {"floor_fraction": FLOOR_FRACTION, "growth": GROWTH, "max_growths": MAX_GROWTHS},
            "saturation": SATURATION}


def pool_key(task: PoolTask) -> str:
    text = json.dumps(pool_key_material(task), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_pool_work(task: UnitTask, replica: ReplicaSpec, sizes: Sequence[int]) -> None:
    """Refuse a pool size above the simulator's ceilings (:mod:`planner.sim.work`) before any probe."""
    ceiling = task.mix_ceiling_rps(replica)
    for n in sizes:
        pool = replace(replica, count=n)
        if n * replica.max_batch > MAX_BATCH_SLOTS_PER_POOL:
            raise InputError(f"a pool of {n:,} replicas of {task.label} holds {n * replica.max_batch:,} batch slots, "
                             f"above the simulator's ceiling of {MAX_BATCH_SLOTS_PER_POOL:,}",
                             where=POOL_SIZES_OPTION,
                             fix=f"list pool sizes up to {MAX_BATCH_SLOTS_PER_POOL // replica.max_batch:,}")
        if ceiling > 0:
            duration = run_length_s(task, pool, ceiling)
            check_work([PoolWork(f"{task.label} x {n}", n * replica.max_batch, ceiling * n)],
                       duration_s=duration, replications=task.settings.replications,
                       size_where=POOL_SIZES_OPTION, size_fix="list smaller pool sizes",
                       rate_where=POOL_SIZES_OPTION,
                       rate_fix="list smaller pool sizes (a pool's rate grows with its replicas)")


def runnable_sizes(task: UnitTask, replica: ReplicaSpec, sizes: Sequence[int]) -> tuple[int, ...]:
    """The leading ``sizes`` the simulator can run (:func:`check_pool_work`), for sizes derived from demand rather
    than listed by the user."""
    out: list[int] = []
    for n in sizes:
        try:
            check_pool_work(task, replica, (n,))
        except InputError:
            break
        out.append(n)
    return tuple(out)


SATURATION = 0.05
"""A pool size that adds less than this share per replica over the next smaller one ends the measurements."""


def saturated(previous: float, rate: float, ceiling: float) -> bool:
    """Whether the pool has saturated (module docstring): ``rate`` adds less than SATURATION over ``previous``, or
    ``rate`` is within SATURATION of ``ceiling``."""
    return rate < previous * (1 + SATURATION) or rate >= ceiling * (1 - SATURATION)


def calibrate_pools(task: PoolTask, memo: ProbeStore | None = None) -> dict[str, Any]:
    """The measured answer at each of the task's sizes until the pool saturates (module docstring), as plain
    values; replications in ``memo`` are read, not simulated (:mod:`.probe_memo`)."""
    unit = task.unit
    ceiling = unit.mix_ceiling_rps(task.replica)
    previous = task.lone_rate_rps
    pools: list[dict[str, Any]] = []
    stopped = None
    if previous >= ceiling * (1 - SATURATION):
        stopped = (f"not measured: one replica runs at {previous / ceiling:.0%} of its ceiling of {ceiling:.3g} "
                   "req/s, within 5 % of it, so a pool cannot carry more per replica")
    for n in task.sizes if stopped is None else ():
        replica = replace(task.replica, count=n)
        ok = functools.partial(probe, unit, replica, store=memo)
        outcome, started = _searched_pool(ok, ceiling, previous, unit.settings.rel_tol)
        probes = list(outcome.probes)
        worst = binding_bound(outcome.hi, outcome.lo) if outcome.lo is not None else probes[-1].worst
        pools.append({
            "replicas": n, "status": outcome.status, "rate_rps_per_replica": outcome.rate_rps, "search": started,
            "simulations": sum(p.replications_run for p in probes),
            "binding_class": worst.traffic_class, "binding_metric": worst.metric,
            "probes": [probe_record(p) for p in probes],
        })
        if outcome.status == INFEASIBLE:
            continue
        if n != task.sizes[-1] and saturated(previous, outcome.rate_rps, ceiling):
            stopped = (f"stopped after {n} replicas: {outcome.rate_rps:.3g} req/s per replica is "
                       f"{outcome.rate_rps / previous - 1:+.1%} over the next smaller pool's and "
                       f"{outcome.rate_rps / ceiling:.0%} of the ceiling; larger pools take this size's rate")
            break
        previous = outcome.rate_rps
    result = {"model": unit.model, "sku": unit.sku, "tp_degree": unit.tp, "engine": unit.engine, "key": task.key,
              "stage": "pools", "lone_rate_rps_per_replica": task.lone_rate_rps, "pools": pools,
              **({"saturated": stopped} if stopped else {})}
    plain: dict[str, Any] = json.loads(json.dumps(result))
    return plain


def _searched_pool(ok: Callable[[float], Probe], ceiling: float, previous: float, rel_tol: float
                   ) -> tuple[SearchOutcome[Probe], str]:
    """One size's search and how it started: from the next smaller pool's answer, assumed to hold and checked last
    (:mod:`.search`); where it misses there, from the floor up to it."""
    if previous <= 0:
        return bisect_capacity(ok, ceiling, rel_tol), "from the floor"
    outcome = bisect_capacity(ok, ceiling, rel_tol, assumed_rps=previous)
    if outcome.status != INFEASIBLE:
        return outcome, "from the next smaller pool's answer"
    below = bisect_capacity(ok, previous, rel_tol, miss=outcome.hi)  # the miss at ``previous`` is its first hi
    return replace(below, probes=outcome.probes[:-1] + below.probes), \
        "from the floor: the next smaller pool's answer misses here"


def tabulated_rates(lone_size: int, lone_rate: float, pools: Sequence[dict[str, Any]]) -> list[tuple[int, float]]:
    """(pool size, tabulated λ per replica) from the unit's own answer and the measured pools: the running
    minimum from the right (module docstring); an infeasible size measures 0."""
    measured = [(lone_size, float(lone_rate))] + [
        (int(p["replicas"]), float(p["rate_rps_per_replica"]) if p["status"] != INFEASIBLE else 0.0) for p in pools]
    out: list[tuple[int, float]] = []
    lowest = float("inf")
    for n, rate in reversed(measured):
        lowest = min(lowest, rate)
        out.append((n, lowest))
    return out[::-1]

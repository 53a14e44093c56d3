"""How much a simulation will do, estimated and bounded before it starts, and whether it saw enough.

**Too much.** The replica engine holds every request of a replication in memory (about 220
bytes each: arrival, class, lengths, the per-request state) and steps through them at about
100,000 requests per second on one core (``benchmarks/sim_replica_speed.py``); each replica
holds a slot per request it may batch (``max_batch``) and an event heap per class. So the
work of a run is, per pool (a serving region and model) and replication,

    arrivals ≈ Σ_k λ_k · duration          slots = Σ_sku replicas · max_batch

and the whole run is Σ_pools arrivals × replications. A demand of 1e9 req/s, a plan with a
million replicas or a calibration pool of 100,000 replicas would allocate hundreds of GiB
or run for hours; above the ceilings below such a run is refused before anything is
allocated, with the estimate and the option that brings it down.

**Too little.** A window of a few milliseconds sees no request at all, and a class with no
arrival used to pass as "no traffic, SLO met". A simulated window is at least
:data:`MIN_DURATION_S`, and after the run every class with demand must have seen at least
one request in the measured window of some replication (:func:`check_evidence`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from planner.errors import InputError

SIM_DURATION_OPTION = "--sim-duration"
"""The option that sets the simulated time per replication, named in the errors below (every command calls it
``--sim-duration``)."""
MIN_DURATION_S = 60.0
"""The shortest simulated window: a minute holds a few batches' worth of decode steps even at
the demo's lowest class rates, and a 10 % warm-up of it still lets the queue fill."""
MAX_ARRIVALS_PER_REPLICATION = 5_000_000
"""Requests one replication of one pool may draw: about 1.1 GB of request arrays and a minute of
engine time on one core; every worker holds one replication at a time."""
MAX_ARRIVALS_PER_RUN = 50_000_000
"""Requests over every pool and replication of one run: about ten minutes of engine time on one core."""
MAX_REPLICATIONS = 1000
"""Replications of one window: an interval over R replications narrows like 1/sqrt(R), so past a few
dozen more buy little, and each one is a task of its own for every pool."""
MAX_BATCH_SLOTS_PER_POOL = 2_000_000
"""Replicas x max_batch of one pool: about 240 MB of batch slots and event heaps (8,000 replicas of
max_batch 256), far above any serving region's pool of one model."""


@dataclass(frozen=True)
class PoolWork:
    """The size of one pool's simulation: its name, its batch slots and its total arrival rate."""

    name: str
    slots: int
    rate_rps: float


def check_duration(duration_s: float, option: str = SIM_DURATION_OPTION) -> float:
    """A simulated window of at least :data:`MIN_DURATION_S` seconds."""
    if not (math.isfinite(duration_s) and duration_s >= MIN_DURATION_S):
        raise InputError(f"a simulated window of {duration_s:g} s is shorter than the minimum of "
                         f"{MIN_DURATION_S:g} s: too short to see enough arrivals", where=option,
                         fix=f"pass {option} 1min or longer, e.g. {option} 30min")
    return duration_s


def check_replications(replications: int, option: str = "--replications", minimum: int = 1) -> int:
    """Between ``minimum`` and :data:`MAX_REPLICATIONS` replications."""
    if not minimum <= replications <= MAX_REPLICATIONS:
        raise InputError(f"{option} {replications} is outside {minimum}..{MAX_REPLICATIONS}", where=option,
                         fix=f"pass {option} {max(minimum, 3)} (independent replications give the confidence "
                             "intervals)")
    return replications


def check_work(pools: Iterable[PoolWork], *, duration_s: float, replications: int,
               duration_option: str = SIM_DURATION_OPTION, replications_option: str = "--replications",
               size_where: str = "plan", size_fix: str = "give the pool fewer replicas in the plan",
               rate_where: str | None = None,
               rate_fix: str = "check the demand (requests per second, not per hour)") -> None:
    """Refuse a run above the ceilings of the module docstring, naming the estimate and the knob.

    ``size_where``/``size_fix`` say where a pool's size comes from and how to shrink it; ``rate_where``
    (default: ``duration_option``)/``rate_fix`` do the same for its arrival rate.
    """
    check_replications(replications, replications_option)
    total = 0.0
    for pool in pools:
        if pool.slots > MAX_BATCH_SLOTS_PER_POOL:
            raise InputError(
                f"pool {pool.name} has {pool.slots:,} batch slots (replicas x max_batch), above the ceiling of "
                f"{MAX_BATCH_SLOTS_PER_POOL:,} one simulation holds", where=size_where,
                fix=f"{size_fix} (a pool of a few hundred replicas behaves like a larger one at the same load per "
                    "replica)")
        arrivals = pool.rate_rps * duration_s
        if arrivals > MAX_ARRIVALS_PER_REPLICATION:
            longest_s = MAX_ARRIVALS_PER_REPLICATION / pool.rate_rps
            shorten = (f"shorten {duration_option} to at most {longest_s:,.0f} s, or " if longest_s >= MIN_DURATION_S
                       else f"even the shortest window ({MIN_DURATION_S:g} s) is too long at this rate: ")
            raise InputError(
                f"pool {pool.name} would draw about {arrivals:,.0f} requests per replication ({pool.rate_rps:,.4g} "
                f"req/s x {duration_s:g} s), above the ceiling of {MAX_ARRIVALS_PER_REPLICATION:,}",
                where=rate_where or duration_option, fix=f"{shorten}{rate_fix}")
        total += arrivals * replications
    if total > MAX_ARRIVALS_PER_RUN:
        raise InputError(
            f"the run would simulate about {total:,.0f} requests over every pool and replication, above the "
            f"ceiling of {MAX_ARRIVALS_PER_RUN:,}", where=f"{duration_option}/{replications_option}",
            fix=f"shorten {duration_option} or lower {replications_option} (the estimate is demand x duration x "
                "replications)")


def check_evidence(per_class: pd.DataFrame, *, duration_s: float, warmup_s: float,
                   option: str = SIM_DURATION_OPTION) -> None:
    """Every class with demand saw a request in the measured window, or an input error naming ``option``."""
    if per_class.empty or not {"offered_rps", "arrived", "replicas"} <= set(per_class.columns):
        return
    unseen = per_class[(per_class["offered_rps"] > 0) & (per_class["arrived"] <= 0) & (per_class["replicas"] > 0)]
    if unseen.empty:
        return
    row = unseen.sort_values("offered_rps", kind="stable").iloc[0]
    window = duration_s - warmup_s
    needed = math.ceil(3.0 / float(row["offered_rps"]) * duration_s / window)  # ~3 expected arrivals: P(none) = 5 %
    raise InputError(
        f"{len(unseen)} class(es) with demand saw no request in the {window:g} s measured window, e.g. "
        f"{row['traffic_class']} at {row['region']} / {row['model']} ({float(row['offered_rps']):.4g} req/s): "
        "its SLO would pass on no evidence", where=option,
        fix=f"simulate a longer window, e.g. {option} {needed}s (the minimum is {MIN_DURATION_S:g} s)")

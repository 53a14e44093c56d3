"""What one calibration needs, checked once: the settings, the class mix and one task per (model, SKU).

A :class:`PairTask` is everything that decides one pair's answer, as small frozen values
that pickle (so it can run in another process): the replica's step-time profile, the
classes with their share of the mix, the SLOs in effect for the pair's model and their
token-length laws, the policy with its parameters and admission control, and the
:class:`Settings` of the search. Nothing in it refers to the scenario object, the profile
table or the disk.

Pairs are the scenario's own eligibility: every SKU of ``scenario.allowed_skus(model)`` that
has a row in the profile table, for every model of the scenario (or of ``models``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from planner.errors import InputError
from planner.placement.capacity import TokenLengths, requests_per_second
from planner.scenario import SKU_NAMES, Scenario
from planner.sim.policies import get_policy
from planner.sim.replica.pool import DEFAULT_TOKEN_BUDGET, ClassSpec, ReplicaSpec
from planner.sim.workload import workloads_for

MIX_TOLERANCE = 1e-6
MIN_CLASS_REQUESTS = 1000
"""Requests of the rarest active class a replication must see in its measurement window; see :mod:`.probe`."""
MAX_REQUESTS = 200_000
"""Expected requests per replication above which a run is not lengthened further (a class with a tiny share)."""
ROUTER = "jsq"
"""How a pool of several replicas spreads requests (``pool_replicas`` > 1); one replica needs no router."""


@dataclass(frozen=True)
class Settings:
    """The search and simulation settings shared by every pair of one calibration."""

    duration_s: float
    warmup_fraction: float
    replications: int
    seed: int
    rel_tol: float
    confidence: float
    pool_replicas: int
    policy: str
    prediction_sigma: float
    aging_rate: float
    trail_c: float
    kv_fraction: float
    output_quantile_reserve: float
    min_class_requests: int = MIN_CLASS_REQUESTS
    max_requests: int = MAX_REQUESTS
    router: str = ROUTER
    token_budget: int = DEFAULT_TOKEN_BUDGET


@dataclass(frozen=True)
class ClassInput:
    """One traffic class of the mix: its share p_k, its simulator spec (rate filled in per probe) and ceiling X_k."""

    spec: ClassSpec
    share: float
    ceiling_rps: float

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class PairTask:
    """One (model, SKU) to calibrate; ``key`` is filled in by :mod:`.cache`."""

    model: str
    sku: str
    replica: ReplicaSpec
    profile_source: str
    classes: tuple[ClassInput, ...]
    settings: Settings
    key: str = ""

    @property
    def active(self) -> tuple[ClassInput, ...]:
        """The classes with a positive share: the ones whose SLO the predicate checks."""
        return tuple(c for c in self.classes if c.share > 0)

    def mix_ceiling_rps(self) -> float:
        """Analytic ceiling of the mix per replica, 1 / Σ_k p_k / X_k; 0 if an active class cannot run."""
        if any(c.ceiling_rps <= 0 for c in self.active):
            return 0.0
        return 1.0 / math.fsum(c.share / c.ceiling_rps for c in self.active)


def check_settings(*, duration_s: float, replications: int, seed: int, rel_tol: float, confidence: float,
                   pool_replicas: int) -> None:
    """Every scalar setting, with where and how to fix it."""
    if not (isinstance(duration_s, (int, float)) and math.isfinite(duration_s) and duration_s > 0):
        raise InputError(f"duration must be a positive number of seconds, got {duration_s!r}", where="--duration",
                         fix="e.g. --duration 1h (3600 s)")
    if not isinstance(replications, int) or replications < 2:
        raise InputError(f"replications must be a whole number >= 2, got {replications!r}", where="--replications",
                         fix="use at least 2: the confidence interval needs a spread to estimate")
    if not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed must be a whole number >= 0, got {seed!r}", where="--seed", fix="e.g. --seed 1")
    if not 0 < rel_tol < 0.5:
        raise InputError(f"the tolerance must be in (0, 0.5), got {rel_tol!r}", where="--tolerance",
                         fix="e.g. --tolerance 0.02 (the bisection stops within 2 %)")
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1), got {confidence!r}", where="confidence", fix="e.g. 0.95")
    if not isinstance(pool_replicas, int) or pool_replicas < 1:
        raise InputError(f"pool_replicas must be a whole number >= 1, got {pool_replicas!r}",
                         where="--pool-replicas", fix="e.g. 1 (one replica carries the whole rate)")


def class_shares(scenario: Scenario, class_mix: Mapping[str, float] | None) -> dict[str, float]:
    """Share p_k of every scenario class: the scenario's own, or ``class_mix`` (missing classes get 0)."""
    if class_mix is None:
        return {k.name: float(k.share) for k in scenario.classes}
    unknown = sorted(set(class_mix) - set(scenario.class_names))
    if unknown:
        raise InputError(f"class mix names class(es) {', '.join(unknown)} the scenario does not declare",
                         where="class mix", fix=f"use the scenario's classes: {', '.join(scenario.class_names)}")
    shares = {}
    for name in scenario.class_names:
        value = class_mix.get(name, 0.0)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise InputError(f"share of class {name!r} must be a number >= 0, got {value!r}",
                             where=f"class mix, class {name!r}", fix="give each class a fraction of requests in [0, 1]")
        shares[name] = float(value)
    total = math.fsum(shares.values())
    if abs(total - 1.0) > MIX_TOLERANCE:
        raise InputError(f"class mix sums to {total:.6g}, not 1", where="class mix",
                         fix="make the shares add up to 1" + (f", e.g. divide each by {total:.6g}" if total > 0 else ""))
    return shares


def select_pairs(scenario: Scenario, profiles: pd.DataFrame, models: list[str] | None,
                 skus: list[str] | None) -> tuple[list[tuple[str, str]], list[dict[str, str]]]:
    """(model, SKU) pairs to calibrate, and the allowed pairs skipped for want of a profile row."""
    for column in ("model", "sku"):
        if column not in profiles.columns:
            raise InputError(f"the profile table lacks column {column!r}", where="profiles",
                             fix="pass the table of planner.profiles.load_profiles()")
    chosen_models = list(scenario.model_names) if models is None else list(dict.fromkeys(models))
    unknown = [m for m in chosen_models if m not in scenario.model_names]
    if unknown:
        raise InputError(f"model(s) {', '.join(unknown)} not in the scenario", where="--models",
                         fix=f"use the scenario's models: {', '.join(scenario.model_names)}")
    if skus is not None:
        bad = [s for s in skus if s not in SKU_NAMES]
        if bad:
            raise InputError(f"unknown SKU(s) {', '.join(bad)}", where="--skus",
                             fix=f"use one of {', '.join(SKU_NAMES)}")
    profiled = set(zip(profiles["model"].astype(str), profiles["sku"].astype(str), strict=True))
    pairs, skipped = [], []
    for model in chosen_models:
        for sku in scenario.allowed_skus(model):
            if skus is not None and sku not in skus:
                continue
            if (model, sku) in profiled:
                pairs.append((model, sku))
            else:
                skipped.append({"model": model, "sku": sku, "reason": "allowed by the scenario but not profiled"})
    if not pairs:
        raise InputError("no (model, SKU) pair to calibrate: none is both allowed by the scenario and profiled",
                         where="--models/--skus",
                         fix="choose models and SKUs the scenario allows and the profile table has")
    return pairs, skipped


def _replica(row: Mapping[str, object], sku: str, count: int) -> ReplicaSpec:
    return ReplicaSpec(sku, count, float(row["a_ms"]), float(row["b_ms_per_kv_token"]),  # type: ignore[arg-type]
                       float(row["c_ms_per_prefill_token"]), int(row["kv_capacity_tokens"]),  # type: ignore[arg-type]
                       int(row["max_batch"]))  # type: ignore[call-overload]


def build_tasks(scenario: Scenario, profiles: pd.DataFrame, pairs: list[tuple[str, str]], shares: dict[str, float],
                settings: Settings, histogram: pd.DataFrame | None) -> list[PairTask]:
    """One :class:`PairTask` per pair, with each class's analytic ceiling X_k from the laws' mean lengths."""
    get_policy(settings.policy)
    tasks = []
    laws_by_model = {m: workloads_for(m, scenario.class_names, histogram) for m in dict.fromkeys(m for m, _ in pairs)}
    for model, sku in pairs:
        row = profiles[(profiles["model"].astype(str) == model) & (profiles["sku"].astype(str) == sku)].iloc[0]
        laws = laws_by_model[model]
        classes = []
        for k in scenario.classes:
            law = laws[k.name]
            lengths = TokenLengths(law.prompt.mean(), law.output.mean())
            classes.append(ClassInput(ClassSpec.of(k, scenario.slo(model, k.name), 0.0, law), shares[k.name],
                                      requests_per_second(row, lengths, settings.kv_fraction)))
        tasks.append(PairTask(model, sku, _replica(row, sku, settings.pool_replicas), str(row["source"]),
                              tuple(classes), settings))
    return tasks

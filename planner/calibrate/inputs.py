"""What one calibration needs, checked once: the settings, the class mix and one task per deployment unit.

A unit is one (model, SKU, tensor-parallel degree) under the model's engine: a row of the
profile table the scenario may deploy (``planner.scenario.usable_profiles``). A
:class:`UnitTask` is everything that decides one unit's answer, as small frozen values that
pickle (so it can run in another process): the replica under each engine setting to try
(batch cap ``max_num_seqs``, token budget ``max_num_batched_tokens`` and, for vLLM, the long-prefill
threshold ``long_prefill_token_threshold``; :func:`setting_grid`),
the classes with their share of the mix, the SLOs in effect for the unit's model and their
token-length laws, the policy with its parameters and admission control, and the
:class:`Settings` of the search. Nothing in it refers to the scenario object, the profile
table or the disk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

from planner.errors import InputError
from planner.profiles.throughput import ceiling
from planner.scenario import SKU_NAMES, Scenario, usable_profiles
from planner.sim.policies import get_policy
from planner.sim.replica.pool import ClassSpec, ReplicaSpec
from planner.sim.replica.state import DEFAULT_OVERLAP_WEIGHT
from planner.sim.work import SIM_DURATION_OPTION
from planner.workloads import Workload, resolve_workloads

MIX_TOLERANCE = 1e-6
MIN_CLASS_REQUESTS = 1000
"""Requests of the rarest active class a replication must see in its measurement window; see :mod:`.probe`."""
MAX_REQUESTS = 200_000
"""Expected requests per replication above which a run is not lengthened further (a class with a tiny share)."""
ROUTER = "jsq"
"""How a pool of several replicas spreads requests (``pool_replicas`` > 1) unless the scenario's
``[policy.routing]`` says otherwise; one replica needs no router."""
MAX_NUM_SEQS = (64, 128, 256, 512)
MAX_NUM_BATCHED_TOKENS = (2048, 8192)
LONG_PREFILL_TOKEN_THRESHOLDS = (0, 2048)
"""vLLM's ``--long-prefill-token-threshold`` (0: off, its default): a prompt longer than the threshold
prefills at most that many tokens a step, so it no longer holds the whole budget while short
requests wait to be admitted. Searched for vLLM only."""
"""The engine settings calibration searches: batch caps and per-step token budgets around vLLM's
defaults (256 and 8192): a smaller cap or budget shortens steps (TPOT, TTFT of short requests),
a larger one packs more work into each step (throughput, long prompts in fewer chunks)."""


@dataclass(frozen=True)
class Settings:
    """The search and simulation settings shared by every unit of one calibration.

    ``search_settings`` tries every engine setting of :func:`setting_grid` (else only the
    profile's defaults); ``prune`` skips, unsimulated, the settings that cannot beat the best
    one found (:mod:`.unit`).
    """

    duration_s: float
    warmup_fraction: float
    replications: int
    seed: int
    rel_tol: float
    confidence: float
    pool_replicas: int
    policy: str
    prediction_sigma: float
    policy_params: tuple[tuple[str, float], ...]
    kv_fraction: float
    output_quantile_reserve: float
    min_class_requests: int = MIN_CLASS_REQUESTS
    max_requests: int = MAX_REQUESTS
    router: str = ROUTER
    router_overlap_weight: float = DEFAULT_OVERLAP_WEIGHT
    search_settings: bool = True
    prune: bool = True


@dataclass(frozen=True)
class ClassInput:
    """One traffic class of the mix: its share p_k, its simulator spec (rate filled in per probe) and mean lengths."""

    spec: ClassSpec
    share: float
    prompt_mean: float
    output_mean: float

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class UnitTask:
    """One (model, SKU, TP, engine) to calibrate over its engine settings; ``key`` is filled in by :mod:`.cache`."""

    model: str
    sku: str
    tp: int
    engine: str
    candidates: tuple[ReplicaSpec, ...]
    profile_source: str
    classes: tuple[ClassInput, ...]
    settings: Settings
    key: str = ""

    @property
    def label(self) -> str:
        return f"{self.model} on {self.tp} x {self.sku}"

    @property
    def active(self) -> tuple[ClassInput, ...]:
        """The classes with a positive share: the ones whose SLO the predicate checks."""
        return tuple(c for c in self.classes if c.share > 0)

    def class_ceiling_rps(self, replica: ReplicaSpec, klass: ClassInput) -> float:
        """X_k: the analytic ceiling of the class's mean request on one replica (``planner.profiles.throughput``)."""
        return ceiling(replica.step, kv_capacity_tokens=replica.kv_capacity_tokens, max_num_seqs=replica.max_batch,
                       max_num_batched_tokens=replica.token_budget, prompt=klass.prompt_mean,
                       output=klass.output_mean, kv_fraction=self.settings.kv_fraction,
                       prefill_chunk_cap=replica.prefill_chunk_cap).rps

    def mix_ceiling_rps(self, replica: ReplicaSpec) -> float:
        """Analytic ceiling of the mix per replica, 1 / Σ_k p_k / X_k; 0 if an active class cannot run."""
        ceilings = [self.class_ceiling_rps(replica, c) for c in self.active]
        if any(x <= 0 for x in ceilings):
            return 0.0
        return 1.0 / math.fsum(c.share / x for c, x in zip(self.active, ceilings, strict=True))


def check_settings(*, duration_s: float, replications: int, seed: int, rel_tol: float, confidence: float,
                   pool_replicas: int) -> None:
    """Every scalar setting, with where and how to fix it."""
    if not (isinstance(duration_s, (int, float)) and math.isfinite(duration_s) and duration_s > 0):
        raise InputError(f"duration must be a positive number of seconds, got {duration_s!r}",
                         where=SIM_DURATION_OPTION, fix=f"e.g. {SIM_DURATION_OPTION} 1h (3600 s)")
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


def _checked_mix(scenario: Scenario, class_mix: Mapping[str, float], where: str) -> dict[str, float]:
    """An explicit class mix over the scenario's classes (missing classes get 0), checked."""
    unknown = sorted(set(class_mix) - set(scenario.class_names))
    if unknown:
        raise InputError(f"class mix names class(es) {', '.join(unknown)} the scenario does not declare",
                         where=where, fix=f"use the scenario's classes: {', '.join(scenario.class_names)}")
    shares = {}
    for name in scenario.class_names:
        value = class_mix.get(name, 0.0)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise InputError(f"share of class {name!r} must be a number >= 0, got {value!r}",
                             where=f"{where}, class {name!r}", fix="give each class a fraction of requests in [0, 1]")
        shares[name] = float(value)
    total = math.fsum(shares.values())
    if abs(total - 1.0) > MIX_TOLERANCE:
        raise InputError(f"class mix sums to {total:.6g}, not 1", where=where,
                         fix="make the shares add up to 1"
                         + (f", e.g. divide each by {total:.6g}" if total > 0 else ""))
    return shares


def class_shares(scenario: Scenario, class_mix: Mapping[str, float] | None) -> dict[str, float]:
    """Share p_k of every scenario class: the scenario's own, or ``class_mix`` (missing classes get 0)."""
    if class_mix is None:
        return {k.name: float(k.share) for k in scenario.classes}
    return _checked_mix(scenario, class_mix, "class mix")


MixSource = tuple[dict[str, float], str]
"""A model's class shares and where they came from."""


def model_mixes(scenario: Scenario, class_mix: Mapping[str, float] | None = None,
                mixes: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, MixSource]:
    """Each model's class mix: its own traffic's (``mixes``, e.g. from the forecast), else ``class_mix`` for
    every model, else the scenario's (:meth:`~planner.scenario.Scenario.model_mix`)."""
    result: dict[str, MixSource] = {}
    for model in scenario.model_names:
        if mixes is not None and model in mixes:
            result[model] = (_checked_mix(scenario, mixes[model], f"class mix of {model}"), "forecast")
        elif class_mix is not None:
            result[model] = (_checked_mix(scenario, class_mix, "class mix"), "explicit")
        else:
            spec = scenario.model(model)
            source = "scenario models.mix" if spec.mix is not None else \
                "scenario class shares of the model's classes" if spec.classes is not None else "scenario class shares"
            result[model] = (scenario.model_mix(model), source)
    return result


def select_units(scenario: Scenario, profiles: pd.DataFrame, models: list[str] | None,
                 skus: list[str] | None) -> tuple[pd.DataFrame, list[dict[str, str]]]:
    """The profile rows to calibrate (one per unit), and the allowed (model, SKU) skipped for want of a profile."""
    for column in ("model", "sku", "tp_degree", "engine"):
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
    usable = usable_profiles(scenario, profiles)
    usable = usable[usable["model"].isin(chosen_models) & (usable["sku"].isin(skus) if skus is not None else True)]
    skipped = []
    for model in chosen_models:
        for sku in scenario.allowed_skus(model):
            if (skus is None or sku in skus) and not ((usable["model"] == model) & (usable["sku"] == sku)).any():
                skipped.append({"model": model, "sku": sku,
                                "reason": "allowed by the scenario but not profiled "
                                          f"under {scenario.model(model).engine} "
                                          "at an allowed TP degree"})
    if usable.empty:
        raise InputError("no (model, SKU, TP) to calibrate: none is both allowed by the scenario and profiled",
                         where="--models/--skus",
                         fix="choose models and SKUs the scenario allows and the profile table has "
                             "(`planner profiles`)")
    return usable.reset_index(drop=True), skipped


def setting_grid(profile: Mapping[str, object], search: bool) -> list[tuple[int, int, int]]:
    """(max_num_seqs, max_num_batched_tokens, long_prefill_token_threshold) to try: the profile's defaults
    first, then the grid when searching.

    A token budget below the batch cap is left out (a step could not give every running request
    its decode token), and so is a prefill threshold on an engine other than vLLM, which has none.
    """
    default = (int(profile["max_num_seqs"]), int(profile["max_num_batched_tokens"]), 0)  # type: ignore[call-overload]
    thresholds = LONG_PREFILL_TOKEN_THRESHOLDS if profile["engine"] == "vllm" else (0,)
    grid = [(seqs, tokens, cap) for seqs in MAX_NUM_SEQS for tokens in MAX_NUM_BATCHED_TOKENS for cap in thresholds
            if tokens >= seqs and cap < tokens]
    return [default] + [g for g in grid if g != default] if search else [default]


def build_tasks(scenario: Scenario, units: pd.DataFrame, shares: Mapping[str, float], settings: Settings,
                histogram: pd.DataFrame | None) -> list[UnitTask]:
    """:func:`build_unit_tasks` with one class mix ``shares`` for every model."""
    mixes = {m: dict(shares) for m in dict.fromkeys(units["model"].astype(str))}
    return build_unit_tasks(scenario, units, resolve_workloads(scenario, mixes, histogram=histogram,
                                                               include_idle=True), settings)


def build_unit_tasks(scenario: Scenario, units: pd.DataFrame, workloads: Mapping[tuple[str, str], Workload],
                     settings: Settings) -> list[UnitTask]:
    """One :class:`UnitTask` per profile row of ``units``: the classes of its model in ``workloads`` (a class
    with share 0 gets a capacity row by relative cost, its SLO unchecked), with the mean lengths each class's
    ceiling uses."""
    get_policy(settings.policy)
    tasks = []
    for row in units.to_dict("records"):
        model = str(row["model"])
        classes = tuple(ClassInput(ClassSpec.of(k, scenario.slo(model, k.name), 0.0, w.lengths, w.reuse), w.share,
                                   w.lengths.prompt.mean(), w.lengths.output.mean())
                        for k in scenario.classes if (w := workloads.get((model, k.name))) is not None)
        caching = scenario.model(model).prefix_caching
        candidates = tuple(replace(ReplicaSpec.of(row, settings.pool_replicas, max_batch=seqs, token_budget=tokens,
                                                  prefill_chunk_cap=cap), prefix_caching=caching)
                           for seqs, tokens, cap in setting_grid(row, settings.search_settings))
        tasks.append(UnitTask(model, str(row["sku"]), int(row["tp_degree"]), str(row["engine"]), candidates,
                              str(row["source"]), classes, settings))
    return tasks

"""Frozen pydantic models for a scenario file, with the rules that span fields.

A scenario is everything the planner needs besides data: where users are (origins)
and where replicas may run (serving regions), the network RTT between them, which
zones each origin's traffic may be served in (residency), the models, the traffic
classes with their SLOs, the scheduling policy the fleet runs, and the capacity
rules for placement. It is validated once at the front door and never changes.

Units are in the field names (``_ms``, ``_usd``, ``_tokens``); quotas are GPUs.
``scenarios/README.md`` documents every field, its unit and its default.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import AfterValidator, Field, create_model, field_validator, model_validator

from planner.scenario.fields import (
    FORECAST_QUANTILES,
    SKU_NAMES,
    TP_DEGREES,
    Bool,
    Engine,
    Float,
    Horizon,
    Issue,
    PolicyName,
    Sku,
    Slug,
    Str,
    Term,
    Tier,
    TpDegree,
    custom_error,
    duplicate_issues,
    horizon_to_hours,
    rule_error,
)
from planner.scenario.lengths import LengthDecl, ReuseDecl, WorkloadDecl
from planner.scenario.regions import Frozen, Origin, Quotas, Regions, ServingRegion
from planner.sim.policies.registry import POLICIES
from planner.sim.replica.routing import ROUTERS
from planner.sim.replica.state import DEFAULT_OVERLAP_WEIGHT
from planner.slo import ClassSlo, slo_field_names

SHARE_TOLERANCE = 1e-6

_Item = TypeVar("_Item")

SloMs = Annotated[float, Field(strict=True, gt=0)]


def _check_router(value: str) -> str:
    if value not in ROUTERS:
        raise custom_error("scenario_router", f"unknown router {value!r}", f"use one of: {', '.join(ROUTERS)}")
    return value


RouterName = Annotated[str, AfterValidator(_check_router)]


class SloOverride(Frozen):
    """A model's own p99 SLOs for one class (``[models.slos.<class>]``): each one set replaces the class's."""

    ttft_p99_ms: SloMs | None = Field(default=None, description="SLO for this model: p99 time to first token in ms")
    tpot_p99_ms: SloMs | None = Field(
        default=None, description="SLO for this model: p99 time per output token in ms"
    )
    e2e_p99_ms: SloMs | None = Field(default=None, description="SLO for this model: p99 end-to-end latency in ms")

    @model_validator(mode="after")
    def _sets_something(self) -> SloOverride:
        if not ClassSlo.of(self).metrics():
            raise rule_error([Issue((), "overrides no SLO",
                                    f"set at least one of {', '.join(slo_field_names())}, or remove the table")])
        return self


class ModelSpec(Frozen):
    """A model to serve; the name must match the profile table (checked by ``check_against_data``).

    Every tensor-parallel degree that fits a SKU is a candidate: calibration measures each and
    placement chooses; ``tp`` narrows the candidates. ``engine`` is the serving engine whose
    measured step times the profiles use. ``slos`` overrides the SLOs of some classes for this
    model only, e.g. a large model's interactive TTFT; which classes exist is checked by
    :class:`Scenario`.
    """

    name: Slug = Field(description="model name, e.g. 'llama-3.1-8b', as in the profile table")
    skus: Annotated[tuple[Sku, ...], Field(min_length=1)] | None = Field(
        default=None, description="GPU SKUs this model may run on; omit for every SKU with a profile"
    )
    engine: Engine = Field(default="vllm", description="serving engine: vllm, sglang or trtllm")
    tp: Annotated[tuple[TpDegree, ...], Field(min_length=1)] | None = Field(
        default=None, description="tensor-parallel degrees a replica may use; omit for every degree that fits"
    )
    slos: dict[Str, SloOverride] = Field(
        default_factory=dict, description="per-class SLO overrides for this model, [models.slos.<class>]"
    )
    classes: Annotated[tuple[Str, ...], Field(min_length=1)] | None = Field(
        default=None, description="the traffic classes this model serves; omit for every class"
    )
    mix: dict[Str, Annotated[float, Field(strict=True, ge=0, le=1)]] | None = Field(
        default=None, description="this model's class mix for `planner calibrate` (shares summing to 1); "
                                  "omit for the class shares of the classes it serves"
    )
    workloads: dict[Str, WorkloadDecl] = Field(
        default_factory=dict, description="this model's own token lengths of a class, [models.workloads.<class>]"
    )
    prefix_caching: Bool = Field(
        default=True, description="whether the engine keeps finished requests' KV blocks to serve later prompts' "
                                  "shared prefixes (on by default in vLLM, SGLang and TensorRT-LLM)"
    )


class TrafficClass(Frozen):
    """A traffic class: its share of requests, its holding cost and its latency SLOs.

    Each p99 SLO (TTFT, TPOT, e2e) is optional, but a class sets at least one, and e2e
    exceeds TTFT when both are set. A model may override them (``ModelSpec.slos``); read
    a (model, class) pair's SLOs with :meth:`Scenario.slo`, never from the class itself.

    ``weight`` is the holding cost w_k: c-mu serves the class with the largest w_k·mu_k,
    WSPT the request with the largest w_j/p_j. ``priority_jump`` follows NVIDIA Dynamo's
    router: FCFS orders by priority_jump - arrival offset (s), WSPT by
    (1 + priority_jump)/prompt tokens. ``drr_quantum_tokens`` is the class's Deficit
    Round Robin quantum; a request costs max(1, uncached prompt tokens). SLOs are
    measured at the serving region; ``latency_budget_ms`` bounds the network RTT.
    """

    name: Slug = Field(description="class name, e.g. 'interactive'")
    weight: Annotated[float, Field(strict=True, gt=0)] = Field(
        description="holding cost per unit of waiting, relative to other classes (> 0)"
    )
    share: Annotated[float, Field(strict=True, ge=0, le=1)] = Field(
        description="fraction of all requests in this class (0..1, summing to 1 over classes)"
    )
    ttft_p99_ms: SloMs | None = Field(default=None, description="SLO: 99th-percentile time to first token in ms")
    tpot_p99_ms: SloMs | None = Field(
        default=None, description="SLO: 99th-percentile time per output token (inter-token latency) in ms"
    )
    e2e_p99_ms: SloMs | None = Field(
        default=None, description="SLO: 99th-percentile end-to-end latency in ms (> ttft_p99_ms)"
    )
    max_queue_wait_ms: Annotated[float, Field(strict=True, gt=0)] = Field(
        description="admission: longest a request may queue before it is rejected, in ms"
    )
    priority_jump: Annotated[float, Field(strict=True, ge=0)] = Field(
        default=0.0, description="priority boost (>= 0); with aging_rate 1 it is a head start in seconds"
    )
    drr_quantum_tokens: Annotated[int, Field(strict=True, gt=0)] = Field(
        default=4096, description="DRR quantum in uncached prompt tokens earned per round (> 0)"
    )
    spot_tolerant: Bool = Field(default=False, description="whether this class may be served on spot capacity")
    latency_budget_ms: Annotated[float, Field(strict=True, gt=0)] = Field(
        description="largest origin-to-serving RTT in ms this class accepts"
    )
    max_prompt_tokens: Annotated[int, Field(strict=True, ge=1)] | None = Field(
        default=None, description="longest prompt the service takes for this class, in tokens (e.g. a deployment's "
                                  "max_model_len less its output budget); omit for the model's context"
    )
    prompt_tokens: LengthDecl | None = Field(
        default=None, description="prompt length law in tokens: a built-in law's name, { median, p99 }, "
                                  "{ mean, sigma }, a fixed number, { points } or { histogram }"
    )
    output_tokens: LengthDecl | None = Field(
        default=None, description="output length law in tokens, in the same forms as prompt_tokens"
    )
    reuse: ReuseDecl | None = Field(
        default=None, description="prefix reuse: { system_prompt_tokens, variants } and/or { turns, think_time_s }"
    )

    @model_validator(mode="after")
    def _check_slos(self) -> TrafficClass:
        slo = ClassSlo.of(self)
        if not slo.metrics():
            raise rule_error([Issue((), "sets no latency SLO",
                                    f"set at least one of {', '.join(slo_field_names())}, e.g. `ttft_p99_ms = 800`")])
        problem = slo.order_problem()
        if problem:
            raise rule_error(
                [Issue(("e2e_p99_ms",), problem, f"raise e2e_p99_ms above {self.ttft_p99_ms:g} or lower ttft_p99_ms")]
            )
        return self


class _PolicyTuning(Frozen):
    """Tuning of the scheduling policy: the noise of size predictions, then every registered
    policy's own parameters (:func:`_policy_params_model` adds them from the policy registry).

    Size predictions are p_hat = p·exp(N(0, sigma^2)) with sigma = ``prediction_noise_sigma``.
    """

    prediction_noise_sigma: Annotated[float, Field(strict=True, ge=0)] = Field(
        default=0.0, description="log-space sigma of output-length prediction error; 0 = exact sizes"
    )

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> float: ...  # a registered policy's parameter


def _policy_params_model() -> type[_PolicyTuning]:
    """``[policy.params]``: the fields of :class:`_PolicyTuning` plus one per parameter a registered
    policy declares (its default, bounds and summary), in name order, so a new policy's parameter
    is settable in a scenario without touching this file."""
    fields: dict[str, Any] = {}
    for spec in POLICIES.values():
        for param in spec.params:
            most = param.maximum if math.isfinite(param.maximum) else None
            fields[param.name] = (Annotated[float, Field(strict=True, ge=param.minimum, le=most)],
                                  Field(default=param.default, description=f"{param.summary} ({spec.name})"))
    return create_model("PolicyParams", __base__=_PolicyTuning, __module__=__name__,
                        **dict(sorted(fields.items())))


if TYPE_CHECKING:
    PolicyParams = _PolicyTuning
else:
    PolicyParams = _policy_params_model()


class Admission(Frozen):
    """Token-level admission control on each replica's KV cache.

    Admit a request while sum(reserved KV tokens) + prompt + q(output) <= kv_fraction·KV
    capacity, where q is the class's ``output_quantile_reserve`` quantile of output
    length; the unused reservation is released when the request finishes.
    """

    kv_fraction: Annotated[float, Field(strict=True, gt=0, le=1)] = Field(
        default=0.85, description="admit while reserved KV tokens stay under this fraction of the KV budget"
    )
    output_quantile_reserve: Annotated[float, Field(strict=True, gt=0, lt=1)] = Field(
        default=0.95, description="quantile of the class's output length reserved in KV at admission"
    )


class Routing(Frozen):
    """How a pool of replicas spreads its requests (``[policy.routing]``; :mod:`planner.sim.replica.routing`)."""

    router: RouterName = Field(default="jsq", description="jsq, round-robin, random, power-of-d, least-tokens, "
                                                          "cache-aware or session-affinity")
    overlap_weight: Annotated[float, Field(ge=0)] = Field(
        default=DEFAULT_OVERLAP_WEIGHT, description="cache-aware: weight of the cached share of a request's blocks "
                                                    "against KV usage and the normalised queue")


class Policy(Frozen):
    name: PolicyName = Field(description="scheduling policy the fleet runs")
    params: PolicyParams = Field(default_factory=PolicyParams, description="policy tuning parameters")
    admission: Admission = Field(default_factory=Admission, description="token-level admission control")
    routing: Routing = Field(default_factory=Routing, description="how a pool's router picks a replica")


def _check_quantile(value: float) -> float:
    if value not in FORECAST_QUANTILES:
        raise custom_error(
            "forecast_quantile",
            f"{value:g} is not a forecast quantile the planner produces",
            f"use one of: {', '.join(f'{q:g}' for q in FORECAST_QUANTILES)}",
        )
    return value


class Capacity(Frozen):
    """Rules for the placement integer program.

    Provisioned capacity must cover the ``forecast_quantile`` demand with each replica
    loaded to at most ``utilisation_cap`` of its calibrated rate; spot replicas count
    ``spot_reliable_fraction`` of their rate, and only for spot-tolerant classes.
    """

    tiers: Annotated[tuple[Tier, ...], Field(min_length=1)] = Field(
        default=tuple(Tier), validate_default=True, description="purchase tiers placement may use"
    )
    utilisation_cap: Annotated[float, Field(strict=True, gt=0, le=1)] = Field(
        default=0.85, description="plan each replica to at most this fraction of its calibrated capacity (1: the "
                                  "calibrated rate, which already holds every p99 SLO on Poisson arrivals)"
    )
    redundancy: Annotated[int, Field(strict=True, ge=0)] = Field(
        default=1, description="minimum replicas of a model in every serving region that serves it"
    )
    min_replicas_per_pool: Annotated[int, Field(strict=True, ge=1)] = Field(
        default=2, description="minimum replicas of a (region, model) pool in every period once it serves any demand"
    )
    reserved_term: Term = Field(
        default="365d", description="commitment term of a reserved replica, e.g. '365d'; it is paid for the whole term"
    )
    quotas: Quotas = Field(default_factory=dict, description="default GPU quota per SKU in every serving region")
    budget_usd: Annotated[float, Field(strict=True, gt=0)] | None = Field(
        default=None, description="optional cap on total spend over the horizon, in USD"
    )
    forecast_quantile: Annotated[Float, AfterValidator(_check_quantile)] = Field(
        default=0.95, description="demand quantile the plan provisions for: 0.5, 0.9, 0.95 or 0.99"
    )
    spot_reliable_fraction: Annotated[float, Field(strict=True, ge=0, le=1)] = Field(
        default=0.5, description="fraction of spot capacity counted on (the rest may be reclaimed)"
    )
    switching_cost_usd: Annotated[float, Field(strict=True, ge=0)] = Field(
        default=0.0, description="USD charged per replica added or removed relative to the previous plan"
    )

    @property
    def reserved_term_hours(self) -> int:
        return horizon_to_hours(self.reserved_term)

    @field_validator("tiers")
    @classmethod
    def _unique_tiers(cls, tiers: tuple[str, ...]) -> tuple[str, ...]:
        issues = duplicate_issues(list(tiers), "", "tier")
        if issues:
            raise rule_error([Issue((i.path[0],), i.problem, "list each tier once") for i in issues])
        return tiers


class Seeds(Frozen):
    base: Annotated[int, Field(strict=True, ge=0)] = Field(
        description="base seed (>= 0); every random stream is spawned from it"
    )


class Scenario(Frozen):
    """A whole scenario file, validated and frozen; lookups below never change it."""

    name: Slug = Field(description="scenario name, e.g. 'demo'")
    description: Str = Field(default="", description="one or two sentences on what the scenario is for")
    horizon: Horizon = Field(description="planning horizon: a whole number and h, d or w, e.g. '14d'")
    seeds: Seeds = Field(description="the base seed")
    regions: Regions = Field(description="serving regions, origins and the latency matrix")
    models: Annotated[tuple[ModelSpec, ...], Field(min_length=1)] = Field(description="the models to serve")
    classes: Annotated[tuple[TrafficClass, ...], Field(min_length=1)] = Field(
        description="traffic classes with their SLOs"
    )
    policy: Policy = Field(description="the scheduling policy and admission control")
    capacity: Capacity = Field(default_factory=Capacity, description="placement rules")
    profiles: tuple[Annotated[Str, Field(min_length=1)], ...] = Field(
        default=(), description="extra profile files (e.g. from `planner profiles fit`), relative to the scenario "
                                "file; their rows replace bundled profiles of the same (model, SKU, TP, engine)"
    )

    @field_validator("models")
    @classmethod
    def _unique_models(cls, models: tuple[ModelSpec, ...]) -> tuple[ModelSpec, ...]:
        issues = duplicate_issues([m.name for m in models], "name", "model")
        if issues:
            raise rule_error(issues)
        return models

    @field_validator("classes")
    @classmethod
    def _classes_unique_and_shares(cls, classes: tuple[TrafficClass, ...]) -> tuple[TrafficClass, ...]:
        issues = duplicate_issues([c.name for c in classes], "name", "class")
        total = math.fsum(c.share for c in classes)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            issues.append(
                Issue(
                    ("*", "share"),
                    f"class shares sum to {total:.6g}, not 1 (tolerance {SHARE_TOLERANCE:g})",
                    "make the shares add up to 1"
                    + (f", e.g. divide each by {total:.6g}" if total > 0 else ""),
                )
            )
        if issues:
            raise rule_error(issues)
        return classes

    @model_validator(mode="after")
    def _check_cross_references(self) -> Scenario:
        """Rules between sections, all reported together: reachability, and the models' SLO overrides."""
        issues = [*self._reachability_issues(), *self._slo_override_issues(), *self._model_class_issues()]
        if issues:
            raise rule_error(issues)
        return self

    def _reachability_issues(self) -> list[Issue]:
        """Every (origin, class) pair needs a serving region that residency and RTT both allow: the class's
        latency budget must reach the origin's nearest allowed region (one pass over the classes per origin)."""
        nearest: dict[str, tuple[str, float]] = {}
        for origin in self.regions.origins:
            allowed = self._residency_keys(origin.name)
            if allowed:  # an empty residency set is reported by Regions
                key = min(allowed, key=lambda key: (self.rtt_ms(origin.name, key), key))
                nearest[origin.name] = (key, self.rtt_ms(origin.name, key))
        return [Issue(("classes", index, "latency_budget_ms"),
                      f"origin {origin!r} has no serving region within {klass.latency_budget_ms:g} ms "
                      f"in its residency zones (nearest allowed: {key} at {rtt:g} ms)",
                      f"raise latency_budget_ms to at least {rtt:g} or add a serving region nearer to {origin}")
                for index, klass in enumerate(self.classes)
                for origin, (key, rtt) in nearest.items() if rtt > klass.latency_budget_ms]

    def _slo_override_issues(self) -> list[Issue]:
        """Each override names a declared class, and the SLOs it leaves in effect can all hold."""
        issues: list[Issue] = []
        for index, model in enumerate(self.models):
            for class_name, override in model.slos.items():
                where = ("models", index, "slos", class_name)
                if class_name not in self.class_names:
                    issues.append(Issue(where, f"no traffic class {class_name!r} in the scenario",
                                        f"override one of the classes: {', '.join(self.class_names)}"))
                    continue
                issues += _effective_slo_issues(where, self.slo(model.name, class_name), ClassSlo.of(override))
        return issues

    def _model_class_issues(self) -> list[Issue]:
        """A model's ``classes``, ``mix`` and ``workloads`` name declared classes; its mix sums to 1."""
        issues: list[Issue] = []
        known = ", ".join(self.class_names)
        for index, model in enumerate(self.models):
            named: list[tuple[str, str | int, str]] = [("classes", i, n) for i, n in enumerate(model.classes or ())]
            named += [("mix", name, name) for name in model.mix or {}]
            named += [("workloads", name, name) for name in model.workloads]
            for field, key, name in named:
                if name not in self.class_names:
                    issues.append(Issue(("models", index, field, key), f"no traffic class {name!r} in the scenario",
                                        f"use one of the classes: {known}"))
            if model.mix is not None:
                total = math.fsum(model.mix.values())
                if abs(total - 1.0) > SHARE_TOLERANCE:
                    issues.append(Issue(("models", index, "mix"), f"the mix sums to {total:.6g}, not 1",
                                        "make this model's shares add up to 1"))
                outside = sorted(set(model.mix) - set(model.classes or self.class_names))
                if model.classes is not None and outside:
                    issues.append(Issue(("models", index, "mix"), f"gives a share to {', '.join(outside)}, which "
                                        "the model's classes leave out", "add them to classes, or drop them here"))
        return issues

    # ------------------------------------------------------------------ lookups
    @property
    def horizon_hours(self) -> int:
        return horizon_to_hours(self.horizon)

    @property
    def serving_keys(self) -> tuple[str, ...]:
        return tuple(region.key for region in self.regions.serving)

    @property
    def origin_names(self) -> tuple[str, ...]:
        return tuple(origin.name for origin in self.regions.origins)

    @property
    def model_names(self) -> tuple[str, ...]:
        return tuple(model.name for model in self.models)

    @property
    def class_names(self) -> tuple[str, ...]:
        return tuple(klass.name for klass in self.classes)

    def serving_region(self, key: str) -> ServingRegion:
        return _find(self.regions.serving, "key", key, "serving region")

    def origin(self, name: str) -> Origin:
        return _find(self.regions.origins, "name", name, "origin")

    def model(self, name: str) -> ModelSpec:
        return _find(self.models, "name", name, "model")

    def traffic_class(self, name: str) -> TrafficClass:
        return _find(self.classes, "name", name, "traffic class")

    def slo(self, model: str, traffic_class: str) -> ClassSlo:
        """The SLOs in effect for ``model``'s requests of ``traffic_class``: the class's, with the model's overrides."""
        base = ClassSlo.of(self.traffic_class(traffic_class))
        override = self.model(model).slos.get(traffic_class)
        return base if override is None else base.overridden_by(ClassSlo.of(override))

    def rtt_ms(self, origin: str, serving_key: str) -> float:
        return self.regions.latency_ms[origin][serving_key]

    def _residency_keys(self, origin: str) -> tuple[str, ...]:
        zones = set(self.origin(origin).residency)
        return tuple(region.key for region in self.regions.serving if region.zone in zones)

    def eligible_serving(self, origin: str, traffic_class: str | None = None) -> tuple[str, ...]:
        """Serving keys that may take ``origin``'s traffic, nearest first (ties by key).

        Residency always applies; with a class, so does its ``latency_budget_ms`` (RTT <= budget).
        """
        keys = self._residency_keys(origin)
        if traffic_class is not None:
            budget = self.traffic_class(traffic_class).latency_budget_ms
            keys = tuple(key for key in keys if self.rtt_ms(origin, key) <= budget)
        return tuple(sorted(keys, key=lambda key: (self.rtt_ms(origin, key), key)))

    def allowed_skus(self, model: str) -> tuple[str, ...]:
        """The SKUs a model may run on (every known SKU when the scenario does not restrict it)."""
        skus = self.model(model).skus
        return tuple(skus) if skus is not None else SKU_NAMES

    def served_classes(self, model: str) -> tuple[str, ...]:
        """The classes ``model`` serves: its ``classes``, else every class."""
        chosen = self.model(model).classes
        return tuple(k for k in self.class_names if chosen is None or k in chosen)

    def model_mix(self, model: str) -> dict[str, float]:
        """``model``'s class mix by the scenario: its ``mix``, else the shares of the classes it serves,
        renormalised to sum to 1 (every served class equal when those shares are all 0)."""
        spec = self.model(model)
        if spec.mix is not None:
            return {k: float(spec.mix.get(k, 0.0)) for k in self.class_names}
        served = self.served_classes(model)
        total = math.fsum(self.traffic_class(k).share for k in served)
        return {k: (self.traffic_class(k).share / total if total > 0 else 1.0 / len(served)) if k in served else 0.0
                for k in self.class_names}

    def declared_lengths(self, model: str, traffic_class: str) -> tuple[WorkloadDecl, WorkloadDecl]:
        """(the model's own declaration, the class's) of a pair's token lengths; either may declare nothing."""
        klass = self.traffic_class(traffic_class)
        own = self.model(model).workloads.get(traffic_class, WorkloadDecl())
        return own, WorkloadDecl(prompt_tokens=klass.prompt_tokens, output_tokens=klass.output_tokens,
                                 reuse=klass.reuse)

    def prompt_caps(self) -> dict[str, int | None]:
        """Each class's ``max_prompt_tokens`` (None: the model's context)."""
        return {k.name: k.max_prompt_tokens for k in self.classes}

    def allowed_tps(self, model: str) -> tuple[int, ...]:
        """The tensor-parallel degrees a model's replicas may use (every degree when not restricted)."""
        tps = self.model(model).tp
        return tuple(int(t) for t in tps) if tps is not None else TP_DEGREES

    def quota_gpus(self, serving_key: str, sku: str) -> int | None:
        """GPU quota override: the region's own, else capacity.quotas, else None (use the catalog's)."""
        for quotas in (self.serving_region(serving_key).quotas, self.capacity.quotas):
            if sku in quotas:
                return quotas[sku]
        return None

    def profile_paths(self, scenario_file: str | Path) -> tuple[Path, ...]:
        """The ``profiles`` files as paths: a relative one is relative to the scenario file's folder."""
        folder = Path(scenario_file).parent
        return tuple(folder / Path(name).expanduser() for name in self.profiles)

    def summary_rows(self) -> list[dict[str, Any]]:
        """One row per section item (section, name, details) for a table or JSON."""
        from planner.scenario.summary import summary_rows

        return summary_rows(self)


def _effective_slo_issues(where: tuple[str | int, ...], effective: ClassSlo, override: ClassSlo) -> list[Issue]:
    """Whether one (model, class) pair's SLOs can all hold after its override (``where`` is the override's path).

    The pair always has at least one SLO in effect: its class sets one, and an override can
    only replace a target with another number. What an override can break is the order.
    """
    problem = effective.order_problem()
    if not problem:
        return []
    source = {m: "this override" if override.target(m) is not None else "the class" for m in ("ttft", "e2e")}
    return [Issue(where, f"in effect for this model, {problem} (ttft_p99_ms from {source['ttft']}, "
                         f"e2e_p99_ms from {source['e2e']})",
                  "keep e2e_p99_ms above ttft_p99_ms for this model: set both in this override, or change the "
                  "one it sets")]


def _find(items: tuple[_Item, ...], attribute: str, value: str, what: str) -> _Item:
    for item in items:
        if getattr(item, attribute) == value:
            return item
    known = ", ".join(getattr(item, attribute) for item in items)
    raise KeyError(f"no {what} {value!r} in the scenario (known: {known})")

"""A readable summary of a validated scenario: one row per section item.

Rows have the keys ``section``, ``name`` and ``details`` (a short ``key=value`` text),
so the same list renders as a rich table and as JSON. The order follows the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.slo import ClassSlo, target_field

if TYPE_CHECKING:
    from planner.scenario.model import Scenario
    from planner.scenario.regions import Quotas


def _num(value: float) -> str:
    return f"{value:g}"


def _quotas(quotas: Quotas) -> str:
    return ", ".join(f"{sku}={gpus}" for sku, gpus in sorted(quotas.items())) or "catalog"


def _slos(slo: ClassSlo) -> str:
    """The SLOs that are set, e.g. 'ttft_p99_ms=800; e2e_p99_ms=40000' (one not set is not checked)."""
    return "; ".join(f"{target_field(metric)}={_num(target)}" for metric, target in slo.targets())


def _overrides(scenario: Scenario, model: str) -> str:
    """The SLOs in effect where the model overrides its classes', e.g. 'slos[interactive]: ttft_p99_ms=1500'."""
    return "; ".join(f"slos[{name}]: {_slos(scenario.slo(model, name)).replace('; ', ', ')}"
                     for name in scenario.model(model).slos)


def _row(section: str, name: str, *details: str) -> dict[str, Any]:
    return {"section": section, "name": name, "details": "; ".join(d for d in details if d)}


def summary_rows(scenario: Scenario) -> list[dict[str, Any]]:
    rows = [
        _row(
            "scenario",
            scenario.name,
            f"horizon={scenario.horizon} ({scenario.horizon_hours} h)",
            f"seed={scenario.seeds.base}",
            scenario.description.strip(),
        )
    ]
    for region in scenario.regions.serving:
        rows.append(
            _row("serving", region.key, f"zone={region.zone}", f"quota_gpus={_quotas(dict(region.quotas))}")
        )
    for origin in scenario.regions.origins:
        nearest = scenario.eligible_serving(origin.name)
        reach = ", ".join(f"{key} {_num(scenario.rtt_ms(origin.name, key))} ms" for key in nearest)
        rows.append(
            _row(
                "origin",
                origin.name,
                f"zone={origin.zone}",
                f"residency={','.join(origin.residency)}",
                f"allowed serving (RTT)={reach}",
            )
        )
    for model in scenario.models:
        skus = ",".join(model.skus) if model.skus is not None else "any profiled SKU"
        tps = ",".join(map(str, model.tp)) if model.tp is not None else "any that fits"
        rows.append(_row("model", model.name, f"skus={skus}", f"engine={model.engine}", f"tp={tps}",
                         _overrides(scenario, model.name)))
    for klass in scenario.classes:
        rows.append(
            _row(
                "class",
                klass.name,
                f"share={_num(klass.share)}",
                f"weight={_num(klass.weight)}",
                _slos(ClassSlo.of(klass)),
                f"max_queue_wait_ms={_num(klass.max_queue_wait_ms)}",
                f"priority_jump={_num(klass.priority_jump)}",
                f"drr_quantum_tokens={klass.drr_quantum_tokens}",
                f"spot_tolerant={str(klass.spot_tolerant).lower()}",
                f"latency_budget_ms={_num(klass.latency_budget_ms)}",
                *([f"max_prompt_tokens={klass.max_prompt_tokens}"] if klass.max_prompt_tokens else []),
            )
        )
    policy = scenario.policy
    rows.append(
        _row(
            "policy",
            policy.name,
            f"prediction_noise_sigma={_num(policy.params.prediction_noise_sigma)}",
            f"aging_rate={_num(policy.params.aging_rate)}",
            f"trail_c={_num(policy.params.trail_c)}",
            f"admission kv_fraction={_num(policy.admission.kv_fraction)}",
            f"output_quantile_reserve={_num(policy.admission.output_quantile_reserve)}",
        )
    )
    capacity = scenario.capacity
    budget = "none" if capacity.budget_usd is None else f"{capacity.budget_usd:,.0f}"
    rows.append(
        _row(
            "capacity",
            "placement",
            f"tiers={','.join(capacity.tiers)}",
            f"utilisation_cap={_num(capacity.utilisation_cap)}",
            f"redundancy={capacity.redundancy}",
            f"min_replicas_per_pool={capacity.min_replicas_per_pool}",
            f"reserved_term={capacity.reserved_term}",
            f"forecast_quantile={_num(capacity.forecast_quantile)}",
            f"spot_reliable_fraction={_num(capacity.spot_reliable_fraction)}",
            f"switching_cost_usd={_num(capacity.switching_cost_usd)}",
            f"budget_usd={budget}",
            f"quota_gpus={_quotas(dict(capacity.quotas))}",
        )
    )
    return rows

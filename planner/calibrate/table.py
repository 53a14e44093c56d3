r"""The capacity table from calibrated mix rates, and what its files hold.

**Per-class coefficients.** Calibration finds λ*, the highest rate per replica of the *mix*
(class k a share p_k of requests) at which every SLO holds. Placement needs one coefficient
per class and charges a replica's load in the Mélange form Σ_k f_k / cap_k ≤ replicas
(``planner.placement.problem``, row (cap)). Take the analytic work per request of class k,
w_k = 1 / X_k (X_k the class's throughput ceiling, ``planner.placement.capacity``), its mean
over the mix w̄ = Σ_k p_k w_k = 1 / C (C the mix ceiling), and

    cap_k = λ* · w̄ / w_k = (λ* / C) · X_k = u* · X_k,        u* = λ* / C.

Then one replica carrying the calibrated mix at λ* (f_k = p_k λ*) is exactly full,

    Σ_k p_k λ* / cap_k = Σ_k p_k λ* w_k / (λ* w̄) = w̄ / w̄ = 1,

and classes keep their relative cost (cap_j / cap_k = X_j / X_k). In words: every class's
coefficient is its analytic ceiling scaled by u*, the fraction of the ceiling the SLOs allow
(``utilisation_at_capacity``). A class with share 0 in the mix still gets its row, by the same
relative cost; its own SLO was not checked (its ``class_share`` is 0). A class whose mean
request does not fit in KV (X_k = 0) gets no row. Placement then multiplies every
coefficient by ``capacity.utilisation_cap``.

**Pools.** With larger pool sizes calibrated (:mod:`.pools`), each unit has one set of rows per
size, ``pool_replicas`` saying which: the same formula with u*(N) = c(N) / C, c(N) the tabulated
(non-decreasing) rate per replica at that size.

Columns (units in names; ``data/README.md``, calibration section): model, sku, tp_degree
(GPUs per replica), pool_replicas (replicas in the pool the row was calibrated on), traffic_class,
max_rps_per_replica (= cap_k, req/s), engine, max_num_seqs, max_num_batched_tokens and
long_prefill_token_threshold (the engine setting calibration chose), policy, source,
mix_rps_per_replica (λ*), mix_rps_per_gpu (λ* / tp_degree), class_share (p_k),
class_ceiling_rps_per_replica (X_k), ceiling_rps_per_replica (C), utilisation_at_capacity (u*),
binding_class, binding_metric (ttft, tpot or e2e), simulations (replications run by the search),
cached (the unit's answer came from the cache; in memory and on the console only, not in the written files).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from planner.calibrate.inputs import UnitTask
from planner.calibrate.pools import tabulated_rates
from planner.placement.capacity import DECIMALS
from planner.run_state import RUN_STATE_KEYS, without_run_state
from planner.sim.replica.pool import ReplicaSpec
from planner.slo import SLO_METRICS

TABLE_COLUMNS = (
    "model", "sku", "tp_degree", "pool_replicas", "traffic_class", "max_rps_per_replica", "engine", "max_num_seqs",
    "max_num_batched_tokens", "long_prefill_token_threshold", "policy", "source", "mix_rps_per_replica",
    "mix_rps_per_gpu", "class_share",
    "class_ceiling_rps_per_replica", "ceiling_rps_per_replica", "utilisation_at_capacity", "binding_class",
    "binding_metric", "simulations", "cached",
)


@dataclass(frozen=True, eq=False)
class CalibrationResult:
    """The capacity table, JSON-able metadata, the units without rows and why, cache counts, and the units'
    tasks (in memory only: what a caller needs to simulate a unit again, e.g. at a planned load)."""

    table: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    n_simulated: int = 0
    n_cached: int = 0
    tasks: tuple[UnitTask, ...] = ()


def source_label(task: UnitTask) -> str:
    s = task.settings
    return (f"calibrated: bisection with common random numbers, p99 SLOs at {100 * s.confidence:g} % confidence "
            f"over {s.replications} replications of {s.duration_s:g} s; profile {task.profile_source}")


def chosen_replica(task: UnitTask, result: dict[str, Any]) -> ReplicaSpec:
    """The candidate whose engine setting the result chose."""
    for replica in task.candidates:
        if (replica.max_batch, replica.token_budget, replica.prefill_chunk_cap) == (
                result["max_num_seqs"], result["max_num_batched_tokens"], result["long_prefill_token_threshold"]):
            return replica
    raise ValueError(f"{task.label}: the result's setting is not among the candidates")


def unit_rows(task: UnitTask, result: dict[str, Any], cached: bool,
              pools: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The table rows of one calibrated unit (none for a failure), one set per pool size."""
    rate, ceiling = float(result["rate_rps_per_replica"]), float(result["ceiling_rps_per_replica"])
    if result["status"] == "infeasible" or not rate > 0 or not ceiling > 0:
        return []
    replica = chosen_replica(task, result)
    measured = pools["pools"] if pools is not None else []
    sizes = tabulated_rates(task.settings.pool_replicas, rate, measured)
    simulations = [int(result["simulations"])] + [int(p["simulations"]) for p in measured]
    binding = [(result["binding_class"], result["binding_metric"])] + [
        (p["binding_class"], p["binding_metric"]) for p in measured]
    rows = []
    for (size, size_rate), sims, (bound_class, bound_metric) in zip(sizes, simulations, binding, strict=True):
        if size_rate > 0:
            rows.extend(_size_rows(task, replica, size, size_rate, ceiling, sims, bound_class, bound_metric, cached))
    return rows


def _size_rows(task: UnitTask, replica: ReplicaSpec, size: int, rate: float, ceiling: float, simulations: int,
               binding_class: str, binding_metric: str, cached: bool) -> list[dict[str, Any]]:
    used = rate / ceiling
    rows = []
    for c in task.classes:
        class_ceiling = task.class_ceiling_rps(replica, c)
        cap = round(used * class_ceiling, DECIMALS)
        if not cap > 0:
            continue
        rows.append({
            "model": task.model, "sku": task.sku, "tp_degree": task.tp, "pool_replicas": size,
            "traffic_class": c.name,
            "max_rps_per_replica": cap, "engine": task.engine, "max_num_seqs": replica.max_batch,
            "max_num_batched_tokens": replica.token_budget,
            "long_prefill_token_threshold": replica.prefill_chunk_cap, "policy": task.settings.policy,
            "source": source_label(task), "mix_rps_per_replica": round(rate, DECIMALS),
            "mix_rps_per_gpu": round(rate / task.tp, DECIMALS), "class_share": c.share,
            "class_ceiling_rps_per_replica": round(class_ceiling, DECIMALS),
            "ceiling_rps_per_replica": round(ceiling, DECIMALS), "utilisation_at_capacity": round(used, DECIMALS),
            "binding_class": binding_class, "binding_metric": binding_metric,
            "simulations": simulations, "cached": bool(cached),
        })
    return rows


def build_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    frame = frame.sort_values(["model", "sku", "tp_degree", "pool_replicas", "traffic_class"],
                              kind="stable").reset_index(drop=True)
    return frame.astype({"tp_degree": "int64", "pool_replicas": "int64", "max_num_seqs": "int64",
                         "max_num_batched_tokens": "int64", "long_prefill_token_threshold": "int64",
                         "simulations": "int64", "cached": "bool"})


def unit_meta(task: UnitTask, result: dict[str, Any], cached: bool,
              pools: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the JSON beside the table says about one unit: every setting tried, the chosen one's trace, and its
    search at each larger pool size."""
    extra = {} if pools is None else {"pools": pools["pools"], "pool_cache_key": pools["key"],
                                      **({"pools_saturated": pools["saturated"]} if "saturated" in pools else {})}
    return {
        **extra,
        "model": task.model, "sku": task.sku, "tp_degree": task.tp, "engine": task.engine, "cache_key": task.key,
        "cached": cached, "status": result["status"], "reason": result["reason"],
        "max_num_seqs": result["max_num_seqs"], "max_num_batched_tokens": result["max_num_batched_tokens"],
        "long_prefill_token_threshold": result["long_prefill_token_threshold"],
        "mix_rps_per_replica": result["rate_rps_per_replica"],
        "ceiling_rps_per_replica": result["ceiling_rps_per_replica"], "simulations": result["simulations"],
        "binding_class": result["binding_class"], "binding_metric": result["binding_metric"],
        "profile_source": task.profile_source,
        "replica": {"kv_capacity_tokens": task.candidates[0].kv_capacity_tokens, "gpus": task.tp},
        "classes": {c.name: {"share": c.share, "prompt_mean_tokens": c.prompt_mean, "output_mean_tokens": c.output_mean,
                             **{f"{m}_p99_slo_ms": c.spec.slo.target(m) for m in SLO_METRICS},
                             "length_source": c.spec.workload.source, "prompt": c.spec.workload.prompt.describe(),
                             "output": c.spec.workload.output.describe()} for c in task.classes},
        "settings_tried": result["settings"],
        "trace": result["probes"],
    }


def _plain(value: Any) -> Any:
    """JSON-safe values: NaN and ±inf become null."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalar
        return _plain(value.item())
    return value


def calibration_files(result: CalibrationResult) -> tuple[pd.DataFrame, str]:
    """The table and the JSON text that ``planner calibrate`` writes.

    Both leave out the ``cached`` column and the cache and timing figures of the metadata:
    the same inputs and seed give the same bytes whether the answers came from the cache or not.
    """
    table = result.table.drop(columns=[c for c in RUN_STATE_KEYS if c in result.table.columns])
    payload = without_run_state({"meta": result.meta, "failures": result.failures, "rows": table.to_dict("records")})
    return table, json.dumps(_plain(payload), indent=2, sort_keys=True) + "\n"

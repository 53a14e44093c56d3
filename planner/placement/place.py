"""``planner place`` as a function: forecast + catalog + profiles + scenario → a checked plan.

``place_plan`` takes values and returns a :class:`PlacementResult`; it touches no files.
The shell (:mod:`planner.workflows.place`) writes the plan CSV, the flows CSV and the plan
JSON (:func:`plan_json_payload`), all or none, and the optional LP/MPS dump through the
``debug`` callback, which gets the instance and returns the names of the files it wrote.

Order of work: validate the capacity table (or build the analytic estimate), fold the
forecast into periods, assemble the instance, run the structural pre-checks (raising
``InfeasibleError`` with the demand and cause), solve (``solve.py``), diagnose an
infeasible solve by elastic slack, re-score the plan independently (``check.py``; a plan
that fails is never returned). The bounds and the single-SKU baseline are computed before
the check (beside the search, each in a worker process of its own, when the program is too
large to solve as one block: they need only the instance; the baseline's programs are then
solved block by block, as the search's are): when
the baseline's plan costs less than the searched one, that plan is the one returned, and
the plan JSON's ``notes`` and ``plan_source`` say so.

Limits (``limits.py``): every search, the bounds and the baseline included, stops at its
gap or its node limit, so the same inputs give the same plan, bounds and baseline on any
machine and under any load. ``time_limit_s`` is a wall-clock safety net over the whole
placement; if it stops any solver call, the plan JSON's ``reproducible`` is false and its
``warnings`` say which calls, and the CLI and the run history repeat the warning. The
bounds and the baseline have a net of their own, and a reference it stops is not reported;
a stopped baseline also makes the plan not reproducible, since a run that finished it
would return its plan if it were cheaper.

Capacities: without a capacity table the coefficients are the analytic estimate, which
no simulation has checked against the SLOs; the plan JSON says so (``slo_checked``
false, and a warning), and so do the CLI and the run history.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from planner import __version__
from planner.catalog import Catalog
from planner.contracts.columns import DEPLOYMENT_KEY, ENGINE_SETTING_COLUMNS
from planner.engine.processes import in_background
from planner.errors import InputError, PlannerError
from planner.placement import diagnose, highs_backend
from planner.placement.backends import BACKENDS, HIDDEN_BACKENDS
from planner.placement.bounds import SingleSku, best_single_sku, elastic_bound, reference_status, status_of
from planner.placement.capacity import (
    ANALYTIC_LABEL,
    TokenLengths,
    analytic_capacity,
    deployment_settings,
    pool_gains,
    validate_capacity,
)
from planner.placement.check import check_plan
from planner.placement.instance import PlacementInstance, build_instance
from planner.placement.limits import DEFAULT_NODE_LIMIT, DEFAULT_TIME_LIMIT_S, SafetyNet
from planner.placement.periods import Demand, demand_from_forecast, parse_periods
from planner.placement.problem import formulate
from planner.placement.reserved import evidence_scale, reserved_terms
from planner.placement.result import Fleet, PlacementResult, fleet_cost, plan_frames
from planner.placement.solve import DIRECT_MAX_INTEGERS, SolveSummary, gpu_use, solve_instance
from planner.placement.status import SolveStatus, classify
from planner.placement.window import PlanningWindow
from planner.profiles.deploy import Deployment
from planner.profiles.measured import MODEL_PATHS
from planner.scenario import Scenario, usable_profiles
from planner.workloads import Workload, default_notes, resolve_workloads

DEFAULT_SOLVER = "highs"
"""HiGHS holds the best bound of the three backends on the bundled scenarios
(``benchmarks/placement_speed.py --sections backends``) and takes arrays directly."""
DEFAULT_GAP = 0.02
DEFAULT_PERIODS = "how:4"
"""The defaults of ``planner place``, ``plan`` and ``report`` alike: hour-of-week blocks of
4 hours price a month exactly in 42 periods, and a 2 % gap is within the forecast's error."""
SOLVERS = BACKENDS
ANALYTIC_WARNING = ("capacities are analytic estimates (no --capacity table): the plan is not SLO-checked; "
                    "run `planner calibrate` and pass --capacity, or use `planner plan`, which simulates the plan")


def _capacity_table(scenario: Scenario, profiles: pd.DataFrame,
                    capacity: pd.DataFrame | None) -> tuple[pd.DataFrame, str, dict[str, Any]]:
    if capacity is not None:
        table = validate_capacity(capacity, where=capacity.attrs.get("source_path", "capacity table"))
        gains = {f"{m}/{s}/tp{g}": [[n, round(gain, 6)] for n, gain in steps]
                 for (m, s, g), steps in pool_gains(table).items()}
        return table, "capacity table", {"pool_gains": gains} if gains else {}
    lengths, workloads = analytic_lengths(scenario)
    table = analytic_capacity(profiles, lengths, kv_fraction=scenario.policy.admission.kv_fraction,
                              policy=scenario.policy.name)
    used: dict[str, dict[str, Any]] = {}
    for (model, klass), workload in workloads.items():
        used.setdefault(model, {})[klass] = {"prompt_tokens": round(lengths[(model, klass)].prompt_tokens, 1),
                                             "output_tokens": round(lengths[(model, klass)].output_tokens, 1),
                                             "source": workload.lengths.source}
    return table, ANALYTIC_LABEL, {"token_lengths": used, "length_defaults": default_notes(workloads)}


def analytic_lengths(scenario: Scenario) -> tuple[dict[tuple[str, str], TokenLengths], dict[tuple[str, str], Workload]]:
    """Each (model, class)'s mean prompt and output tokens for the analytic estimate, from its workload: every
    class the model serves (exit 3 for one without lengths), and the others that have lengths."""
    workloads = resolve_workloads(scenario, {m: scenario.model_mix(m) for m in scenario.model_names},
                                  include_idle=True)
    lengths = {pair: TokenLengths(w.lengths.prompt.mean(), w.lengths.output.mean()) for pair, w in workloads.items()}
    return lengths, workloads


def _table_sha256(frame: pd.DataFrame) -> str:
    return hashlib.sha256(frame.to_csv(index=False, lineterminator="\n").encode()).hexdigest()


def _check_solver(solver: str) -> None:
    if solver not in (*BACKENDS, *HIDDEN_BACKENDS):
        raise InputError(f"unknown solver {solver!r}", where="--solver", fix=f"use one of {', '.join(BACKENDS)}")


def _check_limits(node_limit: int, time_limit_s: float, gap: float, quantile: float | None) -> None:
    if not (isinstance(node_limit, int) and node_limit >= 1):
        raise InputError(f"node limit {node_limit} is not a positive whole number", where="--node-limit",
                         fix=f"pass e.g. --node-limit {DEFAULT_NODE_LIMIT}")
    if not (math.isfinite(time_limit_s) and time_limit_s > 0):
        raise InputError(f"time limit {time_limit_s} is not a positive number of seconds", where="--time-limit",
                         fix=f"pass e.g. --time-limit {DEFAULT_TIME_LIMIT_S:g}")
    if not (0 <= gap < 1):
        raise InputError(f"gap {gap} is outside [0, 1)", where="--gap", fix="pass a relative gap, e.g. --gap 0.01")
    if quantile is not None and not 0 < quantile < 1:
        raise InputError(f"quantile {quantile} is outside (0, 1)", where="--quantile",
                         fix="pass one of the forecast's quantiles, e.g. 0.95")


def place_plan(
    scenario: Scenario,
    forecast: pd.DataFrame,
    catalog: Catalog,
    profiles: pd.DataFrame,
    *,
    capacity: pd.DataFrame | None = None,
    solver: str = DEFAULT_SOLVER,
    node_limit: int = DEFAULT_NODE_LIMIT,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    gap: float = DEFAULT_GAP,
    quantile: float | None = None,
    periods: str = DEFAULT_PERIODS,
    debug: Callable[[PlacementInstance], list[str]] | None = None,
    input_hashes: dict[str, str] | None = None,
    baselines: bool = True,
    window: PlanningWindow | None = None,
    reserved_evidence: dict[str, Any] | None = None,
) -> PlacementResult:
    """Place replicas for the forecast; see the module docstring for the order of work.

    The plan covers the scenario's horizon, or exactly ``window``'s hours when given. ``reserved_evidence``
    (:func:`planner.placement.reserved.history_evidence`) limits reserved replicas on a short history.
    """
    _check_solver(solver)
    _check_limits(node_limit, time_limit_s, gap, quantile)
    net = SafetyNet.starting_now(time_limit_s)
    spec = parse_periods(periods)
    level = scenario.capacity.forecast_quantile if quantile is None else quantile
    profiles = usable_profiles(scenario, profiles)
    table, capacity_label, capacity_meta = _capacity_table(scenario, profiles, capacity)
    settings = deployment_settings(table, profiles)
    demand = demand_from_forecast(forecast, scenario, level, spec, window=window)
    inst = build_instance(scenario, demand, catalog, profiles, table)
    if reserved_evidence is not None and reserved_evidence["limited"]:
        inst = replace(inst, reserved_sustained_only=True,
                       reserved_load_scale=evidence_scale(inst, reserved_evidence))
    findings = diagnose.precheck(inst)
    if findings:
        diagnose.raise_infeasible(findings)
    debug_files = debug(inst) if debug is not None else []
    task = ReferenceTask(inst, solver, gap, node_limit, time_limit_s)
    summary, fleet, extra, notes = _solved(task, net, baselines)
    rental, switching = fleet_cost(inst, fleet)
    if inst.budget_usd is not None and rental + switching > inst.budget_usd * (1 + 1e-9):
        diagnose.raise_infeasible([diagnose.budget_finding(inst, max(summary.bound, 0.0))])
    plan, flows, loads = plan_frames(inst, fleet)
    plan = plan.merge(settings, on=list(DEPLOYMENT_KEY), how="left", validate="many_to_one")
    report = check_plan(plan, flows, loads, scenario=scenario, catalog=catalog, profiles=profiles, capacity=table,
                        demand=demand)
    if not report.ok:
        raise PlannerError("the plan failed its independent check: " + "; ".join(report.violations[:5]),
                           where="placement", fix="rerun with --debug and report the LP/MPS files with the command")
    warnings = [] if capacity is not None else [ANALYTIC_WARNING, *capacity_meta["length_defaults"]]
    hits = list(dict.fromkeys(net.hits))
    if hits:
        warnings.append(f"the wall-clock safety net (--time-limit {time_limit_s:g} s) stopped {len(hits)} solver "
                        f"call(s) ({'; '.join(hits[:3])}{'; ...' if len(hits) > 3 else ''}): this plan may differ "
                        "between runs; raise --time-limit, or lower --node-limit so the search ends on its own")
    limits = {"node_limit": node_limit, "time_limit_s": time_limit_s, "time_limit_hits": hits}
    meta = _meta(scenario, inst, demand, summary, solver, gap, limits, rental, switching, report.to_dict(),
                 capacity_label, capacity_meta, _table_sha256(table), input_hashes or {}, extra, debug_files)
    meta["slo_checked"] = capacity is not None
    meta["reproducible"] = not hits
    meta["deployments"] = _deployments(plan, profiles)
    meta["warnings"] = warnings
    meta["notes"] = notes
    meta["plan_source"] = "best_single_sku" if notes else "search"
    meta["reserved"] = reserved_terms(inst, scenario.capacity.reserved_term_hours, plan, reserved_evidence)
    periods_frame = pd.DataFrame({"period": list(inst.periods.labels), "hours": inst.periods.hours,
                                  "first_ts": list(inst.periods.first_ts)})
    return PlacementResult(plan, flows, loads, meta, summary.status, periods_frame)


@dataclass(frozen=True)
class ReferenceTask:
    """What the references of one placement need (it pickles, for a worker process)."""

    inst: PlacementInstance
    solver: str
    gap: float
    node_limit: int
    time_limit_s: float
    strategy: str = "auto"
    """How the baseline's programs are solved (``solve_instance``): as the search is, block by block, on a program
    too large for one block, where one block of every model stops at its node limit far from its gap."""


def references(task: ReferenceTask) -> tuple[SingleSku, dict[str, Any]]:
    """The single-SKU baseline and the elastic bound's figures, one after the other on a net of their own."""
    reference_net = SafetyNet.starting_now(task.time_limit_s)
    # the baseline first: its plan may replace the searched one, so the bound, which only
    # puts the cost in context, must not use up the net before it
    single = _baseline(task, reference_net)
    return single, elastic_bound(task.inst, reference_net)


def _baseline(task: ReferenceTask, net: SafetyNet | None = None) -> SingleSku:
    """The single-SKU baseline, on ``net`` (default: a net of its own)."""
    return best_single_sku(task.inst, backend=task.solver, gap=max(task.gap, 0.01), node_limit=task.node_limit,
                           net=net if net is not None else SafetyNet.starting_now(task.time_limit_s),
                           strategy=task.strategy)


def _elastic(task: ReferenceTask) -> dict[str, Any]:
    """The elastic bound, on a net of its own."""
    return elastic_bound(task.inst, SafetyNet.starting_now(task.time_limit_s))


def _solved(task: ReferenceTask, net: SafetyNet,
            baselines: bool) -> tuple[SolveSummary, Fleet, dict[str, Any], list[str]]:
    """The searched plan, with the references (when ``baselines``) and the baseline's plan when it is cheaper.

    On a program too large to solve as one block the references run beside the search, each in a process and on a
    net of its own (they need only the instance; the baseline's search outlasts the bound's, which then no longer
    waits for it); every solve stops at its own gap or node limit, so where it runs changes no figure."""
    inst = task.inst
    beside = baselines and formulate(inst, budget=False, cuts=False).n_integer > DIRECT_MAX_INTEGERS
    task = replace(task, strategy="decomposed") if beside else task
    with in_background(_baseline, task) if beside else contextlib.nullcontext() as single, \
            in_background(_elastic, task) if beside else contextlib.nullcontext() as bound:
        summary = solve_instance(inst, backend=task.solver, node_limit=task.node_limit, gap=task.gap, net=net)
        if summary.status == SolveStatus.INFEASIBLE or summary.fleet is None:
            _explain_failure(inst, summary.status, summary.message, summary.bound)
        if not baselines:
            return summary, summary.fleet, {}, []
        found = references(task) if single is None or bound is None else (single.result(), bound.result())
        return _with_references(inst, summary, summary.fleet, task.gap, net, *found)


def _with_references(inst: PlacementInstance, summary: SolveSummary, fleet: Fleet, gap: float, net: SafetyNet,
                     single: SingleSku,
                     elastic: dict[str, Any]) -> tuple[SolveSummary, Fleet, dict[str, Any], list[str]]:
    """The references beside the searched plan: the baseline's plan when it is the cheaper one, with a note."""
    if single.figures["status"] == "time_limit":  # a run that finished it could return its plan instead
        net.hits.append(f"the single-SKU baseline, whose plan replaces a dearer one ({single.figures['note']})")
    summary, fleet, note = _cheaper_plan(inst, summary, fleet, single, gap)
    return summary, fleet, {"elastic": elastic, "single_sku": single.figures}, [note] if note else []


SINGLE_SKU_RETURNED = "the single-SKU plan was cheaper: returned it"


def _cheaper_plan(inst: PlacementInstance, summary: SolveSummary, fleet: Fleet, single: SingleSku,
                  gap: float) -> tuple[SolveSummary, Fleet, str]:
    """The single-SKU baseline's plan when it costs less than the searched one (and fits the quotas), with a note.

    Both are plans of the same instance under the same rows; a node-limited search can end
    above a baseline that searched a smaller space. The search's bound stays a bound.
    """
    if single.fleet is None:
        return summary, fleet, ""
    ours, theirs = sum(fleet_cost(inst, fleet)), sum(fleet_cost(inst, single.fleet))
    if theirs >= ours - 1e-6 * max(1.0, ours) or (gpu_use(inst, single.fleet) > inst.quota_per_period()).any():
        return summary, fleet, ""
    bound = min(summary.bound, single.objective)
    status = classify(single.objective, bound, gap, bool(summary.time_limit_hits))
    returned = replace(summary, fleet=single.fleet, objective=single.objective, bound=bound, status=status,
                       message=SINGLE_SKU_RETURNED)
    return returned, single.fleet, SINGLE_SKU_RETURNED


def _deployments(plan: pd.DataFrame, profiles: pd.DataFrame) -> list[dict[str, Any]]:
    """Each (model, SKU, TP) the plan runs, with its engine settings and the command that deploys them."""
    used = plan.loc[:, [*DEPLOYMENT_KEY, *ENGINE_SETTING_COLUMNS]].drop_duplicates()
    memory = {(str(m), str(s), int(g), str(e)): float(u) for m, s, g, e, u in
              profiles[[*DEPLOYMENT_KEY, "engine", "gpu_memory_utilization"]].itertuples(index=False)}
    out = []
    for row in used.sort_values(list(DEPLOYMENT_KEY), kind="stable").itertuples(index=False):
        deployment = Deployment(str(row.model), str(row.sku), int(row.tp_degree), str(row.engine),
                                int(row.max_num_seqs), int(row.max_num_batched_tokens),
                                int(row.long_prefill_token_threshold))
        fraction = memory.get((deployment.model, deployment.sku, deployment.tp_degree, deployment.engine), 0.9)
        out.append({"model": deployment.model, "sku": deployment.sku, "tp_degree": deployment.tp_degree,
                    "engine": deployment.engine, "max_num_seqs": deployment.max_num_seqs,
                    "max_num_batched_tokens": deployment.max_num_batched_tokens,
                    "long_prefill_token_threshold": deployment.long_prefill_token_threshold,
                    "launch": deployment.launch_command(MODEL_PATHS.get(deployment.model, deployment.model), fraction)})
    return out


def _explain_failure(inst: PlacementInstance, status: SolveStatus, message: str, bound: float) -> NoReturn:
    """Raise the domain error for a solve without a plan: a diagnosis when it is infeasible.

    Causes are tried cheapest first: demand the elastic LP cannot place (quota); the
    budget against the LP's cheapest cost; demand the elastic MILP drops (whole replicas);
    else the budget against the solver's bound.
    """
    if status != SolveStatus.INFEASIBLE:
        raise PlannerError(f"no plan: {message or status.value}", where="placement",
                           fix="raise --node-limit, --time-limit or --gap, or use hour-of-week periods "
                               "(--periods how:4)")
    findings = diagnose.elastic(inst)
    if not findings and inst.budget_usd is not None:
        milp = formulate(inst, budget=False, cuts=False)
        lp = highs_backend.solve(milp.relaxed(), time_limit_s=DEFAULT_TIME_LIMIT_S, gap=0.01)
        cheapest = float(milp.cost_usd @ lp.x) if lp.x is not None else -math.inf
        if cheapest > inst.budget_usd:
            findings = [diagnose.budget_finding(inst, cheapest)]
    if not findings:
        findings = diagnose.elastic(inst, integer=True)
    if not findings and inst.budget_usd is not None:
        findings = [diagnose.budget_finding(inst, bound if math.isfinite(bound) else 0.0)]
    if not findings:
        raise PlannerError(f"the solver reports the placement infeasible but no cause was found ({message})",
                           where="placement", fix="rerun with --debug and inspect the LP/MPS files")
    diagnose.raise_infeasible(findings)


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def _meta(scenario: Scenario, inst: PlacementInstance, demand: Demand, summary: SolveSummary, solver: str, gap: float,
          limits: dict[str, Any], rental: float, switching: float, check: dict[str, Any], capacity_label: str,
          capacity_meta: dict[str, Any], capacity_sha: str, input_hashes: dict[str, str], extra: dict[str, Any],
          debug_files: list[str]) -> dict[str, Any]:
    total = rental + switching
    bounds = {"lp_relaxation_usd": _round(summary.lp_bound), "best_proven_usd": _round(summary.bound)}
    baselines: dict[str, Any] = {}
    if "elastic" in extra:
        bounds["perfectly_elastic"] = extra["elastic"]
        elastic_usd = extra["elastic"].get("usd")
        if elastic_usd is not None:
            bounds["best_proven_usd"] = _round(max(summary.bound, float(elastic_usd)))
    if "single_sku" in extra:
        single = extra["single_sku"]
        baselines["best_single_sku"] = single
        if single.get("usd"):
            baselines["savings_vs_single_sku_pct"] = round(100.0 * (1 - total / single["usd"]), 2)
    best_bound = bounds["best_proven_usd"] or -math.inf
    plan_gap = (summary.objective - best_bound) / max(abs(summary.objective), 1e-9) if math.isfinite(best_bound) \
        else math.inf
    bounds_status = {"lp_relaxation_usd": reference_status("optimal" if summary.lp_bound > -math.inf else "error"),
                     "best_proven_usd": status_of(summary.status, plan_gap)}
    return {
        "planner_version": __version__,
        "scenario": scenario.name,
        "backend": solver,
        "strategy": summary.strategy,
        "status": summary.status.value,
        "objective": _round(summary.objective, 4),
        "bound": _round(summary.bound, 4),
        "gap": _round((summary.objective - best_bound) / max(abs(summary.objective), 1e-9), 6)
        if math.isfinite(best_bound) else None,
        "gap_target": gap,
        **limits,
        "solve_time_s": round(summary.seconds, 3),
        "cost_usd": {"rental": round(rental, 2), "switching": round(switching, 2), "total": round(total, 2)},
        "lower_bounds": bounds,
        "lower_bounds_status": bounds_status,
        "baselines": baselines,
        "blocks": [block.to_dict() for block in summary.blocks],
        "quota_repaired": summary.repaired_quota,
        **({"pool_steps": summary.pool_steps} if summary.pool_steps else {}),
        "capacity_source": capacity_label,
        "capacity": {**capacity_meta, "utilisation_cap": scenario.capacity.utilisation_cap,
                     "table_sha256": capacity_sha},
        "demand": {"quantile": demand.quantile, "column": demand.column, "periods": demand.periods.spec,
                   "n_periods": len(demand.periods), "hours": float(demand.periods.hours.sum()),
                   "forecast_hours_used": demand.forecast_hours_used,
                   "forecast_hours_given": demand.forecast_hours_given,
                   "series_without_forecast": list(demand.series_without_forecast),
                   "peak_rps": round(float(demand.rps.sum(axis=(0, 1, 2)).max()), 6) if demand.rps.size else 0.0},
        "problem": {"units": inst.n_units, "excluded_units": len(inst.excluded),
                    "redundancy": inst.redundancy, "spot_reliable_fraction": inst.spot_fraction,
                    "switching_cost_usd": inst.switching_cost_usd, "budget_usd": inst.budget_usd,
                    "latency_penalty_usd_per_request_ms": inst.latency_penalty,
                    "instance_packing": "not modelled: priced per GPU-hour"},
        "check": check,
        "inputs_sha256": dict(sorted(input_hashes.items())),
        "debug_files": debug_files,
    }


def plan_json_payload(result: PlacementResult, plan_name: str, flows_name: str) -> dict[str, Any]:
    """The plan JSON: the metadata, the summary table, the periods and the names of the files beside it."""
    return {**result.meta, "summary": result.summary_rows(),
            "periods": _records(result.periods), "files": {"plan": plan_name, "flows": flows_name}}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{key: (float(v) if isinstance(v, np.floating) else v) for key, v in row.items()}
            for row in frame.to_dict("records")]

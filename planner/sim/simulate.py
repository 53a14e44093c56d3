"""``planner simulate``: check a plan's replicas against each class's SLO by simulation.

For one planning period, every serving (region, model) of the plan becomes a pool of
replicas: each deployment's replicas (one SKU, TP degree and engine setting; all tiers
together) are a sub-pool with that profile and setting, and the router spreads requests
over all replicas of the pool. The engine and its settings come from the plan's
``engine``, ``max_num_seqs`` and ``max_num_batched_tokens`` columns when it has them, else
from the scenario's engine for the model and the profile's defaults. The pool receives, per
traffic class, the arrival rate that placement routed to that serving region in the chosen
window (``demand``: region = serving key, model, traffic_class, rps). It is simulated with
the scenario's policy, admission control and class SLOs (:mod:`planner.sim.replica`),
``replications`` times, and each class is reported as meeting or missing each SLO in effect
for the pool's model (``Scenario.slo``: the class's, with the model's overrides).

Demand that reaches a (region, model) without replicas is reported as fully rejected
(``no_replicas``), never dropped. Spot replicas are simulated as available for the whole
run (placement already counts only a fraction of them); a class with no traffic is
``no_traffic`` and counts as met. Randomness: the pool (region, model) draws from
``SeedSequence(seed, spawn_key=(crc32(region), crc32(model)))``, so a pool's results do
not depend on which other pools the plan has.

Fan-out: every (pool, replication) is one task of :func:`planner.engine.run_tasks` carrying
the pool's :class:`PoolConfig` and replication i's child of the pool's seed (``spawn``, as a
serial run draws them), so ``local``, ``processes`` and ``dask`` give byte-identical
results. The engine is not recorded in the result for that reason.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from planner import __version__
from planner.catalog import Catalog
from planner.contracts import ENGINE_SETTING_COLUMNS, SUMMARY_KEY
from planner.engine import check_engine, run_tasks
from planner.errors import InputError
from planner.profiles import profile_for
from planner.scenario import Scenario
from planner.sim.class_reuse import ENGINE_BLOCK_TOKENS
from planner.sim.plan_input import validated_plan, validated_rates
from planner.sim.policies import PolicySpec, get_policy, policy_values
from planner.sim.replica.pool import (
    ClassSpec,
    PoolConfig,
    ReplicaSpec,
    check_config,
)
from planner.sim.replica.routing import router_code
from planner.sim.replica.run import (
    NOT_SET,
    ReplicationTask,
    replication_tasks,
    run_replication_task,
    summarise_pool,
)
from planner.sim.result import SimulationResult
from planner.sim.windows import PEAK, TROUGH, WINDOW_CHOICES, trough_period
from planner.sim.work import SIM_DURATION_OPTION, PoolWork, check_work
from planner.sim.workload import ClassWorkload
from planner.slo import SLO_METRICS, met_column, p99_column, target_column, verdict_column
from planner.sources import source_of
from planner.workloads import Workload, default_notes, resolve_workloads

__all__ = ["SimulationResult", "pool_seed", "select_window", "simulate_plan"]

PLAN_COLUMNS = ("period", "region", "sku", "model", "tier", "replicas", "gpus", "usd")
"""What a plan must give; ``tp_degree`` and the engine settings are optional (:mod:`.plan_input`)."""
DEMAND_COLUMNS = (*SUMMARY_KEY, "rps")
RATE_COLUMNS = ("rps", "flow_rps")
WARMUP_FRACTION = 0.1
_BLOCK = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)(\d{2})(?:\+(\d+)h)?$")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str, fix: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"the {what} lacks column(s) {', '.join(missing)}", where=what, fix=fix)


def _plan_rows(plan: pd.DataFrame, period: str | None) -> tuple[str, pd.DataFrame]:
    plan = validated_plan(plan, PLAN_COLUMNS)
    periods = list(dict.fromkeys(plan["period"].astype(str)))
    if period is None:
        if len(periods) > 1:
            raise InputError(f"the plan has {len(periods)} periods", where="plan",
                             fix="pass the rows of one period (select_window returns which one)")
        period = periods[0] if periods else ""
    return str(period), plan[plan["period"].astype(str) == str(period)].reset_index(drop=True)


def _price(catalog: Catalog, region: str, sku: str, tier: str) -> float:
    offers = catalog.offers
    match = offers[(offers["region_key"] == region) & (offers["sku"] == sku) & (offers["tier"] == tier)]
    if match.empty:
        raise InputError(f"no catalog offer for {sku} ({tier}) in {region}", where="plan",
                         fix="plan only offers the catalog has (`planner catalog --region ...`)")
    return float(match["usd_per_gpu_hour"].iloc[0])


def _settings(sub: pd.DataFrame) -> tuple[int | None, int | None, int]:
    """The plan's batch cap, token budget and prefill threshold for one deployment; None (or 0 for the
    threshold, which is off by default) for the profile's defaults."""
    chosen = []
    for column in ENGINE_SETTING_COLUMNS[1:]:
        value = int(pd.to_numeric(sub[column], errors="coerce").fillna(0).iloc[0])
        chosen.append(value if value > 0 else None)
    return chosen[0], chosen[1], chosen[2] or 0


def _pools(rows: pd.DataFrame, profiles: pd.DataFrame, catalog: Catalog,
           scenario: Scenario) -> dict[tuple[str, str], list[ReplicaSpec]]:
    pools: dict[tuple[str, str], list[ReplicaSpec]] = {}
    rows = rows.assign(**{c: rows[c] if c in rows.columns else "" for c in ENGINE_SETTING_COLUMNS})
    for (region, model), group in rows[rows["replicas"] > 0].groupby(["region", "model"], sort=True):
        specs = []
        for (sku, tp, engine, *_), sub in group.groupby(["sku", "tp_degree", *ENGINE_SETTING_COLUMNS], sort=True,
                                                        dropna=False):
            engine = str(engine) if str(engine) not in ("", "nan") else scenario.model(str(model)).engine
            profile = profile_for(profiles, str(model), str(sku), int(tp), engine)
            count = int(sub["replicas"].sum())
            usd = sum(int(r.replicas) * int(tp) * _price(catalog, str(region), str(sku), str(r.tier))
                      for r in sub.itertuples(index=False))
            max_batch, budget, threshold = _settings(sub)
            specs.append(ReplicaSpec.of(profile, count, max_batch=max_batch, token_budget=budget,
                                        prefill_chunk_cap=threshold, usd_per_replica_hour=usd / count))
        pools[(str(region), str(model))] = specs
    return pools


def _demand_rates(demand: pd.DataFrame, scenario: Scenario) -> dict[tuple[str, str], dict[str, float]]:
    _require(demand, DEMAND_COLUMNS, "demand", "pass region (serving key), model, traffic_class, rps; "
                                               "select_window builds it from the placement flows")
    rps = pd.to_numeric(demand["rps"], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~(np.isfinite(rps) & (rps >= 0)))
    if bad.size:
        raise InputError(f"rps must be a number >= 0, got {demand['rps'].iloc[bad[0]]!r}",
                         where=f"demand, row {bad[0] + 1}, column 'rps'", fix="give requests per second")
    unknown = sorted(set(demand["traffic_class"].astype(str)) - set(scenario.class_names))
    if unknown:
        raise InputError(f"demand has class(es) {', '.join(unknown)} the scenario does not declare",
                         where="demand", fix=f"use the scenario's classes: {', '.join(scenario.class_names)}")
    frame = demand.assign(rps=rps).groupby(["region", "model", "traffic_class"], sort=True)["rps"].sum()
    rates: dict[tuple[str, str], dict[str, float]] = {}
    for (region, model, klass), value in frame.items():
        rates.setdefault((str(region), str(model)), {})[str(klass)] = float(value)
    return rates


def _unserved_rows(region: str, model: str, rates: dict[str, float], classes: tuple[str, ...], scenario: Scenario,
                   window_s: float) -> list[dict[str, Any]]:
    """Demand at a (region, model) without replicas: every request rejected, so every SLO that is set is missed."""
    rows = []
    for name in classes:
        rate = rates.get(name, 0.0)
        slo = scenario.slo(model, name)
        targets = {m: slo.target(m) for m in SLO_METRICS}
        row: dict[str, Any] = {"region": region, "model": model, "traffic_class": name, "replicas": 0,
                               "offered_rps": rate, "arrived": rate * window_s, "rejected": rate * window_s,
                               "rejected_fraction": 1.0 if rate > 0 else math.nan, "completed": 0.0}
        row.update({p99_column(m): math.inf if rate > 0 else math.nan for m in SLO_METRICS})
        row.update({target_column(m): math.nan if t is None else t for m, t in targets.items()})
        row.update({met_column(m): t is None or rate == 0 for m, t in targets.items()})
        row.update({verdict_column(m): NOT_SET if t is None else "no_replicas" if rate > 0 else "no_traffic"
                    for m, t in targets.items()})
        row["slo_met"] = rate == 0
        rows.append(row)
    return rows


def _mark_no_traffic(per_class: pd.DataFrame) -> None:
    """A class that saw no request meets its SLOs by having no traffic, on every metric that is set."""
    idle = per_class["arrived"] == 0
    for metric in SLO_METRICS:
        checked = idle & (per_class[verdict_column(metric)] != NOT_SET)
        per_class.loc[checked, verdict_column(metric)] = "no_traffic"
        per_class.loc[idle, met_column(metric)] = True
    per_class.loc[idle, "slo_met"] = True


def pool_seed(seed: int, region: str, model: str) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=(zlib.crc32(region.encode()), zlib.crc32(model.encode())))


def simulate_plan(
    scenario: Scenario,
    plan: pd.DataFrame,
    demand: pd.DataFrame,
    profiles: pd.DataFrame,
    catalog: Catalog,
    *,
    policy: str | None = None,
    duration_s: float = 3600.0,
    replications: int = 5,
    seed: int,
    histogram: pd.DataFrame | None = None,
    engine: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    period: str | None = None,
    routing: str | None = None,
    router_d: int = 2,
    warmup_s: float | None = None,
    arrival: str = "poisson",
    arrival_cv: float = 1.0,
    arrival_trace_s: np.ndarray | None = None,
    mixes: Mapping[str, Mapping[str, float]] | None = None,
) -> SimulationResult:
    """Simulate every serving (region, model) of one plan period at ``demand``; see module doc.

    ``arrival`` is ``poisson``, ``gamma`` (with ``arrival_cv``) or ``trace``: replay
    ``arrival_trace_s`` (e.g. :func:`planner.workflows.inputs.read_trace_times` of an Azure log),
    time-scaled to each pool's total rate. ``routing`` is a rule of
    :data:`planner.sim.replica.routing.ROUTERS` (default: the scenario's ``[policy.routing]``); the warm-up
    defaults to 10 % of the duration and
    is excluded from every metric.

    A model's pools simulate the classes it has traffic in: a positive share in ``mixes`` (model -> class ->
    share, e.g. :func:`planner.workloads.forecast_mixes` of the forecast the plan was placed on) or a positive
    rate in ``demand``. Any other (model, class) pair has no traffic: no row, no verdict (``meta["no_traffic"]``).

    ``engine`` (``local``, ``processes``, ``dask`` or ``auto``), ``workers`` and ``scheduler``
    say where the (pool x replication) tasks run (:func:`planner.engine.run_tasks`);
    ``progress(done, total)`` is called per finished replication. None of them changes the
    result: every replication carries its own child seed.
    """
    check_engine(engine, scheduler, workers)
    if not duration_s > 0 or replications < 1:
        raise InputError("duration must be > 0 and replications >= 1", where=f"{SIM_DURATION_OPTION}/--replications",
                         fix=f"e.g. {SIM_DURATION_OPTION} 1h --replications 5")
    routing = scenario.policy.routing.router if routing is None else routing
    router_code(routing)
    spec = get_policy(policy if policy is not None else scenario.policy.name)
    warmup = WARMUP_FRACTION * duration_s if warmup_s is None else float(warmup_s)
    period_label, rows = _plan_rows(plan, period)
    pools = _pools(rows, profiles, catalog, scenario)
    rates = _demand_rates(demand, scenario)
    served = served_classes(scenario, rates, mixes)
    workloads = resolve_workloads(scenario, {m: dict.fromkeys(k, 1.0) for m, k in served.items()}, histogram=histogram)
    trace = tuple(np.asarray(arrival_trace_s, dtype=float)) if arrival_trace_s is not None else None
    template = replace(_template(scenario, spec, duration_s, warmup), router=routing, router_d=router_d,
                       arrival_kind=arrival, arrival_cv=arrival_cv, arrival_trace_s=trace)
    configs = _pool_configs(scenario, pools, rates, workloads, served, template)
    check_work([PoolWork(f"{region} / {model}", sum(s.count * s.max_batch for s in config.replicas),
                         sum(c.rate_rps for c in config.classes)) for (region, model), (config, _) in configs.items()],
               duration_s=duration_s, replications=replications, size_where=source_of(plan, "plan"))
    tasks: list[ReplicationTask] = []
    for (region, model), (config, _) in configs.items():
        tasks += replication_tasks(config, replications, pool_seed(seed, region, model))
    metrics = run_tasks(run_replication_task, tasks, engine=engine, workers=workers, progress=progress,
                        scheduler=scheduler)
    keys = sorted(set(pools) | set(rates))
    per_class, pool_meta = _summaries(scenario, keys, configs, rates, served, metrics, replications,
                                      duration_s - warmup)
    meta = {
        "scenario": scenario.name, "period": period_label, "policy": spec.name, "routing": routing,
        "router_d": router_d, "duration_s": duration_s, "warmup_s": warmup, "replications": replications,
        "seed": seed, "arrival": arrival, "arrival_cv": arrival_cv, "version": __version__,
        **_workload_meta(scenario, template, workloads, served, histogram is not None), "pools": pool_meta,
    }
    return SimulationResult(per_class, meta)


def _template(scenario: Scenario, spec: PolicySpec, duration_s: float, warmup_s: float) -> PoolConfig:
    """A pool without replicas or classes under the scenario's policy, admission control and router weights."""
    params, admission = scenario.policy.params, scenario.policy.admission
    return PoolConfig(
        (), (), spec, duration_s=duration_s, warmup_s=warmup_s, kv_fraction=admission.kv_fraction,
        output_quantile_reserve=admission.output_quantile_reserve, policy_params=policy_values(params.model_dump()),
        prediction_sigma=params.prediction_noise_sigma, router=scenario.policy.routing.router,
        router_overlap_weight=scenario.policy.routing.overlap_weight)


def _workload_meta(scenario: Scenario, template: PoolConfig, workloads: Mapping[tuple[str, str], Workload],
                   served: Mapping[str, tuple[str, ...]], histogram: bool) -> dict[str, Any]:
    """The admission and policy settings, where the lengths came from, and the pairs without traffic."""
    return {
        "kv_fraction": template.kv_fraction, "output_quantile_reserve": template.output_quantile_reserve,
        "prediction_noise_sigma": template.prediction_sigma, **template.policy_params,
        "length_source": "ingest histogram" if histogram else "scenario declarations or built-in laws",
        "length_defaults": default_notes(workloads),
        "no_traffic": [{"model": m, "traffic_class": k} for m in scenario.model_names for k in scenario.class_names
                       if k not in served.get(m, ())],
    }


PoolConfigs = dict[tuple[str, str], tuple[PoolConfig, dict[str, ClassWorkload]]]
"""Per served (region, model): its pool and the length laws of its classes."""


def served_classes(scenario: Scenario, rates: dict[tuple[str, str], dict[str, float]],
                   mixes: Mapping[str, Mapping[str, float]] | None) -> dict[str, tuple[str, ...]]:
    """Per model, the classes with traffic (scenario order): a positive share in ``mixes`` or a positive rate."""
    served: dict[str, tuple[str, ...]] = {}
    for model in scenario.model_names:
        mix = (mixes or {}).get(model, {})
        rated = {k for (_, m), per in rates.items() if m == model for k, v in per.items() if v > 0}
        chosen = tuple(k for k in scenario.class_names if float(mix.get(k, 0.0)) > 0 or k in rated)
        if chosen:
            served[model] = chosen
    return served


def _pool_configs(scenario: Scenario, pools: dict[tuple[str, str], list[ReplicaSpec]],
                  rates: dict[tuple[str, str], dict[str, float]], workloads: Mapping[tuple[str, str], Workload],
                  served: Mapping[str, tuple[str, ...]], template: PoolConfig) -> PoolConfigs:
    """One pool per (region, model) with replicas and traffic: ``template``'s settings, its replicas, the rates
    of the classes its model has traffic in."""
    configs: PoolConfigs = {}
    for key in sorted(pools):
        region, model = key
        if model not in served:
            continue
        pool_rates = rates.get(key, {})
        laws = {k: workloads[(model, k)].lengths for k in served[model]}
        classes = tuple(ClassSpec.of(scenario.traffic_class(k), scenario.slo(model, k), pool_rates.get(k, 0.0),
                                     laws[k], workloads[(model, k)].reuse) for k in served[model])
        spec = scenario.model(model)
        replicas = tuple(replace(r, prefix_caching=spec.prefix_caching) for r in pools[key])
        config = replace(template, replicas=replicas, classes=classes, block_tokens=ENGINE_BLOCK_TOKENS[spec.engine])
        check_config(config)
        configs[key] = (config, laws)
    return configs


def _summaries(scenario: Scenario, keys: list[tuple[str, str]], configs: PoolConfigs,
               rates: dict[tuple[str, str], dict[str, float]], served: Mapping[str, tuple[str, ...]],
               metrics: list[Any], replications: int, window_s: float) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Per-class rows and per-pool metadata of every (region, model), in ``keys`` order; ``metrics`` holds
    ``replications`` results per pool of ``configs``, in the same order."""
    frames: list[pd.DataFrame] = []
    pool_meta: list[dict[str, Any]] = []
    done = 0
    for key in keys:
        region, model = key
        if key not in configs:
            if model not in served:
                continue
            frames.append(pd.DataFrame(_unserved_rows(region, model, rates.get(key, {}), served[model], scenario,
                                                      window_s)))
            pool_meta.append({"region": region, "model": model, "replicas": {}, "note": "demand but no replicas"})
            continue
        config, laws = configs[key]
        result = summarise_pool(config, metrics[done:done + replications], labels={"region": region, "model": model})
        done += replications
        frames.append(result.per_class)
        pool_meta.append({
            "region": region, "model": model,
            "replicas": {f"{s.sku} x{s.tp}": s.count for s in config.replicas},
            "settings": {f"{s.sku} x{s.tp}": {"max_num_seqs": s.max_batch, "max_num_batched_tokens": s.token_budget,
                                              "long_prefill_token_threshold": s.prefill_chunk_cap}
                         for s in config.replicas},
            "usd_per_hour": sum(s.count * s.usd_per_replica_hour for s in config.replicas),
            "reserved_output_tokens": dict(zip(served[model], config.reserve_tokens().tolist(), strict=True)),
            "length_laws": {k: {"source": w.source, "prompt": w.prompt.describe(), "output": w.output.describe()}
                            for k, w in laws.items()},
            **result.pool,
        })
    per_class = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not per_class.empty:
        _mark_no_traffic(per_class)
    return per_class, pool_meta


def _rate_column(frame: pd.DataFrame, where: str) -> np.ndarray:
    """Requests per second of every row, each checked (a NaN rate is an error, not zero demand)."""
    for column in RATE_COLUMNS:
        if column in frame.columns:
            return validated_rates(frame, column, where)
    if "mean" in frame.columns:  # a forecast: requests per hour
        return validated_rates(frame, "mean", where) / 3600.0
    raise InputError("no arrival-rate column", where=where,
                     fix=f"give one of {', '.join(RATE_COLUMNS)} (req/s) or a forecast's 'mean' (req/h)")


def _hour_of_week(ts: pd.Timestamp) -> int:
    return int(ts.day_of_week) * 24 + int(ts.hour)


def _period_for(window: str, labels: list[str]) -> str:
    stamp = pd.to_datetime(window, utc=True, errors="coerce")
    if pd.isna(stamp):
        raise InputError(f"cannot read the window {window!r}", where="--window",
                         fix=f"use {WINDOW_CHOICES}")
    iso = f"{stamp.floor('h'):%Y-%m-%dT%H:%M:%SZ}"
    if iso in labels:
        return iso
    how = _hour_of_week(stamp)
    for label in labels:
        match = _BLOCK.match(label)
        if match:
            start = _DAYS.index(match.group(1)) * 24 + int(match.group(2))
            if start <= how < start + int(match.group(3) or 1):
                return label
    raise InputError(f"no plan period contains {iso}", where="--window",
                     fix=f"use '{PEAK}', '{TROUGH}' or a time inside one of the periods: {', '.join(labels[:6])}")


def _trough(labels: list[str], totals: pd.Series, where: str) -> str:
    """The plan period with the least routed demand above zero."""
    period = trough_period(pd.Series([float(totals.get(p, 0.0)) for p in labels], index=labels, dtype=float))
    if period is None:
        raise InputError("no plan period has any demand, so there is no trough to simulate", where=where,
                         fix="pass the flows of this plan, or --window peak")
    return period


def select_window(plan: pd.DataFrame, flows_or_forecast: pd.DataFrame,
                  window: str = "peak") -> tuple[str, pd.DataFrame]:
    """(period, demand) for the chosen window.

    ``flows_or_forecast`` has region (serving key), model, traffic_class, a rate (``rps`` or
    ``flow_rps`` in req/s, or a forecast's ``mean`` in req/h) and ``period`` (or ``ts``,
    taken as the period label); any other column (e.g. origin) is summed over.
    ``window="peak"`` takes the plan period with the largest total rate (the first on a
    tie); ``"trough"`` the one with the least rate above zero (:func:`~planner.sim.windows.trough_period`);
    an ISO time takes the period labelled with that hour, or the hour-of-week block
    ("Mon08+4h") containing it. Returns demand with columns region, model, traffic_class, rps.
    """
    where = source_of(flows_or_forecast, "flows")
    frame = flows_or_forecast.reset_index(drop=True)
    if "period" not in frame.columns and "ts" in frame.columns:
        stamps = pd.to_datetime(frame["ts"], utc=True, errors="coerce")
        frame["period"] = stamps.dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    _require(frame, ("period", "region", "model", "traffic_class"), where,
             "pass the placement flows (period, region, model, traffic_class, rps)")
    frame["rps"] = _rate_column(frame, where)
    not_serving = sorted({r for r in frame["region"].astype(str) if ":" not in r})
    if not_serving:
        raise InputError(f"regions {', '.join(not_serving[:4])} are not serving keys", where=where,
                         fix="pass flows at serving regions ('<cloud>:<region>'), not origin demand")
    frame["period"] = frame["period"].astype(str)
    labels = list(dict.fromkeys(plan["period"].astype(str))) if "period" in plan.columns else []
    labels = labels or list(dict.fromkeys(frame["period"]))
    if window in (PEAK, TROUGH):
        totals = frame[frame["period"].isin(labels)].groupby("period", sort=False)["rps"].sum()
        if totals.empty:
            raise InputError("no flows in any plan period", where="flows", fix="pass the flows of this plan")
        if window == PEAK:
            period = max(labels, key=lambda p: (totals.get(p, -1.0), -labels.index(p)))
        else:
            period = _trough(labels, totals, where)
    else:
        period = _period_for(window, labels)
    chosen = frame[frame["period"] == period]
    demand = chosen.groupby(["region", "model", "traffic_class"], sort=True)["rps"].sum().reset_index()
    return period, demand

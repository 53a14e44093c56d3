"""Calibrate one unit, (model, SKU, TP, engine), over its engine settings: the search and its outcome.

:func:`calibrate_unit` is the task :func:`planner.engine.run_tasks` fans out: a top-level
function of one picklable :class:`~planner.calibrate.inputs.UnitTask`, returning a dict of
plain values (what the cache stores and the table is built from). The dict goes through a
JSON round trip before it is returned, so a result read back from the cache is the same
value, bit for bit, as one just computed.

**Which engine setting.** Each setting s (batch cap, token budget) has an analytic ceiling
C_s of the mix (:mod:`planner.profiles.throughput`) and, once searched, a calibrated rate
λ*_s (:mod:`.search`). The unit keeps the setting with the highest λ*_s: on a fixed TP
degree, the most SLO-compliant requests per GPU-hour. With pruning on, a setting is searched
only if it can beat the best λ* found so far, λ_b:

1. **by the step-time model**: skipped when C_s · :data:`CEILING_MARGIN` ≤ λ_b (1 + tol).
   Queueing and latency only take away from the ceiling, so λ*_s ≤ C_s up to the
   ceiling's own approximations, which the margin covers;
2. **by one probe**: else it is simulated once at λ_b (1 + tol), on the same requests as
   every other setting (common random numbers); if an SLO misses there it cannot beat λ_b
   by more than the search's own tolerance, and is skipped. If every SLO holds, its search
   starts from that probe.

**The same simulation twice.** vLLM's long-prefill threshold caps a prefill chunk only when
more tokens than the threshold remain to prefill, which is never more than a request's
prompt plus, once preempted and recomputed, its output so far. Where the longest prompt and
output any class can draw (its length laws' caps, or its declared reuse's longest prompt)
add up to no more than the threshold, the threshold never acts: with pruning on, such a
setting is left out, unsimulated, as the same simulation as the one without it.

**In which order.** Pruning pays only once λ_b is high, so the setting most likely to win is
searched first. The ceiling does not tell which: settings differ by a few per cent in
throughput and by several times in latency (a long prompt's prefill that holds up every
short one's first token). So, with pruning on and more than one setting that fits, each is
**screened**: replication 0 of a probe at one common rate, :data:`SCREEN_FRACTION` of the
median ceiling of the settings (common random numbers: the same requests for every
setting), scored by its worst p99 over the SLO among the metrics its classes set (+∞ for
rejections). Settings are then taken by increasing score, ties by decreasing ceiling. The
screen only orders: what is searched and pruned follows the two rules above, so any order
gives a setting within the tolerance of the best (if the rate is monotone, exactly as
before). A screen's row is the same replication a probe at that rate reads first, kept in
the probe store like any other.

Without pruning every setting is searched in full, in order of decreasing ceiling, unscreened;
``benchmarks/calibration_search.py``
checks that both choose settings of the same rate within the tolerance. The ``settings``
list of the result says what happened to each setting and why.

The **binding** class and metric are the ones that stop the rate from rising: among the
bounds of the lowest rate seen to miss (the bracket's hi), the largest U_km / SLO_km, over
the metrics each class sets (``ttft``, ``tpot`` or ``e2e``: one not set never binds); a tie
(e.g. two classes both with rejections, U = +∞) goes to the larger ratio at λ* (lo), then to
the first in class order. At the growth limit no rate missed and the ratios at λ* decide.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections.abc import Collection
from typing import Any

from planner.calibrate.inputs import UnitTask
from planner.calibrate.probe import Bound, Probe, first_replication, probe
from planner.calibrate.probe_memo import ProbeStore, Row
from planner.calibrate.search import (
    FLOOR_FRACTION,
    GROWTH,
    GROWTH_LIMIT,
    INFEASIBLE,
    MAX_GROWTHS,
    SearchOutcome,
    bisect_capacity,
)
from planner.sim.replica.pool import ReplicaSpec

CEILING_MARGIN = 1.25
"""How far above its analytic ceiling a setting's calibrated rate is allowed to be before pruning
could be wrong: the ceiling counts each request's mean KV where admission reserves its p95
output, and prefill chunks at their mean cost."""

SCREEN_FRACTION = 0.3
"""The screen's rate as a fraction of the median analytic ceiling of the unit's settings: loaded enough that a
long prefill holds up short prompts, light enough that most settings serve it without rejections (the demo's
units picked the same setting at 0.15, 0.3 and 0.5)."""


def _number(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def probe_record(p: Probe) -> dict[str, Any]:
    """One line of the bisection trace (null = unbounded: rejections or too few requests)."""
    worst = p.worst
    return {
        "rate_rps_per_replica": p.rate_rps,
        "ok": p.ok,
        "run_length_s": p.run_length_s,
        "replications": p.replications_run,
        "worst_class": worst.traffic_class,
        "worst_metric": worst.metric,
        "worst_upper_over_slo": _number(worst.ratio),
        "worst_note": worst.why,
        "arrivals_per_replication": p.arrivals_per_replication,
        "p99_upper_ms": {b.traffic_class + "." + b.metric: _number(b.upper_ms) for b in p.bounds},
        "p99_mean_ms": {b.traffic_class + "." + b.metric: _number(b.mean_ms) for b in p.bounds},
    }


def _miss_text(bound: Bound, confidence: float) -> str:
    what = f"class {bound.traffic_class!r} misses its {bound.metric.upper()} p99 SLO of {bound.slo_ms:g} ms"
    if math.isinf(bound.upper_ms):
        return f"{what}: {bound.why}"
    over = 100.0 * (bound.upper_ms / bound.slo_ms - 1.0)
    return f"{what}: upper {100 * confidence:g} % bound {bound.upper_ms:.0f} ms (+{over:.0f} %)"


def binding_bound(hi: Probe | None, lo: Probe) -> Bound:
    """The bound that stops the rate from rising (module docstring)."""
    if hi is None:
        return lo.worst
    at_lo = {(b.traffic_class, b.metric): b.ratio for b in lo.bounds}
    return max(hi.bounds, key=lambda b: (b.ratio, at_lo.get((b.traffic_class, b.metric), 0.0)))


def _setting(replica: ReplicaSpec) -> dict[str, int]:
    return {"max_num_seqs": replica.max_batch, "max_num_batched_tokens": replica.token_budget,
            "long_prefill_token_threshold": replica.prefill_chunk_cap}


def _searched(task: UnitTask, replica: ReplicaSpec, ceiling: float, outcome: SearchOutcome[Probe]) -> dict[str, Any]:
    """The outcome of one setting's search: rate, status, why, binding bound and trace."""
    out: dict[str, Any] = {**_setting(replica), "ceiling_rps_per_replica": ceiling, "status": outcome.status,
                           "rate_rps_per_replica": outcome.rate_rps,
                           "simulations": sum(p.replications_run for p in outcome.probes),
                           "probes": [probe_record(p) for p in outcome.probes]}
    if outcome.status == INFEASIBLE or outcome.lo is None:
        miss = outcome.probes[-1].worst
        out["reason"] = (f"no rate down to {100 * FLOOR_FRACTION:g} % of the analytic ceiling meets the SLOs: at "
                         f"{outcome.probes[-1].rate_rps:.4g} req/s per replica, "
                         + _miss_text(miss, task.settings.confidence))
        out["binding_class"], out["binding_metric"] = miss.traffic_class, miss.metric
        return out
    bound = binding_bound(outcome.hi, outcome.lo)
    out["reason"] = "" if outcome.status != GROWTH_LIMIT else (
        f"every SLO still holds at {GROWTH:g}^{MAX_GROWTHS} times the analytic ceiling; the answer is capped "
        "there (the profile's step-time model may be pessimistic)")
    out["binding_class"], out["binding_metric"] = bound.traffic_class, bound.metric
    return out


def _skipped(replica: ReplicaSpec, ceiling: float, why: str, simulations: int = 0) -> dict[str, Any]:
    return {**_setting(replica), "ceiling_rps_per_replica": ceiling, "status": "pruned", "reason": why,
            "rate_rps_per_replica": 0.0, "simulations": simulations}


def _same_text(task: UnitTask, replica: ReplicaSpec, twin: ReplicaSpec) -> str:
    return (f"the same simulation as {twin.max_batch}/{twin.token_budget}/0: no request has more than "
            f"{longest_prefill_tokens(task):,} tokens to prefill (longest prompt and output), so the long-prefill "
            f"threshold of {replica.prefill_chunk_cap:,} never caps a chunk")


def _no_fit(task: UnitTask, replica: ReplicaSpec) -> str:
    blocked = [c.name for c in task.active if task.class_ceiling_rps(replica, c) <= 0]
    return (f"class(es) {', '.join(blocked)}: a mean request does not fit in the KV budget of one replica "
            f"(kv_fraction {task.settings.kv_fraction:g} of {replica.kv_capacity_tokens} tokens)")


def longest_prefill_tokens(task: UnitTask) -> int:
    """The most tokens one request of the unit's active classes can have left to prefill (module docstring)."""
    longest = 0
    for c in task.active:
        prompt = c.spec.workload.prompt.longest()
        if c.spec.reuse is not None:
            prompt = max(prompt, c.spec.reuse.max_prompt_tokens)
        longest = max(longest, prompt + c.spec.workload.output.longest())
    return longest


def same_simulations(task: UnitTask) -> dict[int, int]:
    """Setting i -> setting j when i is j with a long-prefill threshold that never acts (module docstring); none
    with pruning off, where every setting is searched."""
    if not task.settings.prune:
        return {}
    longest = longest_prefill_tokens(task)
    without = {(r.max_batch, r.token_budget): j for j, r in enumerate(task.candidates) if r.prefill_chunk_cap == 0}
    return {i: without[(r.max_batch, r.token_budget)] for i, r in enumerate(task.candidates)
            if 0 < longest <= r.prefill_chunk_cap and (r.max_batch, r.token_budget) in without}


def worst_over_slo(task: UnitTask, row: Row) -> float:
    """The largest p99 / SLO in one replication's row over the active classes and the metrics each sets (+∞ for a
    class whose requests were rejected or that saw none)."""
    worst = 0.0
    for c in task.active:
        for metric, slo in c.spec.slo.targets():
            value = row[c.name][metric]
            worst = max(worst, value / slo if math.isfinite(value) else math.inf)
    return worst


def screen(task: UnitTask, ceilings: list[float], memo: ProbeStore | None = None,
           left_out: Collection[int] = ()) -> tuple[float, dict[int, float]]:
    """The screen's rate and the score of each fitting setting not ``left_out`` (module docstring); no rate and no
    scores when the order cannot matter (pruning off, or fewer than two such settings)."""
    fitting = [i for i, c in enumerate(ceilings) if c > 0 and i not in left_out]
    if not task.settings.prune or len(fitting) < 2:
        return 0.0, {}
    rate = SCREEN_FRACTION * float(statistics.median(ceilings[i] for i in fitting))
    return rate, {i: worst_over_slo(task, first_replication(task, task.candidates[i], rate, memo)) for i in fitting}


def calibrate_unit(task: UnitTask, memo: ProbeStore | None = None) -> dict[str, Any]:
    """Search the unit's settings (module docstring) and return its outcome as plain values; replications in
    ``memo`` are read, not simulated (:mod:`.probe_memo`)."""
    s = task.settings
    ceilings = [task.mix_ceiling_rps(r) for r in task.candidates]
    same = same_simulations(task)
    screen_rate, scores = screen(task, ceilings, memo, left_out=same)
    order = sorted(range(len(task.candidates)), key=lambda i: (i in same, scores.get(i, math.inf), -ceilings[i], i))
    tried: dict[int, dict[str, Any]] = {}
    best: int | None = None
    for i in order:
        replica, ceiling = task.candidates[i], ceilings[i]
        if i in same:
            tried[i] = _skipped(replica, ceiling, _same_text(task, replica, task.candidates[same[i]]))
            continue
        if ceiling <= 0:
            tried[i] = {**_skipped(replica, ceiling, _no_fit(task, replica)), "status": INFEASIBLE,
                        "binding_metric": "kv"}
            continue
        start = None
        if best is not None and s.prune:
            bar = tried[best]["rate_rps_per_replica"] * (1.0 + s.rel_tol)
            if ceiling * CEILING_MARGIN <= bar:
                tried[i] = _skipped(replica, ceiling, f"its analytic ceiling {ceiling:.4g} req/s (x{CEILING_MARGIN:g}) "
                                                      f"cannot beat the best calibrated {bar / (1 + s.rel_tol):.4g}")
                continue
            challenge = probe(task, replica, bar, memo)
            if not challenge.ok:
                tried[i] = _skipped(replica, ceiling, f"misses an SLO at {bar:.4g} req/s, above the best calibrated "
                                                      f"rate: {_miss_text(challenge.worst, s.confidence)}",
                                    challenge.replications_run)
                continue
            start = challenge
        outcome = bisect_capacity(functools.partial(probe, task, replica, store=memo), ceiling, s.rel_tol, start)
        tried[i] = _searched(task, replica, ceiling, outcome)
        if tried[i]["status"] != INFEASIBLE and (
                best is None or tried[i]["rate_rps_per_replica"] > tried[best]["rate_rps_per_replica"]):
            best = i
    settings = [{**{k: v for k, v in tried[i].items() if k != "probes"}, **_screened(tried[i], scores.get(i))}
                for i in range(len(task.candidates))]
    base = {"model": task.model, "sku": task.sku, "tp_degree": task.tp, "engine": task.engine, "key": task.key,
            "simulations": sum(t["simulations"] for t in settings), "settings": settings,
            "screen_rps_per_replica": screen_rate, "searched_order": order}
    if best is None:
        worst = tried[order[0]]
        out = {**base, **_setting(task.candidates[order[0]]), "status": INFEASIBLE, "rate_rps_per_replica": 0.0,
               "ceiling_rps_per_replica": ceilings[order[0]], "reason": worst["reason"],
               "binding_class": worst.get("binding_class", ""), "binding_metric": worst.get("binding_metric", ""),
               "probes": worst.get("probes", [])}
        if worst["binding_metric"] == "kv" and not out["binding_class"]:
            out["binding_class"] = [c.name for c in task.active
                                    if task.class_ceiling_rps(task.candidates[order[0]], c) <= 0][0]
        return _plain(out)
    chosen = tried[best]
    out = {**base, **_setting(task.candidates[best]), "status": chosen["status"],
           "rate_rps_per_replica": chosen["rate_rps_per_replica"], "ceiling_rps_per_replica": ceilings[best],
           "reason": chosen["reason"], "binding_class": chosen["binding_class"],
           "binding_metric": chosen["binding_metric"], "probes": chosen["probes"]}
    return _plain(out)


def _screened(record: dict[str, Any], score: float | None) -> dict[str, Any]:
    """A setting's screen score (null: +∞) and its replication counted among its simulations; nothing when it was
    not screened."""
    if score is None:
        return {}
    return {"screen_worst_over_slo": _number(score), "simulations": record["simulations"] + 1}


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    """The record as JSON would give it back (numpy scalars and tuples become plain values and lists)."""
    plain: dict[str, Any] = json.loads(json.dumps(record))
    return plain

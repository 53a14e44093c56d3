"""Calibrate one (model, SKU): the search over probes, and its outcome as plain JSON-able values.

:func:`calibrate_pair` is the task :func:`planner.engine.run_tasks` fans out: a top-level
function of one picklable :class:`~planner.calibrate.inputs.PairTask`, returning a dict of
plain values (what the cache stores and the table is built from). The dict goes through a
JSON round trip before it is returned, so a result read back from the cache is the same
value, bit for bit, as one just computed.

The **binding** class and metric are the ones that stop the rate from rising: among the
bounds of the lowest rate seen to miss (the bracket's hi), the largest U_km / SLO_km, over
the metrics each class sets (``ttft``, ``tpot`` or ``e2e``: one not set never binds); a tie
(e.g. two classes both with rejections, U = +∞) goes to the larger ratio at λ* (lo), then to
the first in class order. At the growth limit no rate missed and the ratios at λ* decide.
"""

from __future__ import annotations

import json
import math
from typing import Any

from planner.calibrate.inputs import PairTask
from planner.calibrate.probe import Bound, Probe, probe
from planner.calibrate.search import (
    FLOOR_FRACTION,
    GROWTH,
    GROWTH_LIMIT,
    INFEASIBLE,
    MAX_GROWTHS,
    bisect_capacity,
)


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


def _binding(hi: Probe | None, lo: Probe) -> Bound:
    if hi is None:
        return lo.worst
    at_lo = {(b.traffic_class, b.metric): b.ratio for b in lo.bounds}
    return max(hi.bounds, key=lambda b: (b.ratio, at_lo.get((b.traffic_class, b.metric), 0.0)))


def calibrate_pair(task: PairTask) -> dict[str, Any]:
    """Search one pair (see :mod:`.search`) and return its outcome (see the module docstring)."""
    ceiling = task.mix_ceiling_rps()
    base: dict[str, Any] = {"model": task.model, "sku": task.sku, "key": task.key,
                            "ceiling_rps_per_replica": ceiling}
    if ceiling <= 0:
        blocked = [c.name for c in task.active if c.ceiling_rps <= 0]
        reason = (f"class(es) {', '.join(blocked)}: a mean request does not fit in the KV budget of one "
                  f"replica (kv_fraction {task.settings.kv_fraction:g} of {task.replica.kv_capacity_tokens} tokens)")
        out = {**base, "status": INFEASIBLE, "rate_rps_per_replica": 0.0, "simulations": 0, "reason": reason,
               "binding_class": blocked[0], "binding_metric": "kv", "probes": []}
        return json.loads(json.dumps(out))
    outcome = bisect_capacity(lambda rate: probe(task, rate), ceiling, task.settings.rel_tol)
    simulations = sum(p.replications_run for p in outcome.probes)
    out = {**base, "status": outcome.status, "rate_rps_per_replica": outcome.rate_rps, "simulations": simulations,
           "probes": [probe_record(p) for p in outcome.probes]}
    if outcome.status == INFEASIBLE or outcome.lo is None:
        miss = outcome.probes[-1].worst
        out["reason"] = (f"no rate down to {100 * FLOOR_FRACTION:g} % of the analytic ceiling meets the SLOs: at "
                         f"{outcome.probes[-1].rate_rps:.4g} req/s per replica, "
                         + _miss_text(miss, task.settings.confidence))
        out["binding_class"], out["binding_metric"] = miss.traffic_class, miss.metric
    else:
        bound = _binding(outcome.hi, outcome.lo)
        out["reason"] = "" if outcome.status != GROWTH_LIMIT else (
            f"every SLO still holds at {GROWTH:g}^{MAX_GROWTHS} times the analytic ceiling; the answer is capped "
            "there (the profile's step-time model may be pessimistic)")
        out["binding_class"], out["binding_metric"] = bound.traffic_class, bound.metric
    return json.loads(json.dumps(out))

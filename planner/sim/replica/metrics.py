"""Per-class metrics of one replication, and their means with 95 % confidence intervals.

Latency metrics count the requests that **arrived** in the measurement window
[warm-up, duration); the run continues past the duration until every request has left,
so none is censored. For a served request j (times in seconds, reported in ms):

* queue wait = first admission − arrival;  TTFT = first token − arrival;
* e2e = last token − arrival;  TPOT = (e2e − TTFT) / (output tokens − 1) for outputs > 1.

Rejected requests (wait past ``max_queue_wait_ms``, or too large for the KV budget) have
no latency; they are counted, and the SLO check treats them as infinitely late for every
metric of :data:`planner.slo.SLO_METRICS`: ``slo_ttft_p99_ms`` is the 99th percentile of
TTFT over all arrivals with rejections at +∞ (so more than 1 % rejected misses any SLO),
likewise ``slo_tpot_p99_ms`` over the arrivals with more than one output token plus the
rejections, and ``slo_e2e_p99_ms``. A metric's SLO is met when that p99 is at most its
target; with replications, ``*_verdict`` is ``met`` when the upper end of the 95 % interval
is within the SLO, ``missed`` when the lower end is above it, and ``uncertain`` otherwise.
These p99s are measured whether or not the class sets the metric's SLO; only the set ones
are checked.

Goodput is the rate of window arrivals that met every SLO their class sets: first token
within ``ttft_p99_ms``, TPOT within ``tpot_p99_ms`` (a one-token answer has no TPOT and
cannot miss it), last token within ``e2e_p99_ms``. Throughput is output tokens generated
during the window per second. Pool-level figures (same on every class row of a pool):
replica utilisation = busy time / window (a replica is busy while a step runs, which under
continuous batching is whenever it holds a request), mean batch = time-average requests in
a replica's running batch, KV utilisation = time-average KV tokens held / capacity, KV peak =
the largest KV occupancy of any step / capacity, and cost per million output tokens =
pool USD per hour × window hours / (window output tokens / 10⁶).

With prefix data (:mod:`.prefix`), over the window arrivals that were admitted: per class
``prompt_tokens``, ``prefix_cached_tokens`` (served from the cache at their first admission),
``prefix_hit_rate`` = cached / prompt tokens, ``prefill_tokens_computed`` (every prefill token
run, recompute after preemption included) and ``prefill_tokens_saved`` (cached tokens over
every admission); per pool ``prefix_hit_rate`` and ``prefix_hit_rate_by_replica`` (one rate per
replica, in the order of ``PoolConfig.expanded``). Without prefix data these columns are absent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.sim.replica.pool import Replication
from planner.sim.replica.state import (
    A_AREA,
    A_LAST,
    DONE,
    F_ADMIT,
    F_EXIT,
    F_FIRST,
    I_CLS,
    I_COMPUTED,
    I_HIT,
    I_OUT,
    I_PRE_KV,
    I_PRE_POL,
    I_PROMPT,
    I_REASON,
    I_REP,
    I_SAVED,
    I_STATUS,
    P_CAP,
    P_MAXKV,
    P_STEPS,
    Q_BATCHAREA,
    Q_BUSY,
    Q_KVAREA,
    REASON_TOO_LARGE,
    REASON_WAIT,
    State,
)
from planner.sim.stats import littles_law, replication_ci
from planner.slo import SLO_METRICS, ClassSlo, p99_column

LATENCIES = ("ttft", "tpot", "e2e", "queue_wait")
STATS = ("mean", "p50", "p95", "p99", "max")


def _summary(values_s: np.ndarray) -> dict[str, float]:
    if values_s.size == 0:
        return {s: math.nan for s in STATS}
    ms = values_s * 1000.0
    p50, p95, p99 = np.percentile(ms, [50.0, 95.0, 99.0])
    return {"mean": float(ms.mean()), "p50": float(p50), "p95": float(p95), "p99": float(p99), "max": float(ms.max())}


def _p99_with_rejections(values_s: np.ndarray, rejected: int) -> float:
    """p99 in ms over served + rejected requests, rejections at +inf."""
    n = values_s.size + rejected
    if n == 0:
        return math.nan
    full = np.concatenate([values_s * 1000.0, np.full(rejected, np.inf)])
    return float(np.percentile(full, 99.0, method="inverted_cdf"))


def good_requests(latency_s: dict[str, np.ndarray], slo: ClassSlo) -> int:
    """Served requests that meet every SLO that is set.

    ``latency_s`` holds, per metric, one value per served request, NaN where the request has
    no such latency (a one-token answer's TPOT), which then cannot miss.
    """
    good = np.ones(len(next(iter(latency_s.values()))), dtype=bool)
    for metric, target_ms in slo.targets():
        good &= ~(latency_s[metric] * 1000.0 > target_ms)
    return int(good.sum())


def _prefix_figures(st: State, mine: np.ndarray) -> dict[str, float]:
    """Prefix-cache figures of the admitted requests among ``mine`` (module docstring)."""
    took = mine & ~np.isnan(st.req_f[:, F_ADMIT])
    prompt = int(st.req_i[took, I_PROMPT].sum())
    cached = int(st.req_i[took, I_HIT].sum())
    return {"prompt_tokens": prompt, "prefix_cached_tokens": cached,
            "prefix_hit_rate": cached / prompt if prompt else math.nan,
            "prefill_tokens_computed": int(st.req_i[took, I_COMPUTED].sum()),
            "prefill_tokens_saved": int(st.req_i[took, I_SAVED].sum())}


def _pool_prefix(st: State, in_window: np.ndarray) -> dict[str, Any]:
    figures = _prefix_figures(st, in_window)
    by_replica = tuple(_prefix_figures(st, in_window & (st.req_i[:, I_REP] == r))["prefix_hit_rate"]
                       for r in range(st.rep_i.shape[0]))
    return {"prefix_hit_rate": figures["prefix_hit_rate"], "prefix_hit_rate_by_replica": by_replica,
            "prefill_tokens_saved": figures["prefill_tokens_saved"]}


@dataclass(frozen=True)
class ClassLatencies:
    """One class's window arrivals: which were served, how many were rejected and why, and the served
    requests' latencies in seconds (TPOT over the outputs longer than one token)."""

    served: np.ndarray
    rejected_wait: int
    rejected_large: int
    ttft: np.ndarray
    tpot: np.ndarray
    e2e: np.ndarray

    @property
    def rejected(self) -> int:
        return self.rejected_wait + self.rejected_large

    def slo_p99s(self) -> dict[str, float]:
        """``slo_<metric>_p99_ms`` of every metric: its p99 with the rejections at +∞."""
        measured = {"ttft": self.ttft, "tpot": self.tpot, "e2e": self.e2e}
        return {p99_column(m): _p99_with_rejections(measured[m], self.rejected) for m in SLO_METRICS}


def _class_latencies(st: State, mine: np.ndarray) -> ClassLatencies:
    served = mine & (st.req_i[:, I_STATUS] == DONE)
    first, exit_, arrival, out = st.req_f[:, F_FIRST], st.req_f[:, F_EXIT], st.arrival, st.req_i[:, I_OUT]
    multi = served & (out > 1)
    return ClassLatencies(served, int((mine & (st.req_i[:, I_REASON] == REASON_WAIT)).sum()),
                          int((mine & (st.req_i[:, I_REASON] == REASON_TOO_LARGE)).sum()),
                          first[served] - arrival[served], (exit_[multi] - first[multi]) / (out[multi] - 1),
                          exit_[served] - arrival[served])


def class_p99s(rep: Replication) -> list[dict[str, float]]:
    """Per class, its window arrivals (``arrived``) and the SLO p99 of every metric with rejections at +∞
    (``slo_<metric>_p99_ms``), as :func:`replication_metrics` gives them: what a calibration probe reads."""
    st, w0, w1 = rep.state, rep.config.warmup_s, rep.config.duration_s
    in_window = (st.arrival >= w0) & (st.arrival < w1)
    rows = []
    for k in range(len(rep.config.classes)):
        mine = in_window & (st.req_i[:, I_CLS] == k)
        rows.append({"arrived": int(mine.sum()), **_class_latencies(st, mine).slo_p99s()})
    return rows


def replication_metrics(rep: Replication) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """(one dict per class, pool-level dict) for one replication."""
    cfg, st = rep.config, rep.state
    w0, w1 = cfg.warmup_s, cfg.duration_s
    window = w1 - w0
    arrival = st.arrival
    in_window = (arrival >= w0) & (arrival < w1)
    exit_, admit, out = st.req_f[:, F_EXIT], st.req_f[:, F_ADMIT], st.req_i[:, I_OUT]
    tokens_total = int(st.tokens_win.sum())
    usd_per_hour = sum(s.count * s.usd_per_replica_hour for s in cfg.replicas)
    cap = st.rep_i[:, P_CAP].astype(np.float64)
    pool = {
        "replica_utilisation": float((st.rep_f[:, Q_BUSY] / window).mean()),
        "kv_utilisation": float((st.rep_f[:, Q_KVAREA] / (window * cap)).mean()),
        "kv_peak_fraction": float((st.rep_i[:, P_MAXKV] / cap).max()),
        "mean_batch": float((st.rep_f[:, Q_BATCHAREA] / window).mean()),
        "steps": float(st.rep_i[:, P_STEPS].sum()),
        "throughput_tokens_per_s": tokens_total / window,
        "cost_usd_per_m_output_tokens": (usd_per_hour * window / 3600.0) / (tokens_total / 1e6)
        if tokens_total > 0 else math.nan,
    }
    # Little's law: the engine's own integral of N(t) against the per-request records
    t_end = float(st.acc_f[A_LAST])
    sojourn_sum = float(np.sum(exit_ - arrival))
    lam_w = sojourn_sum / t_end if t_end > 0 else math.nan
    pool["littles_residual_run"] = (st.acc_f[A_AREA] / t_end - lam_w) / lam_w if lam_w > 0 else math.nan
    pool["littles_residual_window"] = littles_law(arrival, exit_, w0, w1).relative_residual
    with_prefix = rep.sample.has_prefix
    if with_prefix:
        pool.update(_pool_prefix(st, in_window))
    rows = []
    for k, klass in enumerate(cfg.classes):
        mine = in_window & (st.req_i[:, I_CLS] == k)
        c = _class_latencies(st, mine)
        served, rej_wait, rej_large = c.served, c.rejected_wait, c.rejected_large
        ttft, tpot, e2e = c.ttft, c.tpot, c.e2e
        tpot_served = np.full(ttft.size, np.nan)  # one-token answers have no TPOT
        tpot_served[out[served] > 1] = tpot
        wait = admit[served] - arrival[served]
        arrived = int(mine.sum())
        good = good_requests({"ttft": ttft, "tpot": tpot_served, "e2e": e2e}, klass.slo)
        row: dict[str, float] = {
            "arrived": arrived,
            "arrival_rate_rps": arrived / window,
            "completed": int(served.sum()),
            "rejected": rej_wait + rej_large,
            "rejected_wait": rej_wait,
            "rejected_too_large": rej_large,
            "rejected_fraction": (rej_wait + rej_large) / arrived if arrived else math.nan,
            "preemptions_kv": int(st.req_i[mine, I_PRE_KV].sum()),
            "preemptions_policy": int(st.req_i[mine, I_PRE_POL].sum()),
            "throughput_tokens_per_s": float(st.tokens_win[k]) / window,
            "goodput_rps": good / window,
            "goodput_fraction": good / arrived if arrived else math.nan,
        }
        if with_prefix:
            row.update(_prefix_figures(st, mine))
        row.update(c.slo_p99s())
        for name, values in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e), ("queue_wait", wait)):
            for stat, value in _summary(values).items():
                row[f"{name}_{stat}_ms"] = value
        rows.append(row)
    return rows, pool


def combine(values: list[float]) -> tuple[float, float]:
    """(mean, 95 % half-width) over replications; +inf if any replication is +inf."""
    x = np.asarray(values, dtype=np.float64)
    if np.isposinf(x).any():
        return math.inf, math.inf
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return math.nan, math.nan
    ci = replication_ci(finite)
    return ci.mean, ci.half_width


def verdict(values: list[float], slo_ms: float) -> str:
    """``met``/``missed``/``uncertain`` for a per-replication p99 against its SLO (module docstring)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0 or np.isnan(x).all():
        return "uncertain"
    if np.isposinf(x).all():
        return "missed"
    if np.isposinf(x).any():
        return "uncertain"
    mean, half = combine(values)
    if mean + half <= slo_ms:
        return "met"
    if mean - half > slo_ms:
        return "missed"
    return "uncertain"

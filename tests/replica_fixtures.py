"""Small replica pools shared by the replica-model tests (profiles are the bundled real ones)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.profiles import load_profiles, profile_for
from planner.sim.policies import get_policy
from planner.sim.replica.engine import run_pool
from planner.sim.replica.pool import ClassSpec, PoolConfig, ReplicaSpec, draw_sample, engine_state
from planner.sim.replica.state import (
    F_ADMIT,
    F_EXIT,
    F_FIRST,
    I_COMPUTED,
    I_GEN,
    I_HIT,
    I_PRE_KV,
    I_PRE_POL,
    I_REASON,
    I_REP,
    I_SAVED,
    I_STATUS,
    P_CFREE,
    P_MAXKV,
    P_STEPS,
    Q_BATCHAREA,
    Q_BUSY,
    Q_KVAREA,
)
from planner.sim.workload import default_workload
from planner.slo import ClassSlo

PROFILES = load_profiles()
# (name, share, weight, priority_jump, DRR quantum, max wait ms): the demo scenario's classes
CLASSES = (("interactive", 0.5, 8.0, 3.0, 8192, 1500.0), ("standard", 0.35, 2.0, 1.0, 4096, 10000.0),
           ("batch", 0.15, 0.5, 0.0, 1024, 30000.0))
SLO = ClassSlo(ttft_p99_ms=800.0, e2e_p99_ms=20000.0)


TP = {"llama-3.1-70b": 4, "llama-3.1-8b": 1}


def replica(sku: str, count: int, model: str = "llama-3.1-70b", kv: int | None = None) -> ReplicaSpec:
    p = profile_for(PROFILES, model, sku, TP[model], "vllm")
    spec = ReplicaSpec.of(p, count, usd_per_replica_hour=10.0 * count)
    return spec if kv is None else replace(spec, kv_capacity_tokens=kv)


def pool(rate: float, policy: str = "fcfs", router: str = "jsq", *, replicas=None, duration: float = 120.0,
         kv: int | None = None, kv_fraction: float = 0.85, reserve: float = 0.95, sigma: float = 0.5,
         trail_c: float = 0.5, max_wait_scale: float = 1.0, model: str = "llama-3.1-70b",
         slo: ClassSlo = SLO, chunk_cap: int = 0) -> PoolConfig:
    classes = tuple(ClassSpec(n, rate * share, w, pj, q, mw * max_wait_scale, slo,
                              default_workload(n, model)) for n, share, w, pj, q, mw in CLASSES)
    reps = replicas or (replica("H100", 2, model, kv), replica("A100-80GB", 1, model, kv))
    reps = tuple(replace(r, prefill_chunk_cap=chunk_cap) for r in reps) if chunk_cap else reps
    return PoolConfig(tuple(reps), classes, get_policy(policy), duration_s=duration, warmup_s=duration / 10,
                      router=router, kv_fraction=kv_fraction, output_quantile_reserve=reserve,
                      prediction_sigma=sigma, policy_params={"trail_c": trail_c})


def run(config: PoolConfig, seed: int = 7):
    """(sample, final engine state) for one replication."""
    sample = draw_sample(config, np.random.SeedSequence(seed))
    state, hkey, hid = engine_state(config, sample)
    run_pool(state, hkey, hid)
    return sample, state


def outputs(st) -> dict[str, np.ndarray]:
    """The compiled engine's results in the reference's layout (``Reference.arrays``)."""
    return {
        "status": st.req_i[:, I_STATUS], "reason": st.req_i[:, I_REASON], "rep": st.req_i[:, I_REP],
        "gen": st.req_i[:, I_GEN], "pre_kv": st.req_i[:, I_PRE_KV], "pre_pol": st.req_i[:, I_PRE_POL],
        "admit": st.req_f[:, F_ADMIT], "first": st.req_f[:, F_FIRST], "exit": st.req_f[:, F_EXIT],
        "busy": st.rep_f[:, Q_BUSY], "kv_area": st.rep_f[:, Q_KVAREA], "batch_area": st.rep_f[:, Q_BATCHAREA],
        "steps": st.rep_i[:, P_STEPS], "max_kv": st.rep_i[:, P_MAXKV], "tokens_win": st.tokens_win,
        "area": st.acc_f[:1], "hit": st.req_i[:, I_HIT], "saved": st.req_i[:, I_SAVED],
        "computed": st.req_i[:, I_COMPUTED], "cfree": st.rep_i[:, P_CFREE],
    }


def matches_reference(config: PoolConfig, seed: int = 7):
    """Run ``config`` in the compiled engine and in the pure-Python reference; every output array must agree."""
    from sim_replica_reference import Reference

    sample = draw_sample(config, np.random.SeedSequence(seed))
    state, hkey, hid = engine_state(config, sample)
    fresh, _, _ = engine_state(config, sample)
    run_pool(state, hkey, hid)
    expected = Reference(fresh).run().arrays()
    got = outputs(state)
    for name, value in expected.items():
        assert np.array_equal(got[name], value, equal_nan=True), name
    return state

"""Static batches on the replica model, against Splitwise's measured end-to-end times.

A static batch is B requests with the same prompt p and output length T, all arriving at
t = 0 on one idle replica with room for all of them. The engine then runs one prefill
step and T − 1 decode steps (every request yields its first token at the end of the
prefill and one token per decode step):

    e2e = t_step(0 decodes, B·p prefill tokens) + Σ_{g=1}^{T−1} t_step(B decodes reading B·(p + g))

which is the shape of Splitwise's measurements (prompt_time + (T − 1)·token_time). The
check runs the real engine, not this formula, so it also exercises batching, admission
and accounting; the formula is kept as a cross-check in the tests.

**An independent cross-check, not a fit.** Splitwise (Patel et al., ISCA 2024) measured
llama2-70b on A100-80GB and H100 at TP 2, 4 and 8 with a 2023 serving stack. Llama-3.1-70B
has the same layers, widths and grouped-query attention (only its vocabulary is larger),
so :func:`splitwise_cross_check` replays every Splitwise run on the planner's llama-3.1-70b
profile of the same SKU and TP and reports simulated / measured: how much faster today's
engine tables are than that stack.

**Output length actually generated.** Splitwise's ``token_size`` is the output budget,
not the output length: from 256 tokens on, most of its five repetitions stop at the
end-of-sequence token. A run's generated length is therefore recovered as

    T_run = min(token_size, round((e2e_time − prompt_time) / token_time) + 1)

and the static batch is simulated with T_run.

Data: ``data/profiles/splitwise_perf_model.csv`` (MIT), exact duplicate rows dropped and the
power-capped hardware ignored.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.profiles.step_model import StepModel, causal_pairs
from planner.sim.replica.engine import run_pool
from planner.sim.replica.state import F_EXIT, build_state

HARDWARE_SKU = {"a100-80gb": "A100-80GB", "h100-80gb": "H100"}
SPLITWISE_MODEL = "llama2-70b"
PLANNER_MODEL = "llama-3.1-70b"
SPLITWISE_TABLE = "splitwise_perf_model.csv"


def static_batch_e2e_ms(step: StepModel, prompt: int, batch: int, tokens: int) -> float:
    """Simulated end-to-end time (ms) of one static batch on an otherwise idle replica."""
    n = int(batch)
    kv = n * (int(prompt) + int(tokens)) + 1
    state, hkey, hid = build_state(
        arrival=np.zeros(n), cls=np.zeros(n, dtype=np.int64), prompt=np.full(n, prompt, dtype=np.int64),
        output=np.full(n, tokens, dtype=np.int64), predicted=np.full(n, float(tokens)), route_u=np.zeros((n, 1)),
        replica_steps=step.packed()[None, :],
        replica_ints=np.array([[kv, kv, n, n * int(prompt) + n, 0]], dtype=np.int64),
        mu=np.ones((1, 1)), class_f=np.array([[1.0, 0.0, 4096.0, 1e12]]),
        reserve=np.array([int(tokens)], dtype=np.int64),
        policy_i=np.array([0, 0, 0, 2, 1], dtype=np.int64), policy_f=np.array([0.1, 0.5, 0.0, 1e12]),
    )
    run_pool(state, hkey, hid)
    return float(state.req_f[:, F_EXIT].max() * 1000.0)


def static_batch_formula_ms(step: StepModel, prompt: int, batch: int, tokens: int) -> float:
    """The module docstring's formula."""
    prefill = step.step_ms(0, 0, batch * prompt, batch * causal_pairs(prompt, 0))
    return prefill + sum(step.step_ms(batch, batch * (prompt + g), 0, 0) for g in range(1, int(tokens)))


def measured_runs(table: pd.DataFrame) -> pd.DataFrame:
    """Splitwise's distinct llama2-70b runs on the catalog's SKUs, from its whole table
    (:data:`SPLITWISE_TABLE` in the profiles folder, read by :func:`planner.workflows.inputs.read_splitwise`)."""
    runs = table.drop_duplicates()
    runs = runs[runs["hardware"].isin(list(HARDWARE_SKU)) & (runs["model"] == SPLITWISE_MODEL)]
    return runs.assign(sku=runs["hardware"].map(HARDWARE_SKU)).reset_index(drop=True)


def splitwise_cross_check(profiles: pd.DataFrame, splitwise: pd.DataFrame, engine: str = "vllm") -> pd.DataFrame:
    """One row per Splitwise run (of the ``splitwise`` table) that has a planner profile at its SKU and TP:
    measured and simulated e2e."""
    runs = measured_runs(splitwise)
    mine = profiles[(profiles["model"] == PLANNER_MODEL) & (profiles["engine"] == engine)]
    steps = {(str(r["sku"]), int(r["tp_degree"])): StepModel.from_row(r) for r in mine.to_dict("records")}
    runs = runs[[(s, int(t)) in steps for s, t in zip(runs["sku"], runs["tensor_parallel"], strict=True)]]
    generated = np.rint((runs["e2e_time"] - runs["prompt_time"]) / runs["token_time"]).astype(np.int64) + 1
    generated = np.clip(generated, 1, runs["token_size"].to_numpy())
    simulated = [static_batch_e2e_ms(steps[(r.sku, int(r.tensor_parallel))], int(r.prompt_size), int(r.batch_size),
                                     int(t)) for r, t in zip(runs.itertuples(index=False), generated, strict=True)]
    out = runs[["sku", "tensor_parallel", "prompt_size", "batch_size", "token_size", "e2e_time"]].rename(
        columns={"e2e_time": "measured_e2e_ms", "tensor_parallel": "tp_degree"}).reset_index(drop=True)
    out["generated_tokens"] = generated.to_numpy()
    out["simulated_e2e_ms"] = simulated
    out["ratio"] = out["simulated_e2e_ms"] / out["measured_e2e_ms"]
    return out


def ratio_table(check: pd.DataFrame) -> pd.DataFrame:
    """Median and quartiles of simulated / measured per (SKU, TP)."""
    rows = [{"sku": s, "tp_degree": tp, "runs": len(g), "median_ratio": g["ratio"].median(),
             "q25_ratio": g["ratio"].quantile(0.25), "q75_ratio": g["ratio"].quantile(0.75)}
            for (s, tp), g in check.groupby(["sku", "tp_degree"], sort=True)]
    return pd.DataFrame(rows)

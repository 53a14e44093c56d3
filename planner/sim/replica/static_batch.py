"""Static-batch check of the replica model against measured end-to-end times.

A static batch is B requests with the same prompt p and output length T, all arriving at
t = 0 on one idle replica with room for all of them. The engine then runs one prefill
step and T − 1 decode steps (every request yields its first token at the end of the
prefill and one token per decode step):

    e2e = [a + c·B·p] + Σ_{g=1}^{T−1} [a + b·B·(p + g)]                         (ms)

which is the shape of Splitwise's measurements (prompt_time + (T − 1)·token_time). The
check runs the real engine, not this formula, so it also exercises batching, admission
and accounting; the formula is kept as a cross-check in the tests.

**Output length actually generated.** Splitwise's ``token_size`` is the output budget,
not the output length: from 256 tokens on, most of its five repetitions stop at the
end-of-sequence token. Their e2e_time then shows about 230, 450, 620, 740 and 1,020
generated tokens whatever the budget (for llama2-70b on H100 TP4 at prompt 512, e2e
clusters at 6.8, 13.3, 18.2, 21.8 and 30.0 s for every budget of 1,024 tokens or more),
while ``token_time`` stays at ~29 ms. A run's generated length is therefore recovered as

    T_run = min(token_size, round((e2e_time − prompt_time) / token_time) + 1)

and the static batch is simulated with T_run. Runs with T_run = token_size (``full_length``)
are the ones whose e2e is independent of that inference; both MAPEs are reported.

Data: ``data/profiles/splitwise_perf_model.csv`` (Patel et al., Splitwise, ISCA 2024),
1,260 runs of llama2-70b and bloom-176b on A100-80GB and H100 at TP 2, 4 and 8; exact
duplicate rows are dropped (as the profile fit does) and the power-capped hardware is
ignored. Coefficients per configuration: ``data/profiles/fit_report.csv`` (the production
TP4 rows are the ``measured-fit`` profiles in ``profiles.csv``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from planner.paths import profiles_dir
from planner.sim.replica.engine import run_pool
from planner.sim.replica.state import F_EXIT, build_state
from planner.storage import read_table

HARDWARE_SKU = {"a100-80gb": "A100-80GB", "h100-80gb": "H100"}


def static_batch_e2e_ms(a_ms: float, b_ms: float, c_ms: float, prompt: int, batch: int, tokens: int) -> float:
    """Simulated end-to-end time (ms) of one static batch on an otherwise idle replica."""
    n = int(batch)
    kv = n * (int(prompt) + int(tokens)) + 1
    state, hkey, hid = build_state(
        arrival=np.zeros(n), cls=np.zeros(n, dtype=np.int64), prompt=np.full(n, prompt, dtype=np.int64),
        output=np.full(n, tokens, dtype=np.int64), predicted=np.full(n, float(tokens)), route_u=np.zeros((n, 1)),
        replica_coeffs=np.array([[a_ms, b_ms, c_ms]]),
        replica_ints=np.array([[kv, kv, n, n * int(prompt) + n]], dtype=np.int64),
        mu=np.ones((1, 1)), class_f=np.array([[1.0, 0.0, 4096.0, 1e12]]),
        reserve=np.array([int(tokens)], dtype=np.int64),
        policy_i=np.array([0, 0, 0, 2, 1], dtype=np.int64), policy_f=np.array([0.1, 0.5, 0.0, 1e12]),
    )
    run_pool(state, hkey, hid)
    return float(state.req_f[:, F_EXIT].max() * 1000.0)


def static_batch_formula_ms(a_ms: float, b_ms: float, c_ms: float, prompt: int, batch: int, tokens: int) -> float:
    g = np.arange(1, int(tokens), dtype=np.float64)
    return float(a_ms + c_ms * batch * prompt + np.sum(a_ms + b_ms * batch * (prompt + g)))


def measured_runs(directory: Path | None = None) -> pd.DataFrame:
    """The distinct measured runs with their configuration's fitted coefficients."""
    folder = Path(directory if directory is not None else profiles_dir())
    runs = read_table(folder / "splitwise_perf_model.csv").drop_duplicates()
    runs = runs[runs["hardware"].isin(list(HARDWARE_SKU))]
    fits = read_table(folder / "fit_report.csv")
    fits = fits.rename(columns={"tp_degree": "tensor_parallel"})
    keep = ["model", "hardware", "tensor_parallel", "sku", "production", "a_ms", "b_ms_per_kv_token",
            "c_ms_per_prefill_token"]
    return runs.merge(fits[keep], on=["model", "hardware", "tensor_parallel"], how="inner").reset_index(drop=True)


def static_batch_errors(directory: Path | None = None) -> pd.DataFrame:
    """One row per measured run: measured and simulated e2e (ms) and the absolute % error."""
    runs = measured_runs(directory)
    generated = np.rint((runs["e2e_time"] - runs["prompt_time"]) / runs["token_time"]).astype(np.int64) + 1
    generated = np.clip(generated, 1, runs["token_size"].to_numpy())
    simulated = [
        static_batch_e2e_ms(r.a_ms, r.b_ms_per_kv_token, r.c_ms_per_prefill_token,
                            int(r.prompt_size), int(r.batch_size), int(t))
        for r, t in zip(runs.itertuples(index=False), generated, strict=True)
    ]
    out = runs[["model", "sku", "tensor_parallel", "production", "prompt_size", "batch_size", "token_size",
                "e2e_time"]].rename(columns={"e2e_time": "measured_e2e_ms", "tensor_parallel": "tp_degree"})
    out.insert(7, "generated_tokens", generated)
    out.insert(8, "full_length", generated == runs["token_size"].to_numpy())
    out["simulated_e2e_ms"] = simulated
    out["ape_pct"] = 100.0 * np.abs(out["simulated_e2e_ms"] - out["measured_e2e_ms"]) / out["measured_e2e_ms"]
    return out


def _agg(frame: pd.DataFrame) -> dict[str, float]:
    full = frame[frame["full_length"]]
    return {"runs": len(frame), "mape_pct": frame["ape_pct"].mean(), "median_ape_pct": frame["ape_pct"].median(),
            "max_ape_pct": frame["ape_pct"].max(), "full_length_runs": len(full),
            "full_length_mape_pct": full["ape_pct"].mean() if len(full) else np.nan}


def mape_table(errors: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) per (model, SKU, TP), per TP ("all" SKUs and models), and over everything (TP 0)."""
    rows = [{"model": m, "sku": s, "tp_degree": tp, **_agg(g)}
            for (m, s, tp), g in errors.groupby(["model", "sku", "tp_degree"], sort=True)]
    rows += [{"model": "all", "sku": "all", "tp_degree": tp, **_agg(g)}
             for tp, g in errors.groupby("tp_degree", sort=True)]
    rows.append({"model": "all", "sku": "all", "tp_degree": 0, **_agg(errors)})
    return pd.DataFrame(rows)

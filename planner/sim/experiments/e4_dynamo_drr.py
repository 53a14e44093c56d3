"""E4: Dynamo's dual-class router: Deficit Round Robin over FCFS or WSPT, quantum ratio 1:1..8:1.

Set-up (docs/theory.md): premium (30% of arrivals, priority_jump 3) and regular (70%,
no jump); uncached input lengths lognormal with means 700 and 1,200 tokens; one
server prefilling 3,000 tokens/s; DRR with cost max(1, uncached_tokens); FCFS
(key priority_jump − arrival_offset, s) or WSPT (key (1 + priority_jump)/isl_tokens)
inside each class; premium:regular quantum ratio 1:1 to 8:1. TTFT = queue wait +
prefill (tokens / 3,000 s⁻¹), i.e. the sojourn at this server.

Choices theory.md leaves open, fixed here and written into every row: log-space
σ = 1.05 for the input lengths (E1's σ), rounded to whole tokens (≥ 1); load ρ = 0.9 (λ = 0.9·3000/1050 ≈ 2.57 req/s),
so the two classes are often backlogged together and the arbiter matters; 120,000
requests with 20,000 warm-up as in E1; the regular quantum is 256 tokens (below most
head-of-line costs, so the ratio bites) and 4,096 tokens (Dynamo's scenario default,
above almost every premium cost). Two rows without the arbiter (one queue ordered by
the same Dynamo key, where priority_jump does act across classes) anchor the sweep.

Why the quantum saturates: on its turn premium dispatches its head once its deficit
covers the head's cost; once Q_premium exceeds typical head costs it dispatches at
every turn, and extra quantum only helps when premium has several requests queued,
which at a 20% token share is rare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from planner.sim.experiments.common import ExperimentResult, check, new_figure, sized
from planner.sim.queue import ArrivalProcess, QueueClass, QueueModel, ServiceDist, simulate_queue, summarize
from planner.sim.stats import batch_means_ci

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TOKENS_PER_S = 3000.0
SIGMA = 1.05
RHO = 0.9
RATIOS = (1, 2, 3, 4, 6, 8)
BASE_QUANTA = (256, 4096)
INNERS = ("fcfs", "wspt")


def _classes(premium_quantum: float, regular_quantum: float) -> tuple[QueueClass, ...]:
    return (
        QueueClass("premium", 1.0, 0.30, ServiceDist("lognormal", 700.0, SIGMA, integer=True), priority_jump=3.0,
                   quantum_tokens=premium_quantum),
        QueueClass("regular", 1.0, 0.70, ServiceDist("lognormal", 1200.0, SIGMA, integer=True), priority_jump=0.0,
                   quantum_tokens=regular_quantum),
    )


def _row(inner: str, arbiter: bool, base: float, ratio: float, n: int, warmup: int, seed: int) -> dict[str, Any]:
    classes = _classes(base * ratio, base) if arbiter else _classes(4096.0, 4096.0)
    mean_tokens = sum(c.share * c.service.mean for c in classes)
    model = QueueModel(classes, ArrivalProcess("poisson", RHO * TOKENS_PER_S / mean_tokens),
                       policy=f"drr-{inner}", n_jobs=n, warmup=warmup, speeds=(TOKENS_PER_S,),
                       class_arbiter=arbiter)
    run = simulate_queue(model, seed)
    summ = summarize(run)
    kept = run.kept
    ttft = run.sojourn[kept] * 1000.0
    wait = run.wait[kept] * 1000.0
    cls = run.cls[kept]
    tokens = run.tokens[kept]
    row: dict[str, Any] = {
        "arbiter": "drr" if arbiter else "none",
        "inner": inner,
        "regular_quantum_tokens": base if arbiter else np.nan,
        "quantum_ratio": ratio if arbiter else np.nan,
        "premium_quantum_tokens": base * ratio if arbiter else np.nan,
        "rho": RHO,
        "input_sigma": SIGMA,
        "jobs": n - warmup,
        "seed": seed,
    }
    for k, c in enumerate(classes):
        t = ttft[cls == k]
        ci = batch_means_ci(t)
        row[f"ttft_mean_{c.name}_ms"] = ci.mean
        row[f"ttft_mean_{c.name}_hw_ms"] = ci.half_width
        row[f"ttft_p99_{c.name}_ms"] = float(np.quantile(t, 0.99))
        row[f"max_wait_{c.name}_ms"] = float(wait[cls == k].max())
    row["ttft_mean_ms"] = float(ttft.mean())
    row["ttft_p99_ms"] = float(np.quantile(ttft, 0.99))
    row["ttft_p999_ms"] = float(np.quantile(ttft, 0.999))
    row["ttft_p9999_ms"] = float(np.quantile(ttft, 0.9999))
    row["max_wait_ms"] = float(wait.max())
    edges = np.quantile(tokens, np.linspace(0, 1, 11)[1:-1])
    decile = np.searchsorted(edges, tokens, side="right")
    for d in range(10):
        row[f"mean_wait_decile_{d + 1}_ms"] = float(wait[decile == d].mean())
    row["little_residual"] = summ.overall["little_residual"]
    return row


def _draw(table: pd.DataFrame, fig: Figure) -> None:
    (a1, a2), (a3, a4) = fig.subplots(2, 2)
    drr = table[table["arbiter"] == "drr"]
    styles = {("fcfs", 256): ("tab:blue", "-"), ("wspt", 256): ("tab:green", "-"),
              ("fcfs", 4096): ("tab:blue", ":"), ("wspt", 4096): ("tab:green", ":")}
    for (inner, base), (colour, ls) in styles.items():
        part = drr[(drr["inner"] == inner) & (drr["regular_quantum_tokens"] == base)]
        for cls_name, marker in (("premium", "o"), ("regular", "s")):
            a1.plot(part["quantum_ratio"], part[f"ttft_mean_{cls_name}_ms"], color=colour, ls=ls, marker=marker,
                    ms=3, label=f"{inner} Q_reg={base} {cls_name}")
            a2.plot(part["quantum_ratio"], part[f"ttft_p99_{cls_name}_ms"], color=colour, ls=ls, marker=marker, ms=3)
    for ax, title in ((a1, "mean TTFT (ms)"), (a2, "p99 TTFT (ms)")):
        ax.set_xlabel("quantum ratio premium:regular")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, which="both")
    a2.legend(*a1.get_legend_handles_labels(), fontsize=6, ncol=2, loc="center right")
    deciles = [f"mean_wait_decile_{d}_ms" for d in range(1, 11)]
    picks = [("none", "fcfs", None, "tab:gray"), ("none", "wspt", None, "tab:olive"),
             ("drr", "fcfs", 4, "tab:blue"), ("drr", "wspt", 4, "tab:green")]
    for arb, inner, ratio, colour in picks:
        sel = (table["arbiter"] == arb) & (table["inner"] == inner)
        if ratio is not None:
            sel &= (table["quantum_ratio"] == ratio) & (table["regular_quantum_tokens"] == 256)
        row = table[sel].iloc[0]
        label = f"{inner}, no DRR" if arb == "none" else f"DRR {ratio}:1 (Q_reg=256), {inner}"
        a3.plot(range(1, 11), [row[c] for c in deciles], marker="o", ms=3, color=colour, label=label)
        a4.bar(label, row["max_wait_ms"] / 1000.0, color=colour)
    a3.set_yscale("log")
    a3.set_xlabel("request length decile (1 = shortest)")
    a3.set_title("mean wait by input-length decile (ms)", fontsize=9)
    a3.legend(fontsize=7)
    a3.grid(alpha=0.3, which="both")
    a4.set_title("maximum wait (s)", fontsize=9)
    a4.tick_params(axis="x", labelsize=6, rotation=15)
    fig.suptitle("E4: Dynamo DRR over FCFS/WSPT, premium 30% (jump 3) vs regular 70%, 3,000 tokens/s, rho=0.9",
                 fontsize=10)
    fig.tight_layout()


def _checks(table: pd.DataFrame) -> list[dict[str, Any]]:
    drr = table[table["arbiter"] == "drr"]
    out = []
    for inner in INNERS:
        small = drr[(drr["inner"] == inner) & (drr["regular_quantum_tokens"] == 256)].set_index("quantum_ratio")
        large = drr[(drr["inner"] == inner) & (drr["regular_quantum_tokens"] == 4096)].set_index("quantum_ratio")
        p = small["ttft_mean_premium_ms"]
        first_step = abs(p.loc[1] - p.loc[2])
        last_step = abs(p.loc[4] - p.loc[8])
        spread_large = float(large["ttft_mean_premium_ms"].max() - large["ttft_mean_premium_ms"].min())
        out.append(check(
            f"DRR-{inner}: the quantum's effect saturates once the premium quantum exceeds its head-of-line cost",
            bool(last_step < first_step and spread_large < first_step),
            "premium mean TTFT at Q_reg=256: " + ", ".join(f"{int(r)}:1 {v:.0f} ms" for r, v in p.items())
            + f"; at Q_reg=4096 the whole 1:1..8:1 sweep moves it by {spread_large:.0f} ms"))
    none = table[table["arbiter"] == "none"].set_index("inner")
    f, w = none.loc["fcfs"], none.loc["wspt"]
    out.append(check("Dynamo's trade-off: WSPT has the lower mean TTFT, FCFS the lower p99 TTFT (no arbiter)",
                     bool(w["ttft_mean_ms"] < f["ttft_mean_ms"] and f["ttft_p99_ms"] < w["ttft_p99_ms"]),
                     f"mean {w['ttft_mean_ms']:.0f} vs {f['ttft_mean_ms']:.0f} ms, p99 {w['ttft_p99_ms']:.0f} vs "
                     f"{f['ttft_p99_ms']:.0f} ms, p99.9 {w['ttft_p999_ms']:.0f} vs {f['ttft_p999_ms']:.0f} ms, "
                     f"p99.99 {w['ttft_p9999_ms']:.0f} vs {f['ttft_p9999_ms']:.0f} ms (WSPT vs FCFS)"))
    deciles = [f"mean_wait_decile_{d}_ms" for d in range(1, 11)]
    worst = int(np.argmax([w[c] for c in deciles])) + 1
    out.append(check("WSPT's worst-case wait is far above FCFS's, concentrated in the longest decile",
                     bool(w["max_wait_ms"] > 3 * f["max_wait_ms"] and worst == 10),
                     f"max wait {w['max_wait_ms'] / 1000:.1f} s vs {f['max_wait_ms'] / 1000:.1f} s; WSPT decile "
                     f"waits {w[deciles[0]]:.0f} ms (shortest) .. {w[deciles[-1]]:.0f} ms (longest), FCFS "
                     f"{f[deciles[0]]:.0f} .. {f[deciles[-1]]:.0f} ms"))
    return out


def run_e4(seed: int = 0, scale: float = 1.0) -> ExperimentResult:
    """E4 at ``scale`` of the full size."""
    n, warmup = sized(scale)
    rows = [_row(inner, False, 0.0, 0.0, n, warmup, seed) for inner in INNERS]
    rows += [_row(inner, True, float(base), float(r), n, warmup, seed)
             for inner in INNERS for base in BASE_QUANTA for r in RATIOS]
    table = pd.DataFrame(rows)
    fig = new_figure(13, 8.5)
    _draw(table, fig)
    summary = [
        {
            "arbiter": r["arbiter"],
            "inner": r["inner"],
            "Q_reg": "-" if r["arbiter"] == "none" else int(r["regular_quantum_tokens"]),
            "ratio": "-" if r["arbiter"] == "none" else f"{int(r['quantum_ratio'])}:1",
            "TTFT prem mean/p99 (ms)": f"{r['ttft_mean_premium_ms']:.0f} / {r['ttft_p99_premium_ms']:.0f}",
            "TTFT reg mean/p99 (ms)": f"{r['ttft_mean_regular_ms']:.0f} / {r['ttft_p99_regular_ms']:.0f}",
            "max wait (s)": round(r["max_wait_ms"] / 1000.0, 1),
        }
        for r in rows
    ]
    return ExperimentResult("e4", table, fig, summary, _checks(table),
                            {"seed": seed, "jobs": n, "warmup": warmup, "rho": RHO, "sigma": SIGMA,
                             "ratios": list(RATIOS), "regular_quanta_tokens": list(BASE_QUANTA)})

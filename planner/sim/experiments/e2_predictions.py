"""E2: WSPT with noisy size predictions, at ρ = 0.85 (E1's classes and sizes otherwise).

WSPT orders by w_j / p̂_j with p̂_j = p_j·exp(σ Z_j), Z_j ~ N(0, 1), σ ∈ {0, 0.5, 1.0, 1.5}.
FCFS and class-level c-mu (which uses only the class means) are run on the same jobs.
Because every row sees identical arrivals, sizes and noise draws Z_j (common random
numbers), the paired per-job difference d_j = w_j (T_j^WSPT − T_j^c-mu) has a much
tighter batch-means interval than either mean: that interval decides the claim
"WSPT with σ = 1.5 still beats c-mu".

Why noise hurts little (Smith's exchange argument): mis-ordering a pair a, b costs
w_a p_b − w_b p_a, which is small exactly when their ratios are close, and large
ratio gaps survive multiplicative noise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.sim.experiments.common import ExperimentResult, check, e1_classes, new_figure, sized
from planner.sim.experiments.e1_policies import run_config
from planner.sim.queue.run import QueueRun
from planner.sim.stats import batch_means_ci

RHO = 0.85
SIGMAS = (0.0, 0.5, 1.0, 1.5)


def _paired(run: QueueRun, base: QueueRun, weights: np.ndarray) -> tuple[float, float]:
    kept = run.kept
    d = weights[run.cls[kept]] * (run.sojourn[kept] - base.sojourn[kept])
    ci = batch_means_ci(d)
    return ci.mean, ci.half_width


def run_e2(seed: int = 0, scale: float = 1.0) -> ExperimentResult:
    """E2 at ``scale`` of the full size."""
    n, warmup = sized(scale)
    classes = e1_classes()
    weights = np.array([c.weight for c in classes])
    rows = [run_config(classes, RHO, "fcfs", n, warmup, seed), run_config(classes, RHO, "cmu", n, warmup, seed)]
    for sigma in SIGMAS:
        rows.append(run_config(classes, RHO, "wspt", n, warmup, seed, prediction_sigma=sigma))
    base = rows[1]["_run"]
    for row in rows:
        row["prediction_sigma"] = row["_run"].model.prediction_sigma if row["policy"] == "wspt" else np.nan
        row["vs_cmu_diff_s"], row["vs_cmu_diff_hw_s"] = _paired(row["_run"], base, weights)
    for row in rows:
        row.pop("_run")
    table = pd.DataFrame(rows)
    first = ["rho", "policy", "prediction_sigma", "weighted_objective_s", "weighted_objective_hw_s",
             "vs_cmu_diff_s", "vs_cmu_diff_hw_s"]
    table = table[first + [c for c in table.columns if c not in first]]

    fig = new_figure(11, 4.4)
    ax1, ax2 = fig.subplots(1, 2)
    wspt = table[table["policy"] == "wspt"]
    ax1.errorbar(wspt["prediction_sigma"], wspt["weighted_objective_s"], yerr=wspt["weighted_objective_hw_s"],
                 marker="o", color="tab:green", capsize=3, label="WSPT on predictions")
    for pol, colour in (("fcfs", "tab:gray"), ("cmu", "tab:blue")):
        val = float(table.loc[table["policy"] == pol, "weighted_objective_s"].iloc[0])
        ax1.axhline(val, color=colour, ls="--", label=pol)
    ax1.set_yscale("log")
    ax1.set_xlabel("prediction noise sigma (log space)")
    ax1.set_ylabel("weighted objective mean w_j T_j (s)")
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3, which="both")
    ax2.errorbar(wspt["prediction_sigma"], wspt["vs_cmu_diff_s"], yerr=wspt["vs_cmu_diff_hw_s"], marker="o",
                 color="tab:green", capsize=3)
    ax2.axhline(0.0, color="tab:blue", ls="--", label="c-mu")
    ax2.set_xlabel("prediction noise sigma (log space)")
    ax2.set_ylabel("paired difference WSPT - c-mu (s)")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(f"E2: WSPT with p_hat = p exp(N(0, sigma^2)) at rho = {RHO}", fontsize=10)
    fig.tight_layout()

    w15 = table[(table["policy"] == "wspt") & (table["prediction_sigma"] == 1.5)].iloc[0]
    checks = [
        check("WSPT with noise sigma = 1.5 still beats class-level c-mu",
              bool(w15["vs_cmu_diff_s"] + w15["vs_cmu_diff_hw_s"] < 0),
              f"paired difference {w15['vs_cmu_diff_s']:.3f} ± {w15['vs_cmu_diff_hw_s']:.3f} s "
              f"(objective {w15['weighted_objective_s']:.3f} vs c-mu "
              f"{float(table.loc[table['policy'] == 'cmu', 'weighted_objective_s'].iloc[0]):.3f})"),
        check("WSPT degrades gracefully: the objective grows with sigma",
              bool(wspt["weighted_objective_s"].is_monotonic_increasing),
              ", ".join(f"sigma {s}: {v:.3f}" for s, v in zip(wspt["prediction_sigma"],
                                                              wspt["weighted_objective_s"], strict=True))),
    ]
    summary = [
        {
            "policy": r["policy"] + ("" if np.isnan(r["prediction_sigma"]) else f" sigma={r['prediction_sigma']}"),
            "weighted objective (s)": f"{r['weighted_objective_s']:.3f} ± {r['weighted_objective_hw_s']:.3f}",
            "vs c-mu, paired (s)": f"{r['vs_cmu_diff_s']:+.3f} ± {r['vs_cmu_diff_hw_s']:.3f}",
            "T interactive (s)": round(r["mean_sojourn_interactive_s"], 3),
            "T standard (s)": round(r["mean_sojourn_standard_s"], 3),
            "T batch (s)": round(r["mean_sojourn_batch_s"], 3),
            "p99 interactive (s)": round(r["p99_sojourn_interactive_s"], 3),
        }
        for r in table.to_dict("records")
    ]
    return ExperimentResult("e2", table, fig, summary, checks,
                            {"seed": seed, "jobs": n, "warmup": warmup, "rho": RHO, "sigmas": list(SIGMAS)})

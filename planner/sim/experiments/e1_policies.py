"""E1: multiclass M/G/1, FCFS vs c-mu vs WSPT vs SRPT across loads.

Set-up (docs/theory.md): three classes (interactive w=8, mean 0.30 s, 50%; standard
w=2, 1.00 s, 35%; batch w=0.5, 4.00 s, 15%), Poisson arrivals, lognormal service with
log-space σ = 1.05, one server, 120,000 requests per configuration with the first
20,000 discarded, ρ ∈ {0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95}.

Outputs per (ρ, policy): the weighted objective (1/n) Σ_j w_j T_j with a 95%
batch-means half-width, per-class mean sojourn T_k, and the interactive p99. For
FCFS and c-mu the closed forms are printed beside the simulation:
FCFS  T_k = λE[S²]/(2(1−ρ)) + E[S_k] (Pollaczek–Khinchine), and
c-mu  T_k = W_0/((1−σ_{k−1})(1−σ_k)) + E[S_k] (Cobham, classes in w_k μ_k order);
the weighted objective's theory value is Σ_k p_k w_k T_k.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from planner.analytics import cobham_mean_waits, pk_mean_wait
from planner.sim.experiments.common import (
    E1_LOADS,
    ExperimentResult,
    check,
    e1_classes,
    new_figure,
    sized,
)
from planner.sim.queue import ArrivalProcess, QueueClass, QueueModel, rate_for_load, simulate_queue, summarize

if TYPE_CHECKING:
    from matplotlib.figure import Figure

POLICIES = ("fcfs", "cmu", "wspt", "srpt")


def theory_sojourns(classes: tuple[QueueClass, ...], rho: float, policy: str) -> list[float] | None:
    """Closed-form mean sojourn per class for FCFS (P-K) and c-mu (Cobham); None otherwise."""
    lam = rate_for_load(classes, rho)
    lams = [lam * c.share for c in classes]
    m1 = [c.service.first_moment for c in classes]
    m2 = [c.service.second_moment for c in classes]
    if policy == "fcfs":
        es2 = sum(c.share * s2 for c, s2 in zip(classes, m2, strict=True))
        w = pk_mean_wait(lam, sum(c.share * s for c, s in zip(classes, m1, strict=True)), es2)
        return [w + s for s in m1]
    if policy == "cmu":
        order = sorted(range(len(classes)), key=lambda k: -classes[k].weight / m1[k])
        waits = cobham_mean_waits([lams[k] for k in order], [m1[k] for k in order], [m2[k] for k in order])
        out = [0.0] * len(classes)
        for pos, k in enumerate(order):
            out[k] = waits[pos] + m1[k]
        return out
    return None


def run_config(classes: tuple[QueueClass, ...], rho: float, policy: str, n: int, warmup: int, seed: int,
               **extra: Any) -> dict[str, Any]:
    """Simulate one (ρ, policy) and return its table row (shared by E1 and E2)."""
    model = QueueModel(classes, ArrivalProcess("poisson", rate_for_load(classes, rho)), policy=policy,
                       n_jobs=n, warmup=warmup, **extra)
    run = simulate_queue(model, seed)
    summ = summarize(run)
    row: dict[str, Any] = {
        "rho": rho,
        "policy": policy,
        "jobs": n - warmup,
        "warmup_jobs": warmup,
        "seed": seed,
        "weighted_objective_s": summ.weighted.mean,
        "weighted_objective_hw_s": summ.weighted.half_width,
    }
    theory = theory_sojourns(classes, rho, policy) if model.prediction_sigma == 0 else None
    row["weighted_objective_theory_s"] = (
        sum(c.share * c.weight * t for c, t in zip(classes, theory, strict=True)) if theory else np.nan
    )
    per = summ.per_class.set_index("traffic_class")
    for k, c in enumerate(classes):
        row[f"mean_sojourn_{c.name}_s"] = float(per.loc[c.name, "mean_sojourn"])
        row[f"mean_sojourn_{c.name}_hw_s"] = float(per.loc[c.name, "mean_sojourn_hw"])
        row[f"mean_sojourn_{c.name}_theory_s"] = theory[k] if theory else np.nan
    row["p99_sojourn_interactive_s"] = float(per.loc["interactive", "p99_sojourn"])
    row["max_wait_s"] = summ.overall["max_wait"]
    row["utilisation"] = summ.overall["utilisation"]
    row["little_residual"] = summ.overall["little_residual"]
    row["_run"] = run
    return row


def _draw(table: pd.DataFrame, fig: Figure) -> None:
    axes = fig.subplots(1, 3)
    colours = {"fcfs": "tab:gray", "cmu": "tab:blue", "wspt": "tab:green", "srpt": "tab:red"}
    for pol in POLICIES:
        part = table[table["policy"] == pol]
        axes[0].errorbar(part["rho"], part["weighted_objective_s"], yerr=part["weighted_objective_hw_s"],
                         marker="o", ms=3, color=colours[pol], label=pol, capsize=2)
        axes[1].plot(part["rho"], part["mean_sojourn_batch_s"], marker="o", ms=3, color=colours[pol], label=pol)
        axes[2].plot(part["rho"], part["p99_sojourn_interactive_s"], marker="o", ms=3, color=colours[pol],
                     label=pol)
        if pol in ("fcfs", "cmu"):
            axes[0].plot(part["rho"], part["weighted_objective_theory_s"], ls="none", marker="x", ms=6,
                         color=colours[pol], label=f"{pol} theory")
    titles = ("weighted objective mean w_j T_j (s)", "batch class mean sojourn (s)", "interactive p99 sojourn (s)")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_yscale("log")
        ax.set_xlabel("load rho")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    fig.suptitle("E1: multiclass M/G/1, lognormal sigma=1.05, 100k requests after warm-up", fontsize=10)
    fig.tight_layout()


def _checks(table: pd.DataFrame) -> list[dict[str, Any]]:
    piv = table.pivot(index="rho", columns="policy", values="weighted_objective_s")
    gain_cmu = piv["fcfs"] / piv["cmu"]
    gain_wspt = piv["fcfs"] / piv["wspt"]
    batch = table.pivot(index="rho", columns="policy", values="mean_sojourn_batch_s")
    out = [
        check("c-mu and WSPT cut the weighted objective relative to FCFS at every load",
              bool((gain_cmu > 1).all() and (gain_wspt > 1).all()),
              "FCFS/c-mu " + ", ".join(f"{r}: {g:.2f}x" for r, g in gain_cmu.items())
              + "; FCFS/WSPT " + ", ".join(f"{r}: {g:.2f}x" for r, g in gain_wspt.items())),
        check("the gap to FCFS widens with load",
              bool((piv["fcfs"] - piv["cmu"]).is_monotonic_increasing and gain_cmu.iloc[-1] > gain_cmu.iloc[0]),
              f"FCFS - c-mu objective from {piv['fcfs'].iloc[0] - piv['cmu'].iloc[0]:.3f} s at rho="
              f"{piv.index[0]} to {piv['fcfs'].iloc[-1] - piv['cmu'].iloc[-1]:.3f} s at rho={piv.index[-1]}"),
        check("conservation: batch does worse under c-mu than under FCFS at every load",
              bool((batch["cmu"] > batch["fcfs"]).all()),
              ", ".join(f"{r}: {batch.loc[r, 'cmu']:.2f} vs {batch.loc[r, 'fcfs']:.2f} s" for r in batch.index)),
    ]
    for pol, name in (("fcfs", "Pollaczek-Khinchine"), ("cmu", "Cobham")):
        part = table[table["policy"] == pol]
        dev = (part["weighted_objective_s"] - part["weighted_objective_theory_s"]).abs()
        ok = bool((dev <= 3 * part["weighted_objective_hw_s"]).all())
        out.append(check(f"{pol} matches {name} within 3 batch-means half-widths",
                         ok, ", ".join(f"{r}: {s:.3f} vs {t:.3f}" for r, s, t in
                                       zip(part["rho"], part["weighted_objective_s"],
                                           part["weighted_objective_theory_s"], strict=True))))
    return out


def run_e1(seed: int = 0, scale: float = 1.0) -> ExperimentResult:
    """E1 at ``scale`` of the full size (1.0 = 120,000 requests per configuration)."""
    n, warmup = sized(scale)
    classes = e1_classes()
    rows = [run_config(classes, rho, pol, n, warmup, seed) for rho in E1_LOADS for pol in POLICIES]
    for row in rows:
        row.pop("_run")
    table = pd.DataFrame(rows)
    fig = new_figure(15, 4.6)
    _draw(table, fig)
    summary = [
        {
            "rho": r["rho"],
            "policy": r["policy"],
            "weighted objective (s)": f"{r['weighted_objective_s']:.3f} ± {r['weighted_objective_hw_s']:.3f}",
            "T interactive (s)": round(r["mean_sojourn_interactive_s"], 3),
            "T standard (s)": round(r["mean_sojourn_standard_s"], 3),
            "T batch (s)": round(r["mean_sojourn_batch_s"], 3),
            "p99 interactive (s)": round(r["p99_sojourn_interactive_s"], 3),
        }
        for r in rows
    ]
    return ExperimentResult("e1", table, fig, summary, _checks(table),
                            {"seed": seed, "jobs": n, "warmup": warmup, "loads": list(E1_LOADS)})

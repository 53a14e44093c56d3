"""E3: routing across 8 heterogeneous FCFS servers: random vs JSQ vs power-of-two (and least-work).

Set-up: 8 servers with speeds evenly spaced from 0.6 to 1.4 (Σ v = 8), each with its own
FCFS queue; E1's job mix (three classes, lognormal σ = 1.05, mean work 1.1 s at speed 1);
Poisson arrivals at total load ρ = λE[S]/Σv ∈ {0.5, 0.55, 0.65, 0.7, 0.8, 0.9}.

Theory: random splitting sends λ/8 to every server, so the slowest one carries
ρ_min = (λ/8)E[S]/v_min = ρ·v̄/v_min = ρ/0.6 and is unstable for ρ ≥ 0.6, whatever the
others do; JSQ and power-of-d react to queue lengths and stay stable up to ρ < 1.
Instability shows as a backlog at the slowest server that grows with the run length
and a sojourn that keeps growing; the table reports the slowest server's backlog at
the last arrival, its utilisation, and the mean sojourn of the last tenth of the jobs
against the first tenth (drift ≫ 1 means no steady state).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from planner.sim.experiments.common import ExperimentResult, check, e1_classes, new_figure, sized
from planner.sim.queue import ArrivalProcess, QueueModel, rate_for_load, simulate_queue, summarize
from planner.sim.stats import batch_means_ci

SPEEDS = tuple(float(v) for v in np.linspace(0.6, 1.4, 8))
LOADS = (0.5, 0.55, 0.65, 0.7, 0.8, 0.9)
ROUTINGS = ("random", "jsq", "power-of-d", "least-work")
LABELS = {"random": "random", "jsq": "JSQ", "power-of-d": "power-of-2", "least-work": "least-work"}


def _row(rho: float, routing: str, n: int, warmup: int, seed: int) -> dict[str, Any]:
    classes = e1_classes()
    model = QueueModel(classes, ArrivalProcess("poisson", rate_for_load(classes, rho, sum(SPEEDS))),
                       policy="fcfs", n_jobs=n, warmup=warmup, speeds=SPEEDS, routing=routing, power_d=2)
    run = simulate_queue(model, seed)
    summ = summarize(run)
    slow = int(np.argmin(SPEEDS))
    t_last = float(run.arrival[-1])
    backlog = int(np.sum((run.server == slow) & (run.finish > t_last)))
    soj = run.sojourn[run.kept]
    tenth = max(1, soj.size // 10)
    util = run.busy / float(np.nanmax(run.finish))
    return {
        "rho": rho,
        "routing": LABELS[routing],
        "jobs": n - warmup,
        "warmup_jobs": warmup,
        "seed": seed,
        "mean_sojourn_s": summ.overall["mean_sojourn"],
        "mean_sojourn_hw_s": batch_means_ci(soj).half_width,
        "p99_sojourn_s": summ.overall["p99_sojourn"],
        "max_wait_s": summ.overall["max_wait"],
        "equal_split_slowest_load": rho * float(np.mean(SPEEDS)) / SPEEDS[slow],
        "slowest_server_utilisation": float(util[slow]),
        "slowest_server_backlog_jobs": backlog,
        "sojourn_drift_ratio": float(soj[-tenth:].mean() / soj[:tenth].mean()),
        "little_residual": summ.overall["little_residual"],
    }


def run_e3(seed: int = 0, scale: float = 1.0) -> ExperimentResult:
    """E3 at ``scale`` of the full size."""
    n, warmup = sized(scale)
    table = pd.DataFrame([_row(rho, r, n, warmup, seed) for rho in LOADS for r in ROUTINGS])
    fig = new_figure(12, 4.4)
    ax1, ax2 = fig.subplots(1, 2)
    colours = {"random": "tab:red", "JSQ": "tab:blue", "power-of-2": "tab:green", "least-work": "tab:purple"}
    for label, colour in colours.items():
        part = table[table["routing"] == label]
        ax1.plot(part["rho"], part["mean_sojourn_s"], marker="o", ms=3, color=colour, label=label)
        ax2.plot(part["rho"], part["slowest_server_backlog_jobs"] + 1, marker="o", ms=3, color=colour, label=label)
    for ax in (ax1, ax2):
        ax.axvline(0.6, color="0.4", ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_xlabel("total load rho")
        ax.grid(alpha=0.3, which="both")
    ax1.set_ylabel("mean sojourn (s)")
    ax2.set_ylabel("slowest server backlog at last arrival + 1 (jobs)")
    ax1.legend(fontsize=8)
    fig.suptitle("E3: 8 FCFS servers, speeds 0.6..1.4; random split is unstable beyond rho = 0.6 (dotted)",
                 fontsize=10)
    fig.tight_layout()

    rnd = table[table["routing"] == "random"].set_index("rho")
    jsq = table[table["routing"] == "JSQ"].set_index("rho")
    po2 = table[table["routing"] == "power-of-2"].set_index("rho")
    unstable = rnd[rnd["equal_split_slowest_load"] >= 1]
    checks = [
        check("random routing is unstable once the slowest server's equal share exceeds its capacity (rho >= 0.6)",
              bool((unstable["sojourn_drift_ratio"] > 3).all()
                   and (unstable["slowest_server_utilisation"] > 0.97).all()),
              ", ".join(f"rho {r}: drift {d:.1f}x, backlog {b}" for r, d, b in
                        zip(unstable.index, unstable["sojourn_drift_ratio"], unstable["slowest_server_backlog_jobs"],
                            strict=True))),
        check("JSQ and power-of-two stay stable at every load tested (rho <= 0.9)",
              bool((jsq["sojourn_drift_ratio"] < 3).all() and (po2["sojourn_drift_ratio"] < 3).all()),
              f"max drift JSQ {jsq['sojourn_drift_ratio'].max():.2f}, "
              f"power-of-2 {po2['sojourn_drift_ratio'].max():.2f}"),
        check("JSQ beats power-of-two, which beats random, on mean sojourn at every load",
              bool((jsq["mean_sojourn_s"] <= po2["mean_sojourn_s"]).all()
                   and (po2["mean_sojourn_s"] < rnd["mean_sojourn_s"]).all()),
              ", ".join(f"rho {r}: {jsq.loc[r, 'mean_sojourn_s']:.2f} / {po2.loc[r, 'mean_sojourn_s']:.2f} / "
                        f"{rnd.loc[r, 'mean_sojourn_s']:.2f} s" for r in jsq.index)),
    ]
    summary = [
        {
            "rho": r["rho"],
            "routing": r["routing"],
            "mean sojourn (s)": round(r["mean_sojourn_s"], 3),
            "p99 sojourn (s)": round(r["p99_sojourn_s"], 3),
            "slowest util": round(r["slowest_server_utilisation"], 3),
            "slowest backlog (jobs)": r["slowest_server_backlog_jobs"],
            "drift": round(r["sojourn_drift_ratio"], 2),
        }
        for r in table.to_dict("records")
    ]
    return ExperimentResult("e3", table, fig, summary, checks,
                            {"seed": seed, "jobs": n, "warmup": warmup, "speeds": list(SPEEDS), "loads": list(LOADS)})

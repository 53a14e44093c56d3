"""Fidelity of the vLLM profiles: step times against three references, and what they cost per token.

One row per (model, SKU, TP) unit of the vLLM profiles (``data/profiles/profiles.csv``, all
four models). By default, per (model, SKU), the TP degree with the highest analytic ceiling
per GPU on the reference workload below (``planner/profiles/throughput.py``; usually the
smallest that leaves room for KV), plus the four llama-3.1-70b units the cross-checks cover
(A100-80GB and H100, TP 4 and 8): 35 units. ``--all-tp`` takes every TP degree (101 units;
not timed here, and much longer, since the 8B model at TP 4 and 8 calibrates at the highest
request rates and simulation time grows with the rate).

Sections (``--sections``, default all):

* ``steps``: the planner's step time (``StepModel.uniform_step_ms``) divided by the measured
  estimate (aiconfigurator-core's, ``MeasuredEngine.step_ms``) at four steps: 64 decodes at
  1,024 tokens of context (``dec64``), one decode at 1,024 (``dec1``), a 2,048-token prefill
  alone (``pre2k``), and 32 decodes at 1,024 plus a 512-token prefill (``mixed``); with the
  profile's stored error over its whole operating grid (``err_median_pct``/``err_p95_pct``).
  SKUs without measured tables (A100-40GB, L4, MI300X: roofline profiles) show ``-``; their
  stored error is the roofline's on measured SKUs left out of its fit.
* ``splitwise``: ``splitwise_cross_check``: Splitwise's measured llama2-70b static batches
  (A100-80GB and H100, TP 4 and 8, a 2023 serving stack) replayed on the planner's
  llama-3.1-70b profiles: the median of simulated / measured end-to-end time over the 95 runs
  of each unit (and its quartiles in the detail table).
* ``vidur``: the planner's dense time D(n) (no attention) of llama-3.1-70b divided by Vidur's
  V(n) = 80 x (the per-layer medians of its measured linear and element-wise operators + two
  all-reduces of n x 8192 x 2 bytes), from the vendored slice ``data/sources/vidur_profiling/``
  (``planner/profiles/vidur.py`` says exactly what is summed). Vidur's kernels are a 2023-24
  PyTorch stack, and D(n) also holds the embedding, LM head and sampling (about 1-2 %), so a
  ratio below 1 means today's engine runs the same layers faster. The main table shows n = 64
  (a decode step) and n = 2,048 (a prefill chunk); the detail table every vendored n.
* ``capacity``: ``planner.calibrate.calibrate`` on the reference workload, with each profile's
  default engine setting (``search_settings=False``), the default run length and replications
  (3,600 s x 8) and a cache in a temporary folder (or ``--cache-dir``): the calibrated output
  tokens per second per GPU, mix_rps_per_gpu x the class's mean output tokens, and the cost per
  million output tokens at that rate: the median ``usd_per_gpu_hour`` over the catalog's
  available on-demand offers of the SKU (one offer per region; ``planner.catalog``), divided by
  3,600 x tokens/s/GPU, x 10^6. No reserved or spot discount; MI300X has no on-demand offer.
* ``prices``: public API list prices for the same open models, for reference (below).

The reference workload (built in this script, not read from ``scenarios/``): one serving
region (aws:us-east-1), one origin 8 ms away, all four models on vLLM at every TP degree
profiled, FCFS, one class of chat traffic: the Azure LLM inference trace 2023 conversation
lengths (prompt p50 1,020 / p99 4,142 tokens, output p50 129 / p99 601, outputs cut at 1,024;
the simulated law's mean output is 159.6 tokens). The class is named ``interactive`` because
``planner/sim/workload.py`` keys its default lengths by class name; a class named ``chat``
would silently get the ``standard`` (code-trace) lengths. SLOs, all p99: TTFT 2 s (the
answer starts within two seconds, which chat users tolerate; a p99 prompt prefills in under a
second on the data-centre GPUs, so most of it is queueing headroom, and the 70B and MoE models
are not held to an 8B model's target such as the demo's 800 ms), TPOT 100 ms (10 tokens/s per
stream, about twice reading speed), end-to-end 60 s (a common gateway and client timeout).
Queue wait before a 429: 5 s (beyond the TTFT SLO, so admission does not bind before TTFT
does).

API prices (``prices``): USD per million tokens (input / output), list prices as published
around mid-2025 by the providers named, for the same open-weight models or the nearest one
they list; approximate, not fetched by this script, and often for FP8 ("Turbo") deployments
or other hardware (Groq LPUs). Check the providers' pages before relying on them. An API
bills input tokens too, and a reference request has 7.7 prompt tokens per output token
(means 1,223 and 159.6), so the table also gives the *blended* price: what one reference
request costs divided by its output tokens, (input x 1,223 + output x 159.6) / 159.6 per
million. That, not the output list price, is the figure to hold against ``$/M out``, which
charges the whole GPU-hour (prefill included) to the output tokens.

Every figure comes from this machine and this run, with the 1-minute load average before and
after each section (the machine may be shared). Nothing is written but the temporary cache.
The default run took 231 s of wall time on 2 shared cores at a load average of 3.1-3.7
(calibration 212 s, 1,768 replications over the 35 units; the step section 18 s, most of it
compiling the estimator once per unit); again from a warm ``--cache-dir``, about 20 s.
Usage::

    python benchmarks/fidelity.py [--sections steps,splitwise,vidur,capacity,prices] [--all-tp]
                                  [--workers 2] [--cache-dir DIR] [--markdown]

``--markdown`` prints the tables in Markdown, as pasted into ``data/README.d/fidelity.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.catalog import load_catalog  # noqa: E402
from planner.compile_ahead import prepare  # noqa: E402
from planner.profiles import StepModel, load_profiles  # noqa: E402
from planner.profiles.measured import SYSTEMS, MeasuredEngine, NotMeasured  # noqa: E402
from planner.profiles.throughput import ceiling  # noqa: E402
from planner.profiles.vidur import GPUS as VIDUR_GPUS  # noqa: E402
from planner.profiles.vidur import TOKENS as VIDUR_TOKENS  # noqa: E402
from planner.profiles.vidur import vidur_dense  # noqa: E402
from planner.scenario import parse_scenario  # noqa: E402
from planner.sim.replica.static_batch import PLANNER_MODEL, ratio_table, splitwise_cross_check  # noqa: E402
from planner.sim.workload import class_means, workloads_for  # noqa: E402
from planner.workflows.calibrate import calibrate_with_cache as calibrate  # noqa: E402
from planner.workflows.inputs import read_splitwise  # noqa: E402

SECTIONS = ("steps", "splitwise", "vidur", "capacity", "prices")
ENGINE = "vllm"
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "qwen3-235b-a22b")
CLASS = "interactive"
KV_FRACTION = 0.85
STEP_POINTS: tuple[tuple[str, int, int, int], ...] = (
    ("dec64", 64, 1024, 0), ("dec1", 1, 1024, 0), ("pre2k", 0, 0, 2048), ("mixed", 32, 1024, 512))
"""(label, decodes, their context, prefill tokens) of the steps compared with the measured estimate."""
VIDUR_MAIN_TOKENS = (64, 2048)
CROSS_CHECK_UNITS = tuple((PLANNER_MODEL, sku, tp) for sku in ("A100-80GB", "H100") for tp in (4, 8))

REFERENCE_SCENARIO: dict[str, Any] = {
    "name": "fidelity-reference",
    "description": "One region, one origin, one chat class with Azure-conversation lengths; the fidelity benchmark's "
                   "reference workload.",
    "horizon": "1h",
    "seeds": {"base": 20240611},
    "regions": {"serving": [{"key": "aws:us-east-1", "zone": "us"}],
                "origins": [{"name": "us-east", "zone": "us", "residency": ["us"]}],
                "latency_ms": {"us-east": {"aws:us-east-1": 8}}},
    "models": [{"name": m, "engine": ENGINE} for m in MODELS],
    "classes": [{"name": CLASS, "weight": 1.0, "share": 1.0, "ttft_p99_ms": 2000, "tpot_p99_ms": 100,
                 "e2e_p99_ms": 60000, "max_queue_wait_ms": 5000, "latency_budget_ms": 100}],
    "policy": {"name": "fcfs"},
    "capacity": {"tiers": ["on_demand"]},
}

API_PRICES: tuple[tuple[str, str, str, float, float], ...] = (
    # (model, provider, offering, USD per M input tokens, USD per M output tokens): approximate, mid-2025
    ("llama-3.1-8b", "Groq", "Llama 3.1 8B Instant", 0.05, 0.08),
    ("llama-3.1-8b", "Together AI", "Llama 3.1 8B Instruct Turbo (FP8)", 0.18, 0.18),
    ("llama-3.1-70b", "Groq", "Llama 3.3 70B Versatile (same architecture)", 0.59, 0.79),
    ("llama-3.1-70b", "Together AI", "Llama 3.1 70B Instruct Turbo (FP8)", 0.88, 0.88),
    ("llama-3.1-70b", "Fireworks AI", "Llama 3.1 70B Instruct", 0.90, 0.90),
    ("qwen3-32b", "Groq", "Qwen3 32B", 0.29, 0.59),
    ("qwen3-235b-a22b", "Together AI", "Qwen3 235B A22B (FP8, throughput)", 0.20, 0.60),
    ("qwen3-235b-a22b", "Fireworks AI", "Qwen3 235B A22B", 0.22, 0.88),
)


def blended_price(model: str, usd_in: float, usd_out: float) -> float:
    """An API's price per million output tokens of the reference workload, input tokens included:
    (input price x mean prompt + output price x mean output) / mean output."""
    prompt, output = class_means(workloads_for(model, (CLASS,)))[CLASS]
    return (usd_in * prompt + usd_out * output) / output


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def reference_scenario():
    return parse_scenario(REFERENCE_SCENARIO, source="benchmarks/fidelity.py (reference workload)")


def select_units(profiles: pd.DataFrame, all_tp: bool) -> pd.DataFrame:
    """The vLLM profile rows to report (module docstring), sorted by model, SKU and TP."""
    rows = profiles[(profiles["engine"] == ENGINE) & profiles["model"].isin(MODELS)]
    if not all_tp:
        keep = []
        for (model, _sku), group in rows.groupby(["model", "sku"], sort=True):
            prompt, output = class_means(workloads_for(model, (CLASS,)))[CLASS]
            per_gpu = [ceiling(StepModel.from_row(r), kv_capacity_tokens=int(r["kv_capacity_tokens"]),
                               max_num_seqs=int(r["max_num_seqs"]),
                               max_num_batched_tokens=int(r["max_num_batched_tokens"]), prompt=prompt,
                               output=output, kv_fraction=KV_FRACTION).rps / int(r["tp_degree"])
                       for _, r in group.iterrows()]
            best = max(range(len(per_gpu)), key=lambda i: (per_gpu[i], -int(group.iloc[i]["tp_degree"])))
            keep.append(group.index[best])
        cross = rows[[(m, s, int(t)) in CROSS_CHECK_UNITS
                      for m, s, t in zip(rows["model"], rows["sku"], rows["tp_degree"], strict=True)]]
        rows = rows.loc[sorted(set(keep) | set(cross.index))]
    return rows.sort_values(["model", "sku", "tp_degree"]).reset_index(drop=True)


def _key(row: Any) -> tuple[str, str, int]:
    return str(row["model"]), str(row["sku"]), int(row["tp_degree"])


def step_section(units: pd.DataFrame) -> dict[tuple[str, str, int], dict[str, Any]]:
    out = {}
    for _, row in units.iterrows():
        step = StepModel.from_row(row)
        cells: dict[str, Any] = {"dec64_ms": step.uniform_step_ms(64, 1024, 0)}
        measured = None
        if row["sku"] in SYSTEMS and row["source"] == "measured":
            measured = MeasuredEngine(row["model"], row["sku"], int(row["tp_degree"]), ENGINE)
        for label, batch, context, prefill in STEP_POINTS:
            ratio = math.nan
            if measured is not None:
                with contextlib.suppress(NotMeasured):
                    ratio = step.uniform_step_ms(batch, context, prefill) / measured.step_ms(batch, context, prefill)
            cells[label] = ratio
        cells["err"] = f"{row['err_median_pct']:.2f} / {row['err_p95_pct']:.2f}"
        out[_key(row)] = cells
    return out


def splitwise_section(profiles: pd.DataFrame) -> tuple[dict[tuple[str, str, int], float], pd.DataFrame]:
    table = ratio_table(splitwise_cross_check(profiles, read_splitwise(), engine=ENGINE))
    return {(PLANNER_MODEL, r.sku, int(r.tp_degree)): float(r.median_ratio) for r in table.itertuples()}, table


def vidur_section(units: pd.DataFrame) -> tuple[dict[tuple[str, str, int], dict[int, float]], pd.DataFrame]:
    ratios, detail = {}, []
    for _, row in units.iterrows():
        if row["model"] != PLANNER_MODEL or row["sku"] not in VIDUR_GPUS:
            continue
        step = StepModel.from_row(row)
        per_n = {}
        for n in VIDUR_TOKENS:
            v = vidur_dense(row["sku"], int(row["tp_degree"]), n)
            d = step.dense(n)
            per_n[n] = d / v.total_ms
            detail.append({"sku": row["sku"], "tp": int(row["tp_degree"]), "n": n, "planner_D_ms": d,
                           "vidur_linear_ms": v.linear_ms, "vidur_all_reduce_ms": v.all_reduce_ms,
                           "vidur_V_ms": v.total_ms, "D_over_V": d / v.total_ms})
        ratios[_key(row)] = per_n
    return ratios, pd.DataFrame(detail)


def median_on_demand_price() -> dict[str, float]:
    offers = load_catalog().offers
    offers = offers[(offers["tier"] == "on_demand") & offers["available"]]
    return {str(k): float(v) for k, v in offers.groupby("sku")["usd_per_gpu_hour"].median().items()}


def capacity_section(units: pd.DataFrame, workers: int,
                     cache_dir: Path | None) -> tuple[dict[tuple[str, str, int], dict[str, Any]], float]:
    prices = median_on_demand_price()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as temp:
        result = calibrate(reference_scenario(), units, models=sorted(set(units["model"])),
                           skus=sorted(set(units["sku"])), engine="processes", workers=workers,
                           search_settings=False, cache_dir=Path(cache_dir) if cache_dir else Path(temp))
    took = time.perf_counter() - began
    out = {}
    for unit in result.meta["units"]:
        key = (unit["model"], unit["sku"], int(unit["tp_degree"]))
        cells: dict[str, Any] = {"status": unit["status"], "binding": unit.get("binding_metric") or "",
                                 "price": prices.get(unit["sku"], math.nan), "simulations": unit["simulations"],
                                 "cached": unit["cached"]}
        if unit["status"] != "infeasible":
            per_gpu = unit["mix_rps_per_replica"] / int(unit["replica"]["gpus"])
            tokens = per_gpu * unit["classes"][CLASS]["output_mean_tokens"]
            cells.update(rps_replica=unit["mix_rps_per_replica"], utilisation=unit["mix_rps_per_replica"]
                         / unit["ceiling_rps_per_replica"], tok_s_gpu=tokens,
                         usd_per_m=cells["price"] / (3600.0 * tokens) * 1e6 if tokens > 0 else math.nan)
        out[key] = cells
    return out, took


# ---------------------------------------------------------------------------------------------- printing
def _f(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _print_table(header: list[str], rows: list[list[str]], markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) if i > 2 else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True))))
    for row in rows:
        print("  ".join(c.rjust(w) if i > 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))


def main_table(units: pd.DataFrame, steps: dict, splitwise: dict, vidur: dict, capacity: dict,
               markdown: bool) -> None:
    header = ["model", "SKU", "TP", "profile"]
    if steps:
        header += ["dec64 ms"] + [f"{label} /meas" for label, *_ in STEP_POINTS] + ["err med / p95 %"]
    if splitwise:
        header += ["Splitwise sim/meas"]
    if vidur:
        header += [f"Vidur D/V n={n}" for n in VIDUR_MAIN_TOKENS]
    if capacity:
        header += ["out tok/s/GPU", "binding", "$/GPU-h", "$/M out"]
    rows = []
    for _, row in units.iterrows():
        key = _key(row)
        cells = [key[0], key[1], str(key[2]), str(row["source"])]
        if steps:
            s = steps[key]
            cells += [_f(s["dec64_ms"], 1)] + [_f(s[label], 3) for label, *_ in STEP_POINTS] + [s["err"]]
        if splitwise:
            cells += [_f(splitwise.get(key, math.nan), 2)]
        if vidur:
            cells += [_f(vidur.get(key, {}).get(n, math.nan), 2) for n in VIDUR_MAIN_TOKENS]
        if capacity:
            c = capacity.get(key, {})
            if c.get("status") == "infeasible":
                cells += ["infeasible", "", _f(c["price"], 2), "-"]
            else:
                cells += [_f(c.get("tok_s_gpu", math.nan), 0), c.get("binding", ""), _f(c.get("price", math.nan), 2),
                          _f(c.get("usd_per_m", math.nan), 2)]
        rows.append(cells)
    _print_table(header, rows, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--all-tp", action="store_true", help="every TP degree of every (model, SKU)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="calibration cache to reuse (default: a temporary folder, removed after the run)")
    parser.add_argument("--markdown", action="store_true", help="print the tables in Markdown")
    args = parser.parse_args()
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    unknown = sections - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    began = time.perf_counter()
    print(f"fidelity: {_load()}")
    prepare()
    profiles = load_profiles()
    units = select_units(profiles, args.all_tp)
    print(f"{len(units)} units ({'every TP' if args.all_tp else 'best analytic ceiling per GPU, + cross-check units'})")
    steps, splitwise, vidur, capacity = {}, {}, {}, {}
    splitwise_detail = vidur_detail = None
    if "steps" in sections:
        t = time.perf_counter()
        steps = step_section(units)
        print(f"steps: {time.perf_counter() - t:.1f} s; {_load()}")
    if "splitwise" in sections:
        t = time.perf_counter()
        splitwise, splitwise_detail = splitwise_section(profiles)
        print(f"splitwise: {time.perf_counter() - t:.1f} s; {_load()}")
    if "vidur" in sections:
        t = time.perf_counter()
        vidur, vidur_detail = vidur_section(units)
        print(f"vidur: {time.perf_counter() - t:.1f} s; {_load()}")
    if "capacity" in sections:
        print(f"capacity: {_load()}")
        capacity, took = capacity_section(units, args.workers, args.cache_dir)
        sims = sum(c["simulations"] for c in capacity.values() if not c["cached"])
        cached = sum(1 for c in capacity.values() if c["cached"])
        print(f"capacity: {len(capacity)} units calibrated ({cached} from the cache, {sims} replications) in "
              f"{took:.1f} s wall, {args.workers} workers; {_load()}")
    if steps or splitwise or vidur or capacity:
        print()
        main_table(units, steps, splitwise, vidur, capacity, args.markdown)
    if splitwise_detail is not None:
        print("\nSplitwise (llama2-70b, 2023 stack) replayed on llama-3.1-70b: simulated / measured e2e per run\n")
        _print_table(["SKU", "TP", "runs", "median", "q25", "q75"],
                     [[r.sku, str(r.tp_degree), str(r.runs), _f(r.median_ratio, 3), _f(r.q25_ratio, 3),
                       _f(r.q75_ratio, 3)] for r in splitwise_detail.itertuples()], args.markdown)
    if vidur_detail is not None and not vidur_detail.empty:
        print("\nVidur (Llama-2-70B operators, PyTorch) against the planner's llama-3.1-70b D(n), ms per step\n")
        _print_table(["SKU", "TP", "n", "planner D", "Vidur linear", "Vidur all-reduce", "Vidur V", "D / V"],
                     [[r.sku, str(r.tp), str(r.n), _f(r.planner_D_ms, 1), _f(r.vidur_linear_ms, 1),
                       _f(r.vidur_all_reduce_ms, 1), _f(r.vidur_V_ms, 1), _f(r.D_over_V, 2)]
                      for r in vidur_detail.itertuples()], args.markdown)
    if "prices" in sections:
        print("\nPublic API list prices, USD per million tokens (approximate, mid-2025, not fetched); blended: what "
              "one reference request costs per million of its output tokens\n")
        _print_table(["model", "provider", "offering", "input", "output", "blended $/M out"],
                     [[m, p, o, _f(i, 2), _f(out, 2), _f(blended_price(m, i, out), 2)]
                      for m, p, o, i, out in API_PRICES], args.markdown)
    print(f"\ntotal {time.perf_counter() - began:.1f} s wall; {_load()}")


if __name__ == "__main__":
    main()

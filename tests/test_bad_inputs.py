"""A catalogue of bad inputs across every command: each gives exit 3 (or 4), names what is wrong,
writes nothing and leaves earlier outputs intact (``bad_inputs_harness``)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from bad_inputs_content import (  # demo_artefacts: the module fixture that builds what the cases copy
    MOONCAKE,
    cell,
    demo_artefacts,  # noqa: F401
    mooncake_trace,
    one_series,
    plan_pair,
    request_log,
    scenario_4h,
    table,
)
from bad_inputs_harness import BadInput, check_outcome, run_case
from conftest import REPO_ROOT

DEMO_SCENARIO = REPO_ROOT / "scenarios" / "demo.toml"
DEMO_HISTORY = str(REPO_ROOT / "data" / "history" / "demo_history.parquet")


INGEST_LABELS = ("--region", "us-east", "--model", "llama-3.1-8b", "--traffic-class", "interactive")
INGEST_OUTPUTS = ("demand.csv", "demand.histogram.csv")
INGEST_REUSE_OUTPUTS = (*INGEST_OUTPUTS, "demand.reuse.json")


def rates_table(folder: Path, name: str, rows: list[str]) -> str:
    """A rates table (start, end, requests) of one series, and the histogram its lengths come from."""
    (folder / name).write_text("start,end,requests\n" + "".join(r + "\n" for r in rows), encoding="utf-8")
    (folder / "lengths.histogram.csv").write_text(
        "model,traffic_class,measure,bin_lo_tokens,bin_hi_tokens,count\n"
        "llama-3.1-8b,interactive,output_tokens,64,128,3\nllama-3.1-8b,interactive,prompt_tokens,512,1024,3\n",
        encoding="utf-8")
    return name


RATES = ("--format", "rates", "--lengths", "lengths.histogram.csv",
         "--region", "us-east", "--model", "llama-3.1-8b", "--traffic-class", "interactive")
FORECAST_OUTPUTS = ("forecast.csv", "forecast.meta.json")
PLAN_OUTPUTS = ("plan.csv", "plan.flows.csv", "plan.json")
SIM_OUTPUTS = ("sim.csv", "sim.json")
ZERO_QUOTAS = "quotas = { " + ", ".join(f'"{sku}" = 0' for sku in ("L4", "L40S", "A100-80GB", "H100", "H200")) + " }"


def place(folder: Path, forecast: str) -> list[str]:
    return ["place", "--scenario", scenario_4h(folder), "--forecast", forecast, "--out", "plan.csv",
            "--periods", "how:4"]


def simulate(folder: Path, plan: str) -> list[str]:
    return ["simulate", "--scenario", scenario_4h(folder), "--plan", plan, "--out", "sim.csv", "--engine", "local"]


def sweep_4h(folder: Path, vary: str) -> list[str]:
    return ["sweep", "--scenario", scenario_4h(folder), "--history", table(folder, "history.csv", "history"),
            "--vary", vary, "--out", "sweep"]


def _scenario_with(folder: Path, old: str, new: str) -> Path:
    text = DEMO_SCENARIO.read_text(encoding="utf-8")
    assert old in text, old
    path = folder / "scenario.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


# --- files, outputs, exit codes and signals: helpers
def _file(folder: Path, name: str, text: str = "a\n1\n") -> str:
    """An input file whose content does not matter: the case is refused before anything reads it."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return name


def _fifo(folder: Path, name: str) -> str:
    """A named pipe that nothing writes to: opening it for reading would block forever."""
    os.mkfifo(folder / name)
    return name


def _demo() -> str:
    return str(DEMO_SCENARIO)


def _step_log_in_seconds(folder: Path) -> str:
    """A step log of decodes and prefills whose step_ms are the bundled profile of llama-3.1-8b on 1 x H100
    (vllm), in seconds: each step 1,000 x too short."""
    from planner.profiles import load_profiles, profile_for, step_model_of

    step = step_model_of(profile_for(load_profiles(), "llama-3.1-8b", "H100", 1, "vllm"))
    rows = [(batch, batch * 1024, 0) for batch in (1, 2, 4, 8, 16, 32, 64, 128)] + \
        [(0, 0, prompt) for prompt in (128, 256, 512, 1024, 2048, 4096)]
    lines = [f"{b},{k},{p},{step.step_ms(b, k, p, p * (p + 1) / 2) / 1000:.6g}" for b, k, p in rows]
    (folder / "steps.csv").write_text("batch_size,kv_tokens,prefill_tokens,step_ms\n" + "\n".join(lines) + "\n")
    return "steps.csv"


def _deep_toml(folder: Path) -> str:
    (folder / "deep.toml").write_text("a = " + "[" * 100_000 + "\n")
    return "deep.toml"


CASES = [
    BadInput(
        "validate: a scenario that is not TOML",
        lambda d: (d.joinpath("s.toml").write_text("name = [unclosed\n"), ["validate", "s.toml"])[1],
        mentions=("s.toml",),
    ),
    BadInput(
        "validate: a negative SLO",
        lambda d: ["validate", _scenario_with(d, "ttft_p99_ms = ", "ttft_p99_ms = -").name],
        mentions=("scenario.toml", "ttft_p99_ms"),
    ),
    # --- content: malformed, empty, NaN, huge, duplicate, unknown, infeasible
    # validate
    BadInput(
        "validate: a horizon of 100000 weeks",
        lambda d: ["validate", _scenario_with(d, 'horizon = "14d"', 'horizon = "100000w"').name],
        mentions=("scenario.toml", "horizon", "one year"),
    ),
    BadInput(
        "validate: an unknown zone as the only residency entry",
        lambda d: ["validate", _scenario_with(d, 'residency = ["eu"]', 'residency = ["xx"]').name],
        mentions=("scenario.toml", "residency[0]", 'unknown zone "xx"', "1 problem"),
    ),
    BadInput(
        "validate: a binary file as the scenario",
        lambda d: (d.joinpath("s.toml").write_bytes(bytes(range(256))), ["validate", "s.toml"])[1],
        mentions=("s.toml", "UTF-8"),
    ),
    # catalog, profiles
    BadInput("catalog --skus: an unknown --region", lambda d: ["catalog", "--skus", "--region", "mars-north1"],
             mentions=("--region", "mars-north1", "aws:us-east-1", "gcp:europe-west4")),
    BadInput("catalog: an unknown tier", lambda d: ["catalog", "--tier", "gold"], mentions=("tier", "gold")),
    BadInput("profiles: an unknown model", lambda d: ["profiles", "--model", "gpt-9"], mentions=("gpt-9",)),
    BadInput(
        "step-time: a batch x context far beyond the replica's KV cache",
        lambda d: ["step-time", "--model", "llama-3.1-8b", "--sku", "H100", "--tp", "1", "--batch", "256",
                   "--context", "100000", "--prefill", "0"],
        mentions=("--batch 256 x --context 100,000 = 25,600,000 tokens", "(411,520 tokens)",
                  "at most 4 sequences fit"),
    ),
    BadInput(
        "step-time: a context beyond the model's maximum",
        lambda d: ["step-time", "--model", "llama-3.1-8b", "--sku", "H100", "--tp", "1", "--batch", "1",
                   "--context", "1000000", "--prefill", "0"],
        mentions=("--context:", "maximum context of 131,072 tokens"),
    ),
    BadInput(
        "profiles fit: step times in seconds, against the bundled profile of the key",
        lambda d: ["profiles", "fit", _step_log_in_seconds(d), "--model", "llama-3.1-8b",
                   "--sku", "H100", "--tp", "1", "--out", "mine.csv"],
        mentions=("steps.csv", "1,000 x shorter than the bundled profile of llama-3.1-8b on 1 x H100",
                  "seconds rather than milliseconds", "--accept-outlier"), earlier=("mine.csv",),
    ),
    BadInput(
        "profiles fit: step times in seconds, for a key without a bundled profile",
        lambda d: ["profiles", "fit", _step_log_in_seconds(d), "--model", "qwen3-32b",
                   "--sku", "A100-40GB", "--tp", "2", "--engine", "sglang", "--out", "mine.csv"],
        mentions=("steps.csv", "shorter than reading qwen3-32b's bf16 weights once", "no GPU",
                  "seconds rather than milliseconds", "--accept-outlier"), earlier=("mine.csv",),
    ),
    # ingest
    BadInput(
        "ingest: a CSV line with too many fields",
        lambda d: ["ingest", request_log(d, "log.csv", "2023-11-16 18:16:46.6805900,374,44,99,extra"),
                   "--format", "azure", "--out", "demand.csv", *INGEST_LABELS],
        mentions=("log.csv, line 22", "5 field(s) where the header has 3"), earlier=INGEST_OUTPUTS,
    ),
    BadInput(
        "ingest: true/false token counts in Parquet",
        lambda d: (pd.DataFrame({"TIMESTAMP": ["2023-11-16 18:15:46", "2023-11-16 18:15:50"],
                                 "ContextTokens": [True, False], "GeneratedTokens": [44, 109]}).to_parquet(
            d / "log.parquet"), ["ingest", "log.parquet", "--format", "azure", "--out", "demand.csv",
                                 *INGEST_LABELS])[1],
        mentions=("log.parquet, column 'ContextTokens'", "true/false"), earlier=INGEST_OUTPUTS,
    ),
    BadInput(
        "ingest: millisecond offsets read as epoch times (1970)",
        lambda d: (d.joinpath("log.csv").write_text("t,p,o\n0,10,5\n1500,12,7\n"),
                   ["ingest", "log.csv", "--map", "ts=t,prompt_tokens=p,output_tokens=o,ts_unit=ms", "--out",
                    "demand.csv", *INGEST_LABELS])[1],
        mentions=("log.csv, data row 1, column 't'", "1970-01-01", "--start"), earlier=INGEST_OUTPUTS,
    ),
    BadInput(
        "ingest: Mooncake hash_ids that is a string, not a list",
        lambda d: ["ingest", mooncake_trace(d, "trace.jsonl", 2, "0 1 2"), *MOONCAKE, "--out", "demand.csv",
                   *INGEST_LABELS],
        mentions=("trace.jsonl, record 3, column 'hash_ids'", "not a list of integers"),
        earlier=INGEST_REUSE_OUTPUTS,
    ),
    BadInput(
        "ingest: Mooncake hash_ids holding a float",
        lambda d: ["ingest", mooncake_trace(d, "trace.jsonl", 5, [0, 44974, 1.5]), *MOONCAKE, "--out",
                   "demand.csv", *INGEST_LABELS],
        mentions=("trace.jsonl, record 6, column 'hash_ids'", "holds 1.5"), earlier=INGEST_REUSE_OUTPUTS,
    ),
    BadInput(
        "ingest: --block-tokens 0",
        lambda d: ["ingest", mooncake_trace(d, "trace.jsonl"), *MOONCAKE, "--block-tokens", "0", "--out",
                   "demand.csv", *INGEST_LABELS],
        mentions=("--block-tokens", "positive"), earlier=INGEST_REUSE_OUTPUTS,
    ),
    BadInput(
        "ingest: session_id mapped to a column the log lacks",
        lambda d: (d.joinpath("log.csv").write_text("t,p,o\n2026-01-01T00:00:00Z,10,5\n"),
                   ["ingest", "log.csv", "--map", "ts=t,prompt_tokens=p,output_tokens=o,session_id=conversation",
                    "--out", "demand.csv", *INGEST_LABELS])[1],
        mentions=("log.csv, column 'conversation'", "session_id"), earlier=INGEST_REUSE_OUTPUTS,
    ),
    BadInput(
        "ingest --format rates: two intervals of one series overlap",
        lambda d: ["ingest", rates_table(d, "rates.csv", ["2026-01-01T00:00:00Z,2026-01-01T02:00:00Z,10",
                                                         "2026-01-01T01:00:00Z,2026-01-01T03:00:00Z,5"]),
                   *RATES, "--out", "demand.csv"],
        mentions=("rates.csv, data row 1, column 'start' and", "rates.csv, data row 2, column 'start'", "overlap"),
        earlier=INGEST_OUTPUTS,
    ),
    BadInput(
        "ingest --format rates: a negative count",
        lambda d: ["ingest", rates_table(d, "rates.csv", ["2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,-10"]),
                   *RATES, "--out", "demand.csv"],
        mentions=("rates.csv, data row 1, column 'requests'", "negative"), earlier=INGEST_OUTPUTS,
    ),
    BadInput(
        "ingest --format rates: no --lengths",
        lambda d: ["ingest", rates_table(d, "rates.csv", ["2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,10"]),
                   "--format", "rates", *INGEST_LABELS, "--out", "demand.csv"],
        mentions=("--lengths HISTOGRAM",), earlier=INGEST_OUTPUTS,
    ),
    # forecast: one demo series, 8 days
    BadInput(
        "forecast: --horizon 0",
        lambda d: ["forecast", table(d, "history.csv", "history", one_series), "--out", "forecast.csv",
                   "--horizon", "0h"],
        mentions=("--horizon",), earlier=FORECAST_OUTPUTS,
    ),
    BadInput(
        "forecast: --quantiles 1.5",
        lambda d: ["forecast", table(d, "history.csv", "history", one_series), "--out", "forecast.csv",
                   "--quantiles", "0.5,1.5"],
        mentions=("--quantiles", "1.5"), earlier=FORECAST_OUTPUTS,
    ),
    BadInput(
        "forecast: an hour of 1e30 requests",
        lambda d: ["forecast", table(d, "history.csv", "history", lambda f: cell("requests", 5, 1e30)(one_series(f))),
                   "--out", "forecast.csv"],
        mentions=("history.csv, row 6 (the header is row 0), column requests", "above the ceiling"),
        earlier=FORECAST_OUTPUTS,
    ),
    BadInput(
        "forecast: true/false request counts",
        lambda d: ["forecast", table(d, "history.csv", "history",
                                     lambda f: one_series(f).assign(requests=lambda g: g["requests"] > 40_000)),
                   "--out", "forecast.csv"],
        mentions=("history.csv, column requests", "true/false"), earlier=FORECAST_OUTPUTS,
    ),
    BadInput(
        "forecast: epoch seconds in ts",
        lambda d: ["forecast", table(d, "history.csv", "history", lambda f: one_series(f).assign(
            ts=lambda g: pd.to_datetime(g["ts"], utc=True).astype("datetime64[s, UTC]").astype("int64"))),
                   "--out", "forecast.csv"],
        mentions=("history.csv, row 1 (the header is row 0), column ts", "ts_unit"), earlier=FORECAST_OUTPUTS,
    ),
    # place: the demo scenario over 4 hours, the built forecast broken
    BadInput(
        "place: a forecast without one of the scenario's origins",
        lambda d: place(d, table(d, "forecast.csv", "forecast", lambda f: f[f["region"] != "eu-west"])),
        mentions=("forecast.csv, column 'region'", "origin(s) eu-west"), earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "place: a forecast with a traffic class the scenario does not declare",
        lambda d: place(d, table(d, "forecast.csv", "forecast", lambda f: f.assign(
            traffic_class=f["traffic_class"].where(f.index != f.index[3], "voice-agents")))),
        mentions=("forecast.csv, row 4 (the header is row 0), column 'traffic_class'", "traffic class(s) voice-agents",
                  "the scenario's traffic classes: "), earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "place: a forecast of one hour for a 4-hour horizon",
        lambda d: place(d, table(d, "forecast.csv", "forecast", lambda f: f[f["ts"] == f["ts"].min()])),
        mentions=("forecast.csv, column 'ts'", "covers 1 of the 4 hours"), earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "place: q50 above q99",
        lambda d: place(d, table(d, "forecast.csv", "forecast", cell("q50", 3, 1e6))),
        mentions=("forecast.csv, row 4 (the header is row 0), columns 'q50' and 'q90'", "must not decrease"),
        earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "place: a quantile of 1e30 requests",
        lambda d: place(d, table(d, "forecast.csv", "forecast", cell("q95", 3, 1e30))),
        mentions=("forecast.csv, row 4 (the header is row 0), column 'q95'", "ceiling"), earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "place: an empty region cell",
        lambda d: place(d, table(d, "forecast.csv", "forecast", cell("region", 3, None))),
        mentions=("forecast.csv, row 4 (the header is row 0), column 'region'", "empty region"),
        earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "place: an empty forecast (the header only)",
        lambda d: place(d, table(d, "forecast.csv", "forecast", lambda f: f.iloc[0:0])),
        mentions=("forecast.csv", "no rows"), earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "place: a model without a step-time profile (validate's error, not infeasible)",
        lambda d: ["place", "--scenario", scenario_4h(d, 'name = "llama-3.1-8b"', 'name = "mistral-7b"'),
                   "--forecast", table(d, "forecast.csv", "forecast", lambda f: f.assign(
                       model=f["model"].replace("llama-3.1-8b", "mistral-7b"))), "--out", "plan.csv",
                   "--periods", "how:4"],
        mentions=("scenario.toml: the scenario does not match the bundled data", "model mistral-7b has no profile",
                  "planner profiles"), earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "plan: a model without a step-time profile",
        lambda d: ["plan", "--scenario", scenario_4h(d, 'name = "llama-3.1-8b"', 'name = "mistral-7b"'),
                   "--history", _file(d, "h.csv"), "--out", "out"],
        mentions=("scenario.toml: the scenario does not match the bundled data", "model mistral-7b has no profile"),
        earlier=("out/plan.csv",),
    ),
    BadInput(
        "place: every GPU quota 0 (infeasible)",
        lambda d: ["place", "--scenario", scenario_4h(d, "quotas = {}", ZERO_QUOTAS), "--forecast",
                   table(d, "forecast.csv", "forecast"), "--out", "plan.csv", "--periods", "how:4"],
        exit_codes=(4,), mentions=("infeasible (quota)", "a quota of 0 GPUs (from the scenario)",
                                   "H100 in aws:us-east-1", "raise the GPU quota"), earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "place: spot the only tier, for classes that are not spot-tolerant (infeasible)",
        lambda d: ["place", "--scenario",
                   scenario_4h(d, 'tiers = ["reserved", "on_demand", "spot"]', 'tiers = ["spot"]'),
                   "--forecast", table(d, "forecast.csv", "forecast"), "--out", "plan.csv", "--periods", "how:4"],
        exit_codes=(4,), mentions=("infeasible (spot only)", "class interactive is not spot_tolerant",
                                   "spot is the only tier enabled", "enable on_demand or reserved in capacity.tiers",
                                   "spot_tolerant = true"), earlier=PLAN_OUTPUTS,
    ),
    # simulate: the built plan and its flows, one of them broken
    BadInput(
        "simulate: a plan naming a model the scenario lacks",
        lambda d: simulate(d, plan_pair(d, plan=cell("model", 2, "qwen3-32b"))),
        mentions=("plan.csv, row 3 (the header is row 0), column 'model'", "qwen3-32b",
                  "the scenario's models: llama-3.1-8b, llama-3.1-70b"), earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: flows to a serving region the scenario does not declare",
        lambda d: simulate(d, plan_pair(d, flows=cell("region", 2, "aws:mars-1"))),
        mentions=("plan.flows.csv, row 3 (the header is row 0), column 'region'", "aws:mars-1",
                  "the scenario's serving regions: aws:us-east-1, gcp:us-central1"), earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: a NaN rate in the flows",
        lambda d: simulate(d, plan_pair(d, flows=cell("rps", 2, float("nan")))),
        mentions=("plan.flows.csv, row 3 (the header is row 0), column 'rps'",), earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: the same plan row twice",
        lambda d: simulate(d, plan_pair(d, plan=lambda f: pd.concat([f, f.iloc[[3]]]))),
        mentions=("plan.csv, rows 4 and", "added together"), earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: a million replicas",
        lambda d: simulate(d, plan_pair(d, plan=cell("replicas", 0, 1_000_000))),
        mentions=("plan.csv", "batch slots", "ceiling"), earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: a demand of a billion requests per second",
        lambda d: simulate(d, plan_pair(d, flows=cell("rps", 0, 1e9))),
        mentions=("--sim-duration", "requests per replication", "requests per second, not per hour"),
        earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: --sim-duration 0.001s",
        lambda d: [*simulate(d, plan_pair(d)), "--sim-duration", "0.001s"],
        mentions=("--sim-duration", "minimum of 60 s"), earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: --replications 0",
        lambda d: [*simulate(d, plan_pair(d)), "--replications", "0"],
        mentions=("--replications",), earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: a negative replica count",
        lambda d: simulate(d, plan_pair(d, plan=cell("replicas", 1, -2))),
        mentions=("plan.csv, row 2 (the header is row 0), column 'replicas'", "whole number >= 0"),
        earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: --forecast without one of the scenario's origins",
        lambda d: [*simulate(d, plan_pair(d)), "--forecast",
                   table(d, "forecast.csv", "forecast", lambda f: f[f["region"] != "us-west"])],
        mentions=("forecast.csv, column 'region'", "origin(s) us-west"), earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: a one-minute window that sees no request of a class with demand",
        lambda d: [*simulate(d, plan_pair(d, flows=lambda f: f.assign(rps=f["rps"] / 10_000))), "--sim-duration", "60s",
                   "--replications", "1"],
        mentions=("--sim-duration", "saw no request", "no evidence"), earlier=SIM_OUTPUTS,
    ),
    # calibrate, plan, report, experiment
    BadInput(
        "calibrate: --pool-replicas 100000",
        lambda d: ["calibrate", "--scenario", scenario_4h(d), "--out", "capacity.csv", "--pool-replicas", "100000"],
        mentions=("--pool-replicas", "ceiling"), earlier=("capacity.csv", "capacity.json"),
    ),
    BadInput(
        "sweep: --vary naming a class the scenario lacks",
        lambda d: sweep_4h(d, "classes.nope.weight=1,2"),
        mentions=("--vary: 'classes.nope.weight=1'", "no entry named 'nope'"), earlier=("sweep/sweep.csv",),
    ),
    BadInput(
        "sweep: --vary demand-scale with a factor that is not a number",
        lambda d: sweep_4h(d, "demand-scale=1,double"),
        mentions=("--vary: 'double'", "not a number", "--vary demand-scale=1,1.5,2"), earlier=("sweep/sweep.csv",),
    ),
    BadInput(
        "sweep: --vary demand-scale selecting a region the scenario lacks",
        lambda d: sweep_4h(d, "demand-scale=1,region=mars:2"),
        mentions=("--vary: 'region=mars:2'", "us-east, us-west, eu-west, ap-northeast"), earlier=("sweep/sweep.csv",),
    ),
    BadInput(
        "place: --demand-scale 0",
        lambda d: [*place(d, table(d, "forecast.csv", "forecast")), "--demand-scale", "0"],
        mentions=("--demand-scale", "must be a finite number > 0", "remove it from the scenario"),
        earlier=PLAN_OUTPUTS,
    ),
    BadInput(
        "plan: --demand-scale class=batch:0",
        lambda d: ["plan", "--scenario", scenario_4h(d), "--history", table(d, "history.csv", "history"),
                   "--out", "out", "--demand-scale", "class=batch:0"],
        mentions=("--demand-scale", "'class=batch:0'", "> 0"), earlier=("out/plan.csv",),
    ),
    BadInput(
        "report: --demand-scale 0",
        lambda d: ["report", "--month", "2026-11", "--scenario", scenario_4h(d), "--history",
                   table(d, "history.csv", "history"), "--reports", "reports", "--demand-scale", "0"],
        mentions=("--demand-scale", "> 0"), earlier=("reports/2026-10/report.md",),
    ),
    BadInput(
        "sweep: --vary demand-scale=0,1",
        lambda d: sweep_4h(d, "demand-scale=0,1"),
        mentions=("--vary", "'0'", "> 0"), earlier=("sweep/sweep.csv",),
    ),
    BadInput(
        "plan: --sim-duration 0.001s",
        lambda d: ["plan", "--scenario", scenario_4h(d), "--history", table(d, "history.csv", "history"),
                   "--out", "out", "--sim-duration", "0.001s"],
        mentions=("--sim-duration", "minimum of 60 s"),
    ),
    BadInput(
        "report: --replications 0",
        lambda d: ["report", "--month", "2026-11", "--scenario", scenario_4h(d), "--history",
                   table(d, "history.csv", "history"), "--reports", "reports", "--replications", "0"],
        mentions=("--replications",),
    ),
    BadInput(
        "experiment: --scale 0",
        lambda d: ["experiment", "e1", "--out", "experiment", "--scale", "0"],
        mentions=("--scale",),
    ),
    # --- files, outputs, exit codes and signals
    BadInput("place: the --forecast file is missing",
             lambda d: ["place", "--scenario", _demo(), "--forecast", "missing.csv", "--out", "plan.csv"],
             mentions=("--forecast", "missing.csv", "file not found"), earlier=PLAN_OUTPUTS),
    BadInput("place: the --capacity file is missing",
             lambda d: ["place", "--scenario", _demo(), "--forecast", _file(d, "f.csv"), "--capacity", "cap.csv",
                        "--out", "plan.csv"],
             mentions=("--capacity", "cap.csv", "file not found"), earlier=PLAN_OUTPUTS),
    BadInput("place: the --scenario is a folder",
             lambda d: (d.joinpath("s.toml").mkdir(),
                        ["place", "--scenario", "s.toml", "--forecast", _file(d, "f.csv"), "--out", "plan.csv"])[1],
             mentions=("--scenario", "s.toml", "is a folder")),
    BadInput("place: the --forecast is a named pipe",
             lambda d: ["place", "--scenario", _demo(), "--forecast", _fifo(d, "f.csv"), "--out", "plan.csv"],
             mentions=("--forecast", "f.csv", "named pipe"), timeout_s=60),
    BadInput("place: --out is the --forecast file",
             lambda d: ["place", "--scenario", _demo(), "--forecast", _file(d, "f.csv"), "--out", "f.csv"],
             mentions=("--out f.csv", "overwrite", "--forecast"), earlier=("f.csv",)),
    BadInput("place: --debug inside a file",
             lambda d: ["place", "--scenario", _demo(), "--forecast", _file(d, "f.csv"), "--out", "plan.csv",
                        "--debug", _file(d, "blocker") + "/lp"],
             mentions=("--debug", "blocker", "is a file")),
    BadInput("plan: the --history file is missing",
             lambda d: ["plan", "--scenario", _demo(), "--history", "missing.parquet", "--out", "out"],
             mentions=("--history", "missing.parquet", "file not found"), earlier=("out/plan.csv",)),
    BadInput("plan: --cache-dir is a file",
             lambda d: ["plan", "--scenario", _demo(), "--history", _file(d, "h.csv"), "--out", "out",
                        "--cache-dir", _file(d, "cache")],
             mentions=("--cache-dir cache", "is a file"), earlier=("out/plan.csv",)),
    BadInput("calibrate: --cache-dir inside a file",
             lambda d: ["calibrate", "--scenario", _demo(), "--out", "cap.csv",
                        "--cache-dir", _file(d, "cache") + "/c"],
             mentions=("--cache-dir cache/c", "is a file"), earlier=("cap.csv", "cap.json")),
    BadInput("report: --cache-dir is a file",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", _file(d, "h.csv"),
                        "--reports", "reports", "--cache-dir", _file(d, "cache")],
             mentions=("--cache-dir cache", "is a file")),
    BadInput("plan: --out is a file",
             lambda d: ["plan", "--scenario", _demo(), "--history", _file(d, "h.csv"), "--out", _file(d, "out")],
             mentions=("--out", "is a file")),
    BadInput("plan: --out holds files that are not a plan's",
             lambda d: ["plan", "--scenario", _demo(), "--history", _file(d, "h.csv"), "--out", "out"],
             mentions=("--out out", "notes.txt"), earlier=("out/notes.txt", "out/plan.csv")),
    BadInput("report: the --history file is missing",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", "missing.parquet",
                        "--reports", "reports"],
             mentions=("--history", "missing.parquet", "file not found"), earlier=("reports/2026-10/report.md",)),
    BadInput("report: the --history is a named pipe",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", _fifo(d, "h.csv"),
                        "--reports", "reports"],
             mentions=("--history", "h.csv", "named pipe"), timeout_s=60),
    BadInput("report: --reports is a file",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", _file(d, "h.csv"),
                        "--reports", _file(d, "reports")],
             mentions=("--reports", "is a file")),
    BadInput("forecast: the HISTORY file is missing",
             lambda d: ["forecast", "missing.csv", "--out", "f.csv"],
             mentions=("missing.csv", "file not found"), earlier=("f.csv", "f.meta.json")),
    BadInput("forecast: the HISTORY is a named pipe",
             lambda d: ["forecast", _fifo(d, "h.csv"), "--out", "f.csv"],
             mentions=("h.csv", "named pipe"), timeout_s=60),
    BadInput("forecast: a requests column empty in every row",
             lambda d: ["forecast", _file(d, "h.csv", "ts,region,model,traffic_class,requests\n" + "".join(
                 f"2026-10-01T{h:02d}:00:00Z,us-east,llama-3.1-8b,standard,\n" for h in range(24))),
                        "--out", "f.csv"],
             mentions=("h.csv", "requests", "empty in every row"), earlier=("f.csv", "f.meta.json")),
    BadInput("forecast: --out is the HISTORY file",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "h.csv"],
             mentions=("--out h.csv", "overwrite"), earlier=("h.csv",)),
    BadInput("forecast: --metadata is the --out file",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "f.csv", "--metadata", "f.csv"],
             mentions=("--metadata", "--out")),
    BadInput("forecast: --out inside a file",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", _file(d, "blocker") + "/f.csv"],
             mentions=("--out", "blocker", "is a file")),
    BadInput("forecast: --plots is a file",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "f.csv", "--plots", _file(d, "png")],
             mentions=("--plots", "png", "is a file")),
    BadInput("simulate: the --plan file is missing",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", "missing.csv", "--out", "slo.csv"],
             mentions=("--plan", "missing.csv", "file not found"), earlier=("slo.csv", "slo.json")),
    BadInput("simulate: the --flows file is missing",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", _file(d, "plan.csv"), "--flows", "nope.csv",
                        "--out", "slo.csv"],
             mentions=("--flows", "nope.csv", "file not found")),
    BadInput("simulate: the --histogram file is missing",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", _file(d, "plan.csv"),
                        "--flows", _file(d, "plan.flows.csv"), "--histogram", "hist.csv", "--out", "slo.csv"],
             mentions=("--histogram", "hist.csv", "file not found")),
    BadInput("simulate: --out inside a file",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", _file(d, "plan.csv"),
                        "--flows", _file(d, "plan.flows.csv"), "--out", _file(d, "blocker") + "/slo.csv"],
             mentions=("--out", "blocker", "is a file")),
    BadInput("calibrate: the --histogram folder holds no histogram",
             lambda d: (d.joinpath("hist.csv").mkdir(),
                        ["calibrate", "--scenario", _demo(), "--histogram", "hist.csv", "--out", "cap.csv"])[1],
             mentions=("--histogram", "hist.csv", "holds no token-length histogram"), earlier=("cap.csv", "cap.json")),
    BadInput("calibrate: a --histogram for a model the scenario lacks",
             lambda d: (d.joinpath("q.histogram.csv").write_text(
                 "model,traffic_class,measure,bin_lo_tokens,bin_hi_tokens,count\n"
                 "qwen3-32b,interactive,prompt_tokens,64,128,5\n"),
                 ["calibrate", "--scenario", _demo(), "--histogram", ".", "--out", "cap.csv"])[1],
             mentions=("--histogram", "qwen3-32b", "does not declare"), earlier=("cap.csv", "cap.json")),
    BadInput("calibrate: a zero-length bin in a --histogram",
             lambda d: (d.joinpath("z.histogram.csv").write_text(
                 "model,traffic_class,measure,bin_lo_tokens,bin_hi_tokens,count\n"
                 "llama-3.1-8b,interactive,prompt_tokens,0,0,5\n"),
                 ["calibrate", "--scenario", _demo(), "--histogram", "z.histogram.csv", "--out", "cap.csv"])[1],
             mentions=("z.histogram.csv", "bin_hi_tokens"), earlier=("cap.csv", "cap.json")),
    BadInput("calibrate: --out inside a file",
             lambda d: ["calibrate", "--scenario", _demo(), "--out", _file(d, "blocker") + "/cap.csv"],
             mentions=("--out", "blocker", "is a file")),
    BadInput("ingest: a log file is missing",
             lambda d: ["ingest", "missing.csv", "--out", "h.csv"],
             mentions=("missing.csv", "file not found"), earlier=("h.csv", "h.histogram.csv")),
    BadInput("ingest: a log is a named pipe",
             lambda d: ["ingest", _fifo(d, "log.csv"), "--out", "h.csv"],
             mentions=("log.csv", "named pipe"), timeout_s=60),
    BadInput("ingest: --histogram-out is one of the logs",
             lambda d: ["ingest", _file(d, "log.csv"), "--out", "h.csv", "--histogram-out", "log.csv"],
             mentions=("--histogram-out", "overwrite"), earlier=("log.csv",)),
    BadInput("ingest: --out inside a file",
             lambda d: ["ingest", _file(d, "log.csv"), "--out", _file(d, "blocker") + "/h.csv"],
             mentions=("--out", "blocker", "is a file")),
    BadInput("experiment: --out is a file",
             lambda d: ["experiment", "e1", "--out", _file(d, "e1")],
             mentions=("--out", "e1", "is a file")),
    BadInput("validate: the scenario is a folder",
             lambda d: (d.joinpath("s.toml").mkdir(), ["validate", "s.toml"])[1],
             mentions=("s.toml", "is a folder")),
    BadInput("validate: the scenario is a named pipe",
             lambda d: ["validate", _fifo(d, "s.toml")],
             mentions=("s.toml", "named pipe"), timeout_s=60),
    BadInput("validate: a deeply nested TOML",
             lambda d: ["validate", _deep_toml(d)],
             mentions=("deep.toml", "too deeply")),
    BadInput("simulate: --seed -1",
             lambda d: ["simulate", "--scenario", _demo(), "--plan", _file(d, "plan.csv"),
                        "--flows", _file(d, "plan.flows.csv"), "--out", "slo.csv", "--seed", "-1"],
             mentions=("--seed", "-1")),
    BadInput("experiment: --seed -1",
             lambda d: ["experiment", "e1", "--out", "exp", "--seed", "-1"], mentions=("--seed", "-1")),
    BadInput("forecast: --seed -1",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "f.csv", "--seed", "-1"], mentions=("--seed",)),
    BadInput("calibrate: --seed -1",
             lambda d: ["calibrate", "--scenario", _demo(), "--out", "cap.csv", "--seed", "-1"],
             mentions=("--seed",)),
    BadInput("plan: --seed -1",
             lambda d: ["plan", "--scenario", _demo(), "--history", _file(d, "h.csv"), "--out", "out",
                        "--seed", "-1"], mentions=("--seed",)),
    BadInput("report: --month 2026-13",
             lambda d: ["report", "--month", "2026-13", "--scenario", _demo(), "--history", DEMO_HISTORY,
                        "--reports", "reports"], mentions=("--month", "2026-13")),
    BadInput("report: --month in year 0",
             lambda d: ["report", "--month", "0000-01", "--scenario", _demo(), "--history", DEMO_HISTORY,
                        "--reports", "reports"], mentions=("--month", "0000-01", "1970-2199")),
    BadInput("report: --month with a trailing newline",
             lambda d: ["report", "--month", "2026-11\n", "--scenario", _demo(), "--history", DEMO_HISTORY,
                        "--reports", "reports"], mentions=("--month",)),
    BadInput("report: --as-of after the month's first instant",
             lambda d: ["report", "--month", "2026-11", "--as-of", "2026-11-15", "--scenario", _demo(),
                        "--history", DEMO_HISTORY, "--reports", "reports"], mentions=("--as-of",)),
    BadInput("report: history that ends two months before the month",
             lambda d: ["report", "--month", "2027-01", "--scenario", _demo(), "--history", DEMO_HISTORY,
                        "--reports", "reports"],
             mentions=("demo_history.parquet", "2026-10-31T23:00:00Z", "2027-01-01", "--allow-stale-history"),
             earlier=("reports/2026-12/report.md",)),
    BadInput("report: a --month before the history begins (no --as-of given)",
             lambda d: ["report", "--month", "2019-01", "--scenario", _demo(), "--history", DEMO_HISTORY,
                        "--reports", "reports"],
             mentions=("demo_history.parquet", "no rows before --month 2019-01", "2025-10-01T00:00:00Z"),
             earlier=("reports/2018-12/report.md",)),
    BadInput("plan: --as-of months after the history's end",
             lambda d: ["plan", "--scenario", _demo(), "--history", DEMO_HISTORY, "--out", "out",
                        "--as-of", "2027-03-01T00:00:00Z"],
             mentions=("--as-of", "2027-03-01T00:00:00Z", "2026-10-31T23:00:00Z"), earlier=("out/plan.csv",)),
    BadInput("report: --seed -1",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", _file(d, "h.csv"),
                        "--reports", "reports", "--seed", "-1"], mentions=("--seed",)),
    BadInput("forecast: --partial-hours drop",
             lambda d: ["forecast", _file(d, "h.csv"), "--out", "f.csv", "--partial-hours", "drop"],
             mentions=("--partial-hours", "drop", "mask", "keep"), earlier=("f.csv", "f.meta.json")),
    BadInput("report: --partial-hours drop",
             lambda d: ["report", "--month", "2026-11", "--scenario", _demo(), "--history", _file(d, "h.csv"),
                        "--reports", "reports", "--partial-hours", "drop"],
             mentions=("--partial-hours", "drop", "mask", "keep")),
    BadInput("history: --limit 99999999999999999999",
             lambda d: ["history", "--limit", "99999999999999999999"], mentions=("--limit",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_cleanly(case: BadInput, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path)
    assert check_outcome(case, outcome) == [], outcome.stderr


def _unreadable(folder: Path, name: str) -> str:
    """A scenario file this user may not read (mode 000)."""
    _file(folder, name, "name = \"x\"\n")
    (folder / name).chmod(0)
    return name


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
@pytest.mark.parametrize("command", [["validate", "s.toml"],
                                     ["place", "--scenario", "s.toml", "--forecast", "f.csv", "--out", "plan.csv"]])
def test_an_unreadable_scenario_is_refused_alike_by_validate_and_place(command: list[str], tmp_path: Path) -> None:
    case = BadInput(f"{command[0]}: a scenario without read permission",
                    lambda d: (_unreadable(d, "s.toml"), _file(d, "f.csv"), command)[2],
                    mentions=("s.toml", "cannot read the file"))
    outcome = run_case(case, tmp_path)
    assert check_outcome(case, outcome) == [], outcome.stderr


def test_a_month_before_the_history_does_not_blame_an_as_of_the_user_did_not_pass(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name.startswith("report: a --month before the history begins"))
    outcome = run_case(case, tmp_path)
    assert outcome.exit_code == 3 and "--as-of" not in outcome.stderr, outcome.stderr

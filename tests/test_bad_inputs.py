"""A catalogue of bad inputs across every command: each gives exit 3 (or 4), names what is wrong,
writes nothing and leaves earlier outputs intact (``bad_inputs_harness``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from bad_inputs_content import (  # demo_artefacts: the module fixture that builds what the cases copy
    cell,
    demo_artefacts,  # noqa: F401
    one_series,
    plan_pair,
    request_log,
    scenario_4h,
    table,
)
from bad_inputs_harness import BadInput, check_outcome, run_case
from conftest import REPO_ROOT

DEMO_SCENARIO = REPO_ROOT / "scenarios" / "demo.toml"


INGEST_LABELS = ("--region", "us-east", "--model", "llama3-8b", "--traffic-class", "interactive")
INGEST_OUTPUTS = ("demand.csv", "demand.histogram.csv")
FORECAST_OUTPUTS = ("forecast.csv", "forecast.meta.json")
PLAN_OUTPUTS = ("plan.csv", "plan.flows.csv", "plan.json")
SIM_OUTPUTS = ("sim.csv", "sim.json")
ZERO_QUOTAS = "quotas = { " + ", ".join(f'"{sku}" = 0' for sku in ("L4", "L40S", "A100-80GB", "H100", "H200")) + " }"


def place(folder: Path, forecast: str) -> list[str]:
    return ["place", "--scenario", scenario_4h(folder), "--forecast", forecast, "--out", "plan.csv",
            "--periods", "how:4"]


def simulate(folder: Path, plan: str) -> list[str]:
    return ["simulate", "--scenario", scenario_4h(folder), "--plan", plan, "--out", "sim.csv", "--engine", "local"]


def _scenario_with(folder: Path, old: str, new: str) -> Path:
    text = DEMO_SCENARIO.read_text(encoding="utf-8")
    assert old in text, old
    path = folder / "scenario.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


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
    BadInput("catalog: an unknown tier", lambda d: ["catalog", "--tier", "gold"], mentions=("tier", "gold")),
    BadInput("profiles: an unknown model", lambda d: ["profiles", "--model", "gpt-9"], mentions=("gpt-9",)),
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
        "place: every GPU quota 0 (infeasible)",
        lambda d: ["place", "--scenario", scenario_4h(d, "quotas = {}", ZERO_QUOTAS), "--forecast",
                   table(d, "forecast.csv", "forecast"), "--out", "plan.csv", "--periods", "how:4"],
        exit_codes=(4,), mentions=("infeasible", "quota of 0"), earlier=PLAN_OUTPUTS,
    ),
    # simulate: the built plan and its flows, one of them broken
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
        mentions=("--duration", "requests per replication", "requests per second, not per hour"),
        earlier=SIM_OUTPUTS,
    ),
    BadInput(
        "simulate: --duration 0.001s",
        lambda d: [*simulate(d, plan_pair(d)), "--duration", "0.001s"],
        mentions=("--duration", "minimum of 60 s"), earlier=SIM_OUTPUTS,
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
        lambda d: [*simulate(d, plan_pair(d, flows=lambda f: f.assign(rps=f["rps"] / 10_000))), "--duration", "60s",
                   "--replications", "1"],
        mentions=("--duration", "saw no request", "no evidence"), earlier=SIM_OUTPUTS,
    ),
    # calibrate, plan, report, experiment
    BadInput(
        "calibrate: --pool-replicas 100000",
        lambda d: ["calibrate", "--scenario", scenario_4h(d), "--out", "capacity.csv", "--pool-replicas", "100000"],
        mentions=("--pool-replicas", "ceiling"), earlier=("capacity.csv", "capacity.json"),
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
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_cleanly(case: BadInput, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path)
    assert check_outcome(case, outcome) == [], outcome.stderr

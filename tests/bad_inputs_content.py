"""Inputs for the content cases of the bad-input catalogue, built from the bundled demo files.

A good forecast (``planner forecast`` on the last 8 days of the demo history, every series,
24 hours ahead) and a good plan (``planner place`` on it: the demo scenario with a 4-hour
horizon, in 4-hour blocks) are made once per test module by :func:`demo_artefacts`, in a
folder of their own with their own run history. Each case copies the file it needs into its
empty folder and breaks one thing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from bad_inputs_harness import checkout_env, planner_command
from conftest import REPO_ROOT

DEMO_SCENARIO = REPO_ROOT / "scenarios" / "demo.toml"
DEMO_HISTORY = REPO_ROOT / "data" / "history" / "demo_history.parquet"
AZURE_SAMPLE = REPO_ROOT / "data" / "samples" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"
MOONCAKE_SAMPLE = REPO_ROOT / "data" / "samples" / "mooncake" / "conversation_trace_6001_7000.jsonl"
MOONCAKE = ("--format", "mooncake", "--start", "2024-06-01T00:00:00Z")
"""The options of ``planner ingest`` for a Mooncake trace."""
HISTORY_FROM = "2026-10-24T00:00:00Z"  # the last 8 days of the demo history
ONE_SERIES = {"region": "us-east", "model": "llama-3.1-8b", "traffic_class": "interactive"}

BUILT: dict[str, Path] = {}
"""forecast, plan, flows, history (8 days, every series) and scenario_4h, filled by :func:`demo_artefacts`."""


def _run(folder: Path, *argv: str) -> None:
    env = checkout_env({**os.environ, "PLANNER_HISTORY": str(folder / "state" / "history.duckdb"),
                        "PLANNER_CACHE_DIR": str(folder / "state" / "cache"), "NO_COLOR": "1"})
    proc = subprocess.run([*planner_command(), *argv], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module", autouse=True)
def demo_artefacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("demo-artefacts")
    history = pd.read_parquet(DEMO_HISTORY)
    history[history["ts"] >= HISTORY_FROM].to_csv(folder / "history.csv", index=False)
    scenario = DEMO_SCENARIO.read_text(encoding="utf-8").replace('horizon = "14d"', 'horizon = "4h"')
    (folder / "scenario_4h.toml").write_text(scenario, encoding="utf-8")
    _run(folder, "forecast", "history.csv", "--out", "forecast.csv", "--horizon", "24h", "--engine", "local")
    _run(folder, "place", "--scenario", "scenario_4h.toml", "--forecast", "forecast.csv", "--out", "plan.csv",
         "--periods", "how:4")
    BUILT.update({name: folder / file for name, file in (
        ("forecast", "forecast.csv"), ("plan", "plan.csv"), ("flows", "plan.flows.csv"), ("history", "history.csv"),
        ("scenario_4h", "scenario_4h.toml"))})
    return BUILT


# --------------------------------------------------------------------------- builders
def scenario_4h(folder: Path, old: str = "", new: str = "") -> str:
    """The demo scenario with a 4-hour horizon (the built forecast's), optionally with one edit."""
    text = BUILT["scenario_4h"].read_text(encoding="utf-8")
    assert old in text, old
    (folder / "scenario.toml").write_text(text.replace(old, new, 1) if old else text, encoding="utf-8")
    return "scenario.toml"


def table(folder: Path, name: str, source: str, mutate: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
          **to_file: object) -> str:
    """A copy of a built table (forecast, plan, flows, history), broken by ``mutate``, written as ``name``."""
    frame = pd.read_csv(BUILT[source])
    frame = mutate(frame) if mutate is not None else frame
    path = folder / name
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False, **to_file)
    return name


def one_series(frame: pd.DataFrame) -> pd.DataFrame:
    """One demo series (us-east, llama-3.1-8b, interactive), with its file rows numbered from 0 again."""
    keep = (frame[list(ONE_SERIES)] == pd.Series(ONE_SERIES)).all(axis=1)
    return frame[keep].reset_index(drop=True)


def cell(column: str, row: int, value: object) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """Set one cell (``row`` is 0-based, the file's data row ``row + 1``); the column becomes object if needed."""
    def mutate(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        if not isinstance(value, str) and pd.api.types.is_integer_dtype(frame[column]):
            frame[column] = frame[column].astype(float)
        frame[column] = frame[column].astype(object) if isinstance(value, str) or value is None else frame[column]
        frame.loc[row, column] = value
        return frame
    return mutate


def plan_pair(folder: Path, plan: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
              flows: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> str:
    """The built plan and its flows (beside it, as ``planner simulate`` finds them), either one broken."""
    table(folder, "plan.csv", "plan", plan)
    table(folder, "plan.flows.csv", "flows", flows)
    return "plan.csv"


def request_log(folder: Path, name: str, extra_line: str, after: int = 20) -> str:
    """The first 40 requests of the Azure conversation sample, with ``extra_line`` after ``after`` requests."""
    lines = AZURE_SAMPLE.read_text(encoding="utf-8").replace("\r\n", "\n").splitlines()[:41]
    lines.insert(after + 1, extra_line)
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return name


def mooncake_trace(folder: Path, name: str, record: int | None = None, hash_ids: object = None) -> str:
    """The first 20 requests of the Mooncake slice, with record ``record`` (0-based) given ``hash_ids``."""
    records = [json.loads(line) for line in MOONCAKE_SAMPLE.read_text(encoding="utf-8").splitlines()[:20]]
    if record is not None:
        records[record]["hash_ids"] = hash_ids
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return name


def copy_built(folder: Path, source: str, name: str) -> str:
    shutil.copyfile(BUILT[source], folder / name)
    return name

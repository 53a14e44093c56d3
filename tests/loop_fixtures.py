"""A one-region, one-model slice of the demo, small enough to run the whole loop in seconds."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pandas as pd
import tomli_w

from planner.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "scenarios" / "demo.toml"
HISTORY = REPO / "data" / "history" / "demo_history.parquet"


SHARES = {"interactive": 0.5, "standard": 0.35, "batch": 0.15}
"""The demo's first three classes (its long-context class would make every simulation here long)."""


def small_raw(horizon: str = "24h") -> dict:
    """The demo scenario cut to users in us-east, served in aws:us-east-1 by llama-3.1-8b on one H100 per
    replica, with its interactive, standard and batch classes."""
    with DEMO.open("rb") as handle:
        data = tomllib.load(handle)
    data["name"] = "loop-test"
    data["horizon"] = horizon
    data["regions"]["serving"] = [r for r in data["regions"]["serving"] if r["key"] == "aws:us-east-1"]
    data["regions"]["origins"] = [o for o in data["regions"]["origins"] if o["name"] == "us-east"]
    data["regions"]["latency_ms"] = {"us-east": {"aws:us-east-1": 8}}
    data["models"] = [{"name": "llama-3.1-8b", "skus": ["H100"], "tp": [1]}]
    # without the demo's declared reuse: the loop tests' capacities are those of plain Poisson traffic
    data["classes"] = [{**{k: v for k, v in c.items() if k != "reuse"}, "share": SHARES[c["name"]]}
                       for c in data["classes"] if c["name"] in SHARES]
    data["capacity"]["tiers"] = ["reserved", "on_demand"]
    return data


def small_scenario(horizon: str = "24h"):
    return parse_scenario(small_raw(horizon), source="loop-test")


def small_history(weeks: int = 10, scale: float = 1.0) -> pd.DataFrame:
    """The last ``weeks`` of demo demand from us-east for llama-3.1-8b (its first three classes), times ``scale``:
    a fleet of a few H100 replicas."""
    history = pd.read_parquet(HISTORY)
    rows = history[(history["region"] == "us-east") & (history["model"] == "llama-3.1-8b")
                   & history["traffic_class"].isin(list(SHARES))].copy()
    stamps = pd.to_datetime(rows["ts"], utc=True)
    rows = rows[stamps > stamps.max() - pd.Timedelta(weeks=weeks)].reset_index(drop=True)
    for column in ("requests", "prompt_tokens_sum", "output_tokens_sum"):
        rows[column] = (rows[column] * scale).round().astype("int64")
    return rows


def write_small_inputs(folder: Path) -> tuple[Path, Path]:
    """The small scenario as TOML and its history as Parquet, for CLI tests."""
    scenario = folder / "loop-test.toml"
    scenario.write_text(tomli_w.dumps(small_raw()), encoding="utf-8")
    history = folder / "history.parquet"
    small_history().to_parquet(history, index=False)
    return scenario, history

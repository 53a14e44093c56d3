"""Pools and samples shared by the prefix-cache tests: the vendored Mooncake slice and one-class pools."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from replica_fixtures import pool, replica

from planner.sim.prefix_workload import trace_sample
from planner.sim.replica.pool import PoolConfig
from planner.sim.workload import RequestSample

MOONCAKE = Path(__file__).resolve().parents[1] / "data/samples/mooncake/conversation_trace_6001_7000.jsonl"


def mooncake_frame() -> pd.DataFrame:
    return pd.read_json(MOONCAKE, lines=True)


def mooncake_sample(rate_rps: float | None = None, seed: int = 0) -> RequestSample:
    frame = mooncake_frame()
    return trace_sample(frame["timestamp"].to_numpy(), frame["input_length"].to_numpy(),
                        frame["output_length"].to_numpy(), frame["hash_ids"].tolist(), np.random.SeedSequence(seed),
                        rate_rps=rate_rps)


def one_class_pool(sample: RequestSample, *, replicas: int = 1, kv: int | None = None, router: str = "jsq",
                   policy: str = "fcfs", kv_fraction: float = 1.0) -> PoolConfig:
    """llama-3.1-8b on H100 (TP1), the interactive class only, no wait-time rejection, over the whole sample."""
    spec = replica("H100", replicas, "llama-3.1-8b", kv=kv)
    config = pool(1.0, policy, router, replicas=(spec,), model="llama-3.1-8b", max_wait_scale=1e6,
                  duration=float(sample.arrival_s[-1]) + 1.0, kv_fraction=kv_fraction)
    return replace(config, classes=config.classes[:1], warmup_s=0.0)

"""What a probe simulated, kept so that a search for other SLOs reads it instead of simulating again.

A probe at rate λ simulates replications i = 0, 1, … of one unit under one engine setting and
pool size, and keeps from each only the per-class request count and p99 of TTFT, TPOT and
end-to-end latency (:mod:`.probe`). None of that depends on an SLO: the simulation reads the
classes' weights, quanta, priority jumps and queue-wait limits, never their targets (the SLOs
enter only the comparison U_km ≤ SLO_km). So replication i at λ is the same numbers for every
SLO, and a search for another SLO value (a sweep's next point, the same plan under another
target) that visits λ again can read them.

**The key** is a SHA-256 of everything that decides those numbers: the unit's material
(:func:`planner.calibrate.fingerprint.unit_material`) without any SLO and without the settings that only
steer the search (tolerance, confidence, pruning, whether settings are searched, the number of
replications, since replication i is the same whichever R is asked), plus the engine setting,
the pool size and λ (exactly, by ``repr``). A probe reads the stored replications in order,
simulates only those beyond them that it needs, and stores the longer list: its verdict and its
bounds are bit for bit what simulating every replication gives, and so is every answer built on
them (the floats go through JSON by ``repr``, which round-trips them exactly).

Where the rows live is the caller's (:class:`ProbeStore`); :class:`MemoryProbeStore` keeps them for
one process, and the shell's calibration cache keeps them on disk beside the units
(:class:`planner.workflows.calibration_cache.FolderProbeStore`), so parallel workers and later
runs share them.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Protocol

from planner.calibrate.fingerprint import unit_material
from planner.calibrate.inputs import UnitTask
from planner.sim.replica.pool import ReplicaSpec

SEARCH_ONLY_SETTINGS = ("rel_tol", "confidence", "prune", "search_settings", "replications")
"""Settings that steer the search but do not change what replication i at a rate simulates."""
PROBE_MEMO_VERSION = 1
"""Raise when what a replication row holds, or how it is keyed, changes."""

Row = dict[str, dict[str, float]]
"""One replication: per active class, its arrivals and p99s (``arrived``, ``ttft``, ``tpot``, ``e2e``)."""


class ProbeStore(Protocol):
    """Replication rows of probes, by probe key."""

    def get(self, key: str) -> list[Row] | None:
        """The rows stored for ``key`` in replication order, or None when absent or unusable."""

    def put(self, key: str, rows: list[Row]) -> None:
        """Keep ``rows`` (replications 0, 1, … in order) for ``key``; a store that cannot write drops them."""


class MemoryProbeStore:
    """Rows kept in a dict, for one process."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Row]] = {}

    def get(self, key: str) -> list[Row] | None:
        rows = self.rows.get(key)
        return list(rows) if rows is not None else None

    def put(self, key: str, rows: list[Row]) -> None:
        self.rows[key] = list(rows)


def probe_key(task: UnitTask, replica: ReplicaSpec, rate_rps_per_replica: float) -> str:
    """The key of one probe's replications (module docstring)."""
    material = unit_material(task, search={})
    material["classes"] = [{k: v for k, v in c.items() if k != "slo"} for c in material["classes"]]
    material["settings"] = {k: v for k, v in material["settings"].items() if k not in SEARCH_ONLY_SETTINGS}
    for unused in ("engine_settings", "search"):
        material.pop(unused)
    material["probe"] = {"version": PROBE_MEMO_VERSION, "max_num_seqs": replica.max_batch,
                         "max_num_batched_tokens": replica.token_budget,
                         "long_prefill_token_threshold": replica.prefill_chunk_cap, "replicas": replica.count,
                         "prefix_caching": replica.prefix_caching,
                         "rate_rps_per_replica": repr(float(rate_rps_per_replica))}
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def encode_rows(rows: list[Row]) -> list[dict[str, dict[str, Any]]]:
    """Rows as plain JSON values: a non-finite number (a p99 of +inf when a class's requests were rejected, NaN when
    it saw none) as its name."""
    return [{name: {field: value if math.isfinite(value) else repr(value) for field, value in fields.items()}
             for name, fields in row.items()} for row in rows]


def decode_rows(payload: object) -> list[Row] | None:
    """:func:`encode_rows` undone; None when ``payload`` is not such a list."""
    if not isinstance(payload, list):
        return None
    rows: list[Row] = []
    try:
        for row in payload:
            rows.append({str(name): {str(field): float(value) for field, value in fields.items()}
                         for name, fields in row.items()})
    except (AttributeError, TypeError, ValueError):
        return None
    return rows

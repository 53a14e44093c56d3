"""The calibration cache: one JSON file per unit, named by a hash of everything that decides its answer.

key = SHA-256 of the canonical JSON (sorted keys, no spaces, floats by ``repr``) of
:func:`key_material`: the unit (model, SKU, TP, engine), the profile's step model and KV
capacity, every engine setting it tries, every class's share, the SLOs in effect
for the unit's model (``Scenario.slo``: only the metrics set, so adding, removing or changing
one gives a new key), scheduling parameters and token-length laws (parameters, or a hash of
the histogram bins), the policy with its parameters and admission control, the simulation and
search settings (duration, warm-up, replications, pool size, router, seed, rel_tol, confidence,
pruning, the search constants, the pruning margin ``unit.CEILING_MARGIN`` and the screen's rate
``unit.SCREEN_FRACTION``, and that a threshold no request reaches is left out) and
:data:`CALIBRATION_VERSION` with ``planner.__version__``. An unchanged unit is never simulated
again; any change to any of those gives a new key.

Where entries live is the caller's: :func:`planner.calibrate.calibrate` reads and stores them
through a :class:`CalibrationStore` (the shell's is a folder of JSON files,
:class:`planner.workflows.calibration_cache.FolderStore`). An entry that cannot be read, is
not JSON, or does not carry the expected key, version and fields counts as absent
(:func:`entry_result`), so the unit is calibrated again and the entry rewritten: a damaged
cache costs time, never a crash.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Protocol

from planner.calibrate.fingerprint import CALIBRATION_VERSION, unit_material
from planner.calibrate.inputs import UnitTask
from planner.calibrate.pools import POOL_RESULT_FIELDS, PoolTask, pool_key_material
from planner.calibrate.search import FLOOR_FRACTION, GROWTH, MAX_GROWTHS
from planner.calibrate.unit import CEILING_MARGIN, SCREEN_FRACTION

if TYPE_CHECKING:
    from planner.calibrate.probe_memo import ProbeStore

RESULT_FIELDS = {"model": str, "sku": str, "tp_degree": int, "engine": str, "key": str, "status": str,
                 "rate_rps_per_replica": float, "ceiling_rps_per_replica": float, "max_num_seqs": int,
                 "max_num_batched_tokens": int, "long_prefill_token_threshold": int, "simulations": int,
                 "reason": str, "binding_class": str, "binding_metric": str, "probes": list, "settings": list}


class CalibrationStore(Protocol):
    """Where calibrated units are kept between runs, by cache key, and (``probes``, None for none) the replications
    their searches simulated, for searches under other SLOs (:mod:`planner.calibrate.probe_memo`)."""

    @property
    def probes(self) -> ProbeStore | None: ...

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored result for ``key``, or None when absent or unusable (see :func:`entry_result`)."""

    def put(self, task: UnitTask | PoolTask, result: dict[str, Any]) -> str:
        """Store one unit's (or its larger pools') result under ``task.key``; '' or, when it cannot be
        stored, why (the run goes on)."""


def key_material(task: UnitTask) -> dict[str, Any]:
    return unit_material(task, search={"floor_fraction": FLOOR_FRACTION, "growth": GROWTH,
                                       "max_growths": MAX_GROWTHS, "ceiling_margin": CEILING_MARGIN,
                                       "screen_fraction": SCREEN_FRACTION, "unreached_thresholds_left_out": 1.0})


def cache_key(task: UnitTask) -> str:
    text = json.dumps(key_material(task), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _valid(result: object, key: str) -> bool:
    if not isinstance(result, dict) or result.get("key") != key:
        return False
    fields = POOL_RESULT_FIELDS if result.get("stage") == "pools" else RESULT_FIELDS
    for name, kind in fields.items():
        value = result.get(name)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            return False
    return True


def entry_payload(task: UnitTask | PoolTask, result: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps for one unit (or one unit's larger pools): the version, the key, what the key
    hashes, and the result."""
    material = pool_key_material(task) if isinstance(task, PoolTask) else key_material(task)
    return {"calibration_version": CALIBRATION_VERSION, "key": task.key, "material": material, "result": result}


def entry_result(payload: object, key: str) -> dict[str, Any] | None:
    """The result in a stored entry for ``key``, or None when the entry is unusable (module docstring)."""
    if not isinstance(payload, dict) or payload.get("calibration_version") != CALIBRATION_VERSION:
        return None
    result = payload.get("result")
    return result if _valid(result, key) else None

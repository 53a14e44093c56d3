"""What identifies a unit's calibration: the version of the method, the unit, its profile, engine settings, classes
(shares, scheduling parameters, SLOs, token-length laws and declared reuse) and settings, as plain JSON values.

The calibration cache's key (:mod:`.cache`) hashes all of it with the search's constants; a probe's key
(:mod:`.probe_memo`) hashes it without what only steers the search (the SLOs, tolerance, confidence, pruning).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from typing import Any

import numpy as np

from planner import __version__
from planner.calibrate.inputs import UnitTask
from planner.sim.class_reuse import ClassReuse
from planner.sim.workload import EmpiricalLength, LognormalLength

CALIBRATION_VERSION = 3
"""Raise when the search, the predicate or the simulator changes what a unit's answer is, or the key's
layout changes (2: a class's SLOs are keyed as ``slo``, metric -> target, for the metrics set;
3: units of (model, SKU, TP, engine), each searched over engine settings, on the measured step model)."""


def law_fingerprint(law: object) -> dict[str, Any]:
    """What identifies a token-length law: its parameters, or a hash of its histogram."""
    if isinstance(law, LognormalLength):
        return {"law": "lognormal", "mu": law.mu, "sigma": law.sigma, "cap_tokens": law.hi}
    if isinstance(law, EmpiricalLength):
        digest = hashlib.sha256()
        for array in (law.lo, law.hi, law.counts):
            digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
        return {"law": "empirical histogram", "sha256": digest.hexdigest()}
    return {"law": type(law).__name__, "repr": repr(law)}


def reuse_fingerprint(reuse: ClassReuse | None) -> dict[str, Any] | None:
    """What identifies a class's declared prefix reuse (None: none)."""
    if reuse is None:
        return None
    user = law_fingerprint(reuse.user_tokens) if reuse.user_tokens is not None else None
    return {"max_prompt_tokens": reuse.max_prompt_tokens, "system_tokens": reuse.system_tokens,
            "variants": reuse.variants, "turns": reuse.turns, "think_s": reuse.think_s, "user_tokens": user}


def unit_material(task: UnitTask, search: dict[str, float]) -> dict[str, Any]:
    """Everything that decides a unit's calibration with the search constants ``search``: the cache key's material
    (:mod:`.cache`), and without the SLOs and the search, a probe's (:mod:`.probe_memo`)."""
    r = task.candidates[0]
    return {
        "calibration_version": CALIBRATION_VERSION,
        "planner_version": __version__,
        "model": task.model,
        "sku": task.sku,
        "tp_degree": task.tp,
        "engine": task.engine,
        "profile": {"step": r.step.packed().tolist(), "kv_capacity_tokens": r.kv_capacity_tokens,
                    "replicas": r.count, "prefix_caching": r.prefix_caching},
        "engine_settings": [[c.max_batch, c.token_budget, c.prefill_chunk_cap] for c in task.candidates],
        "classes": [{"name": c.name, "share": c.share, "weight": c.spec.weight, "priority_jump": c.spec.priority_jump,
                     "drr_quantum_tokens": c.spec.drr_quantum_tokens, "max_queue_wait_ms": c.spec.max_queue_wait_ms,
                     "slo": dict(c.spec.slo.targets()),
                     "prompt": law_fingerprint(c.spec.workload.prompt),
                     "output": law_fingerprint(c.spec.workload.output),
                     "reuse": reuse_fingerprint(c.spec.reuse)}
                    for c in task.classes],
        "settings": asdict(task.settings),
        "search": dict(search),
    }

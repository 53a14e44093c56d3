"""Reading the reuse files a scenario's ``reuse = { measured = "..." }`` declarations name.

``planner ingest`` writes, beside the demand history, ``<out>.reuse.json``: per (model,
traffic class) of the log, the share of prompt tokens an unbounded prefix cache would have
served, and the sessions when the log has session ids (:mod:`planner.ingest.reuse`). A
declaration's file is read once, when the scenario loads, relative to the scenario file; the
series of the declaration's class (and model, for ``[models.workloads.<class>]``) fill its
``series``, so the validated scenario carries the figures as values and nothing downstream
reads a file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from planner.errors import InputError

FIX = "give the <out>.reuse.json that `planner ingest` wrote for this traffic (a path relative to the scenario file)"


def _declarations(data: dict[str, Any]) -> Iterator[tuple[str, str | None, str | None, dict[str, Any]]]:
    """(field path, model, class, reuse table) of every reuse table that names a measured file."""
    for klass in data.get("classes", []) if isinstance(data.get("classes"), list) else []:
        reuse = klass.get("reuse") if isinstance(klass, dict) else None
        if isinstance(reuse, dict) and "measured" in reuse:
            yield f"classes[{klass.get('name')}].reuse.measured", None, klass.get("name"), reuse
    for model in data.get("models", []) if isinstance(data.get("models"), list) else []:
        workloads = model.get("workloads") if isinstance(model, dict) else None
        for name, decl in (workloads or {}).items() if isinstance(workloads, dict) else ():
            reuse = decl.get("reuse") if isinstance(decl, dict) else None
            if isinstance(reuse, dict) and "measured" in reuse:
                yield f"models[{model.get('name')}].workloads.{name}.reuse.measured", model.get("name"), name, reuse


def _series(raw: dict[str, Any]) -> dict[str, Any]:
    """One series of the file in the fields of :class:`planner.scenario.lengths.MeasuredReuse`."""
    sessions = raw.get("sessions")
    row = {key: raw.get(key) for key in ("model", "traffic_class", "source", "requests", "prompt_tokens",
                                         "ideal_cached_tokens", "requests_with_hit")}
    if isinstance(sessions, dict) and sessions.get("sessions"):
        row["sessions"] = sessions.get("sessions")
        row["turns_per_session_mean"] = (sessions.get("turns_per_session") or {}).get("mean")
        row["think_time_mean_s"] = (sessions.get("think_time_s") or {}).get("mean")
    return row


def _read(path: Path, where: str) -> list[dict[str, Any]]:
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"reuse file {str(path)!r} not found", where=where, fix=FIX) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read reuse file {str(path)!r}: {exc}", where=where, fix=FIX) from None
    series = document.get("series") if isinstance(document, dict) else None
    if not isinstance(series, list) or not all(isinstance(s, dict) for s in series):
        raise InputError(f"reuse file {str(path)!r} has no list of series", where=where, fix=FIX)
    return series


def read_reuse_files(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``data`` with every ``measured`` reuse declaration's ``series`` filled in from its file: the file's series
    of the declaration's class (of its model too, for a model's own declaration)."""
    for where, model, klass, reuse in list(_declarations(data)):
        name = reuse.get("measured")
        if not isinstance(name, str) or "series" in reuse:
            continue  # a wrong type is the schema's error, with its field path
        path = folder / Path(name).expanduser()
        every = _read(path, where)
        mine = [s for s in every if s.get("traffic_class") == klass and (model is None or s.get("model") == model)]
        if not mine:
            held = sorted({f"{s.get('model')} / {s.get('traffic_class')}" for s in every})
            raise InputError(f"reuse file {str(path)!r} has no series for "
                             f"{'class ' + repr(klass) if model is None else f'{model} / {klass}'}; it has "
                             f"{', '.join(held) or 'none'}", where=where,
                             fix="ingest the log with this class's label (--traffic-class or the log's column), "
                                 "or declare the reuse where the file has it")
        reuse["series"] = [_series(s) for s in mine]
    return data

"""Reading the histogram files a scenario's length declarations name (``{ histogram = "file.csv" }``).

The files are read once, when the scenario is loaded, into the declaration's ``bins``, so the
validated scenario carries its lengths as values and nothing downstream reads a file. A path
is relative to the scenario file's folder. A ``planner ingest`` histogram may be given: its
``model``, ``traffic_class`` and ``measure`` columns, when present, select the rows of the
(model, class) and measure the declaration is for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.errors import InputError

BIN_COLUMNS = ("bin_lo_tokens", "bin_hi_tokens", "count")
MEASURES = {"prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens"}


def _declarations(data: dict[str, Any]) -> Iterator[tuple[str, str | None, str | None, str, dict[str, Any]]]:
    """(field path, model, class, measure, declaration) of every table-form length declaration."""
    for klass in data.get("classes", []) if isinstance(data.get("classes"), list) else []:
        if isinstance(klass, dict):
            for measure in MEASURES:
                value = klass.get(measure)
                if isinstance(value, dict):
                    yield f"classes[{klass.get('name')}].{measure}", None, klass.get("name"), measure, value
    for model in data.get("models", []) if isinstance(data.get("models"), list) else []:
        workloads = model.get("workloads") if isinstance(model, dict) else None
        for name, decl in (workloads or {}).items() if isinstance(workloads, dict) else ():
            for measure in MEASURES:
                value = decl.get(measure) if isinstance(decl, dict) else None
                if isinstance(value, dict):
                    yield (f"models[{model.get('name')}].workloads.{name}.{measure}", model.get("name"), name,
                           measure, value)


def _bins(path: Path, where: str, model: str | None, klass: str | None, measure: str) -> list[list[float]]:
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise InputError(f"histogram file {str(path)!r} not found", where=where,
                         fix="give a path relative to the scenario file") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"cannot read histogram file {str(path)!r}: {exc}", where=where,
                         fix=f"give a CSV with columns {', '.join(BIN_COLUMNS)}") from None
    missing = [c for c in BIN_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"histogram file {str(path)!r} lacks column(s) {', '.join(missing)}", where=where,
                         fix=f"give a CSV with columns {', '.join(BIN_COLUMNS)}")
    for column, value in (("model", model), ("traffic_class", klass), ("measure", measure)):
        if column in frame.columns and value is not None and (frame[column] == value).any():
            frame = frame[frame[column] == value]
    numbers = frame[list(BIN_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    lo, hi, count = (numbers[c].to_numpy(dtype=float) for c in BIN_COLUMNS)
    bad = np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi) & np.isfinite(count) & (lo >= 1) & (hi > lo)
                           & (count >= 0)))
    if bad.size:
        raise InputError(f"histogram file {str(path)!r}, data row {int(frame.index[bad[0]]) + 1}: bins need "
                         "1 <= bin_lo_tokens < bin_hi_tokens and count >= 0", where=where,
                         fix="correct the row (lengths are whole tokens >= 1)")
    if frame.empty or count.sum() <= 0:
        raise InputError(f"histogram file {str(path)!r} has no requests for this length", where=where,
                         fix="give bins with a positive count")
    return [[int(a), int(b), float(c)] for a, b, c in zip(lo, hi, count, strict=True)]


def read_length_files(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``data`` with every ``{ histogram = ... }`` declaration's ``bins`` filled in from its file."""
    for where, model, klass, measure, decl in list(_declarations(data)):
        name = decl.get("histogram")
        if isinstance(name, str) and "bins" not in decl:
            decl["bins"] = _bins(folder / Path(name).expanduser(), where, model, klass, measure)
    return data

"""Read a user's step-time measurements for ``planner profiles fit``: step logs and benchmark results.

Each argument is a file, a glob, or a folder (its ``*.csv``, ``*.parquet``, ``*.json`` and
``*.jsonl`` files). Each file's format is told from its content, not its name:

* **a step log**: a table (CSV, or Parquet) with one row per engine iteration and the columns
  ``batch_size`` (sequences decoding in the step), ``kv_tokens`` (KV tokens those decodes
  read, all of them together), ``prefill_tokens`` (prompt tokens prefilled in the step) and
  ``step_ms`` (its duration, ms); optionally ``prefill_pairs`` (causal query-key pairs of those
  prompt tokens), which otherwise is P(P+1)/2, one fresh chunk with no cached prefix;
* **a vLLM serving benchmark result**: the JSON that ``benchmark_serving.py`` (``vllm bench
  serve``) saves, one object per file, a list of them, or one per line; its steps are inferred
  as ``bench_serving.py`` describes.

Every problem is an InputError that names the file, and the row and column (or the request
and key) at fault.
"""

from __future__ import annotations

import codecs
import glob
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.profiles.bench_serving import FIX as BENCH_FIX
from planner.profiles.bench_serving import benchmark_steps, runs_of
from planner.profiles.user_fit import STEP_COLUMNS
from planner.storage import check_input_file

STEP_LOG_REQUIRED = ("batch_size", "kv_tokens", "prefill_tokens", "step_ms")
FOLDER_SUFFIXES = (".csv", ".parquet", ".json", ".jsonl")
PARQUET_MAGIC = b"PAR1"


@dataclass(frozen=True)
class SourceFile:
    """One measurement file: its format, the steps it gave, and what was left out."""

    path: Path
    kind: str
    steps: int
    detail: str


@dataclass(frozen=True)
class Measurements:
    steps: pd.DataFrame
    files: tuple[SourceFile, ...]

    def describe(self) -> str:
        """The files, briefly, for a profile's ``source_detail``."""
        names = [f.path.name for f in self.files]
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def expand(patterns: list[str]) -> list[Path]:
    """Files of every pattern (file, glob or folder), each once, in the order given (matches sorted)."""
    if not patterns:
        raise InputError("no measurement files were given", where="MEASUREMENTS",
                         fix="pass step logs (CSV) or benchmark results (JSON): files, globs or folders")
    files: list[Path] = []
    for text in patterns:
        if glob.has_magic(text):
            matches = sorted(Path(m) for m in glob.glob(text, recursive=True) if os.path.isfile(m))
            if not matches:
                raise InputError("no file matches this pattern", where=text, fix="check the pattern")
        elif Path(text).is_dir():
            matches = sorted(p for p in Path(text).iterdir() if p.is_file() and p.suffix.lower() in FOLDER_SUFFIXES)
            if not matches:
                raise InputError(f"the folder holds no {', '.join(FOLDER_SUFFIXES)} file", where=text,
                                 fix="pass the measurement files themselves, or a folder holding them")
        else:
            matches = [check_input_file(text)]
        files.extend(m for m in matches if m not in files)
    return files


def _where(path: Path, position: int, column: str) -> str:
    return f"{path}, row {position + 1} (line {position + 2}), column '{column}'"


def check_step_log(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """A step log's rows as floats in :data:`~planner.profiles.user_fit.STEP_COLUMNS`, or an InputError."""
    missing = [column for column in STEP_LOG_REQUIRED if column not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", where=path,
                         fix=f"a step log needs the columns {', '.join(STEP_LOG_REQUIRED)} (and optionally "
                             "prefill_pairs); a benchmark result is a JSON file")
    steps = pd.DataFrame(index=frame.index)
    for column in [c for c in STEP_COLUMNS if c in frame.columns]:
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | ((values == 0) & (column == "step_ms")))
        if bad.size:
            kind = "a positive" if column == "step_ms" else "a non-negative"
            raise InputError(f"{column} must be {kind} number, got {frame[column].iloc[bad[0]]!r}",
                             where=_where(path, int(bad[0]), column), fix="correct or remove that row")
        steps[column] = values
    if "prefill_pairs" not in steps:
        steps["prefill_pairs"] = steps["prefill_tokens"] * (steps["prefill_tokens"] + 1.0) / 2.0
    _check_step_rows(steps, path)
    return steps.loc[:, list(STEP_COLUMNS)].reset_index(drop=True)


def _check_step_rows(steps: pd.DataFrame, path: Path) -> None:
    """Rules across a row's columns: a step does something, decodes read KV, prompt tokens attend to themselves."""
    rules = [
        ((steps["batch_size"] == 0) & (steps["prefill_tokens"] == 0), "batch_size",
         "a step with no decodes and no prefill tokens"),
        ((steps["batch_size"] > 0) & (steps["kv_tokens"] < steps["batch_size"]), "kv_tokens",
         "decodes read at least one KV token each: kv_tokens must be at least batch_size"),
        ((steps["prefill_tokens"] > 0) & (steps["prefill_pairs"] < steps["prefill_tokens"]), "prefill_pairs",
         "each prompt token attends at least to itself: prefill_pairs must be at least prefill_tokens"),
    ]
    for mask, column, problem in rules:
        bad = np.flatnonzero(mask.to_numpy())
        if bad.size:
            raise InputError(problem, where=_where(path, int(bad[0]), column), fix="correct or remove that row")


def _json_values(path: Path, text: str) -> list[Any]:
    """The JSON value of a file, or each line's value for JSON Lines."""
    try:
        return [json.loads(text)]
    except json.JSONDecodeError as whole:
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            return [json.loads(line) for line in lines] if len(lines) > 1 else []
        except json.JSONDecodeError:
            pass
        raise InputError(f"not valid JSON: {whole.msg} at line {whole.lineno}, column {whole.colno}",
                         where=path, fix="check the file is the benchmark's JSON output") from None


def _benchmark(path: Path, text: str) -> tuple[pd.DataFrame, SourceFile]:
    runs: list[Any] = []
    for value in _json_values(path, text):
        found = runs_of(value)
        if found is None:
            keys = ", ".join(sorted(value)[:8]) if isinstance(value, dict) else type(value).__name__
            raise InputError(f"unknown JSON layout (found {keys}): not a vLLM benchmark_serving result",
                             where=path, fix=BENCH_FIX)
        runs.extend(found)
    frames, details = [], []
    for number, run in enumerate(runs, start=1):
        where = str(path) if len(runs) == 1 else f"{path}, run {number}"
        inferred = benchmark_steps(run, where)
        frames.append(inferred.steps)
        details.append(f"{inferred.requests} requests ({inferred.failed} failed), decoding batch "
                       f"{inferred.decoding_batch:.1f}" + (", low load: TTFTs used" if inferred.low_load else ""))
    steps = pd.concat(frames, ignore_index=True)
    return steps, SourceFile(path, "vllm benchmark", len(steps), "; ".join(details))


def _step_log(path: Path, data: bytes) -> tuple[pd.DataFrame, SourceFile]:
    try:
        frame = pd.read_parquet(path) if data.startswith(PARQUET_MAGIC) else pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"cannot read the file as a table: {exc}", where=path,
                         fix="give a step log as CSV (or Parquet), or a benchmark result as JSON") from None
    steps = check_step_log(frame, path)
    return steps, SourceFile(path, "step log", len(steps), f"{len(steps)} rows")


def read_file(path: Path) -> tuple[pd.DataFrame, SourceFile]:
    """One file's steps, its format told from its first bytes."""
    data = path.read_bytes()
    if data.removeprefix(codecs.BOM_UTF8).lstrip()[:1] in (b"{", b"["):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text (byte {exc.start})", where=path, fix="save the file as UTF-8") from None
        return _benchmark(path, text)
    return _step_log(path, data)


def read_measurements(patterns: list[str]) -> Measurements:
    """Every step of every measurement file (module docstring), with a ``source`` column naming its file."""
    frames, files = [], []
    for path in expand(patterns):
        steps, source = read_file(path)
        frames.append(steps.assign(source=str(path)))
        files.append(source)
    return Measurements(pd.concat(frames, ignore_index=True), tuple(files))

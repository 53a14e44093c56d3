"""Read the prefix-reuse fields of a request log (block hashes, session ids), request by request.

Runs after the one scan has checked every timestamp, token count and label, so only the
reuse columns can still be bad. Each file is read once more, in file order (DuckDB with
``preserve_insertion_order``), and each row becomes a :class:`planner.ingest.reuse.ReuseRequest`
under its (model, traffic class); the reuse rules then need the requests in arrival order,
which :mod:`planner.ingest.reuse` takes with a stable sort (ties in file order: files in
sorted path order, rows in file order).

Hash lists. Mooncake's ``hash_ids`` must be a JSON list of integers. A generic
``prefix_hashes`` cell is a JSON list of integers or strings, or a string of hashes
separated by spaces or commas; every hash is compared as text there, so ``[1, 2]`` and
``"1 2"`` are the same blocks. ``[]`` is a prompt with no block. An empty or missing cell,
a list holding a float, a boolean, a nested list or an empty string, and (for Mooncake) a
string, are refused with the file, row and column. An empty session id means the request
belongs to no session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable

import duckdb

from planner.errors import InputError
from planner.ingest.formats import PREFIX_HASHES, SESSION, LogSpec
from planner.ingest.reader import parsed_sql, source_sql
from planner.ingest.reuse import SOURCE_HASHES, SOURCE_MOONCAKE, ReuseRequest

FETCH_ROWS = 100_000
_SEPARATORS = re.compile(r"[\s,]+")


class BadHashes(ValueError):
    """A hash cell that is not a list of hashes; the message says why."""


def _shown(text: str) -> str:
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def _json_hashes(text: str, integers_only: bool) -> tuple[Hashable, ...]:
    try:
        items = json.loads(text)
    except ValueError:
        raise BadHashes(f"value {_shown(text)} is not a JSON list") from None
    if not isinstance(items, list):
        raise BadHashes(f"value {_shown(text)} is not a list")
    for item in items:
        integer = isinstance(item, int) and not isinstance(item, bool)
        text_hash = isinstance(item, str) and bool(item.strip()) and not integers_only
        if not (integer or text_hash):
            kind = "integers" if integers_only else "integers or non-empty strings"
            raise BadHashes(f"value {_shown(text)} holds {item!r}; the hashes must be {kind}")
    return tuple(items) if integers_only else tuple(str(item) for item in items)


def parse_hashes(raw: str | None, integers_only: bool) -> tuple[Hashable, ...]:
    """The block hashes of one cell (see the module's docstring); ``BadHashes`` if it holds none."""
    if raw is None or not raw.strip():
        raise BadHashes("is empty; write [] for a request whose prompt has no block")
    text = raw.strip()
    if text.startswith("["):
        return _json_hashes(text, integers_only)
    if integers_only:
        raise BadHashes(f"value {_shown(text)} is not a list of integers")
    return tuple(_SEPARATORS.split(text.strip(" ,")))


def _session(raw: str | None) -> str | None:
    if raw is None or not raw.strip():
        return None
    return raw.strip()


def read_reuse(con: duckdb.DuckDBPyConnection, spec: LogSpec, kinds: dict[str, list[str]]
               ) -> dict[tuple[str, str], list[ReuseRequest]]:
    """(model, traffic_class) -> its requests in file order (files in sorted path order)."""
    by_series: dict[tuple[str, str], list[ReuseRequest]] = {}
    files = sorted((path, kind) for kind, group in kinds.items() for path in group)
    con.execute("SET preserve_insertion_order = true")  # rows must come in file order
    try:
        for path, kind in files:
            _read_file(con, spec, kind, path, by_series)
    finally:
        con.execute("SET preserve_insertion_order = false")
    return by_series


def _read_file(con: duckdb.DuckDBPyConnection, spec: LogSpec, kind: str, path: str,
               by_series: dict[tuple[str, str], list[ReuseRequest]]) -> None:
    source = source_sql(kind, [path], spec)
    types = {str(r[0]): str(r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    hashes = "raw_prefix_hashes" if PREFIX_HASHES in spec.columns else "NULL"
    sessions = "raw_session_id" if SESSION in spec.columns else "NULL"
    cursor = con.execute(
        "SELECT CAST(ts_parsed_us AS BIGINT), model, traffic_class, CAST(prompt_real AS BIGINT), "
        f"CAST(output_real AS BIGINT), {hashes}, {sessions} FROM ({parsed_sql(source, spec, types)})"
    )
    integers_only = spec.format_name == "mooncake"
    row_no = 0
    while batch := cursor.fetchmany(FETCH_ROWS):
        for ts_us, model, traffic_class, prompt, output, raw_hashes, raw_session in batch:
            row_no += 1
            blocks = None
            if hashes != "NULL":
                try:
                    blocks = parse_hashes(raw_hashes, integers_only)
                except BadHashes as bad:
                    raise _bad_hashes(spec, kind, path, row_no, str(bad)) from None
            request = ReuseRequest(int(ts_us), int(prompt), int(output), blocks, _session(raw_session))
            by_series.setdefault((str(model), str(traffic_class)), []).append(request)


def _bad_hashes(spec: LogSpec, kind: str, path: str, row_no: int, problem: str) -> InputError:
    column = spec.columns[PREFIX_HASHES]
    row_word = "record" if kind in ("jsonl", "json") else "data row"
    kind_of = "a JSON list of integers, e.g. [0, 1, 2]" if spec.format_name == "mooncake" else (
        "a JSON list of hashes, e.g. [0, 1, 2], or hashes separated by spaces or commas")
    return InputError(
        f"{column} {problem}; it must be {kind_of}, one hash per prompt block",
        where=f"{path}, {row_word} {row_no}, column {column!r}",
        fix="correct the value or drop the row (the prefix-reuse statistics need every request's block hashes)",
    )


def block_source(spec: LogSpec) -> str | None:
    """How the log's block hashes are named in the reuse JSON; None without hashes."""
    if PREFIX_HASHES not in spec.columns:
        return None
    return SOURCE_MOONCAKE if spec.format_name == "mooncake" else SOURCE_HASHES


"""Checks on request logs, each failing as an ``InputError`` that names the file, row and column.

The checks run in DuckDB so a 50M-row log is never materialised in Python:

1. before the scan, per file: not empty, readable by its reader, and carrying every
   mapped column (the error lists the columns it does have);
2. the one scan (:func:`scan_checked`): a malformed file (ragged CSV row,
   broken JSON) that DuckDB refuses is traced back to its file;
3. the same scan counts rows and bad values over all files (:func:`check_scan_counts`).
   Only when it finds a bad value are the files counted one by one, and each file
   with a bad value is read again, with
   ``row_number() OVER ()`` (a streaming window that numbers rows in file order),
   to count the bad rows of each column and describe the first of each; one error
   lists every file's problems at once.

Row numbers are 1-based data rows: the first row after a CSV header is row 1; in
JSON files, the first record is record 1.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import duckdb

from planner.contracts.schemas.base import Problem, raise_problems
from planner.errors import InputError
from planner.ingest.formats import LABEL_OPTIONS, LABELS, OUTPUT, PROMPT, TS, LogSpec
from planner.ingest.reader import (
    FILE_COLUMN,
    MAX_TOKENS,
    TS_MAX_US,
    TS_MIN_US,
    clean_select_sql,
    clean_sql,
    describe_columns,
    duckdb_reason,
    parsed_sql,
    quote_ident,
    quote_literal,
    source_sql,
    tokens_ok,
    ts_ok,
)

T = TypeVar("T")
REJECTS_TABLE = "planner_csv_rejects"
REJECT_SCANS_TABLE = "planner_csv_reject_scans"
KIND_NAMES = {"csv": "CSV", "tsv": "TSV", "parquet": "Parquet", "jsonl": "JSON lines", "json": "JSON"}


def _row_word(kind: str) -> str:
    return "record" if kind in ("jsonl", "json") else "data row"


def _empty(path: str) -> InputError:
    return InputError(
        "the file has no data rows",
        where=path,
        fix="check the file was fully written, or leave it out of the inputs",
    )


def _schema_sql(kind: str, path: str) -> str:
    """A reader for one file whose DESCRIBE shows the file's own columns (JSON keys auto-detected)."""
    if kind in ("jsonl", "json"):
        layout = "'newline_delimited'" if kind == "jsonl" else "'auto'"
        return f"read_json([{quote_literal(path)}], format = {layout})"
    delim = quote_literal("\t" if kind == "tsv" else ",")
    if kind in ("csv", "tsv"):
        return f"read_csv([{quote_literal(path)}], header = true, all_varchar = true, delim = {delim}, skip = 0)"
    return f"read_parquet([{quote_literal(path)}])"


def malformed_line(con: duckdb.DuckDBPyConnection, kind: str, path: str) -> InputError | None:
    """The first line of a CSV/TSV file whose fields do not match its header, as an error; None if none is found.

    DuckDB's own error for a ragged file is a dump of its dialect search with no line
    number; its reject store (``store_rejects``) records each bad line with its number
    (the header is line 1) and what is wrong, so the file is read once more, only when it
    has already failed, to name the line.
    """
    if kind not in ("csv", "tsv"):
        return None
    delim = quote_literal("\t" if kind == "tsv" else ",")
    tables = (REJECTS_TABLE, REJECT_SCANS_TABLE)
    try:
        for table in tables:
            con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute(
            f"SELECT count(*) FROM read_csv([{quote_literal(path)}], header = true, all_varchar = true, "
            f"delim = {delim}, skip = 0, store_rejects = true, rejects_table = {quote_literal(REJECTS_TABLE)}, "
            f"rejects_scan = {quote_literal(REJECT_SCANS_TABLE)})"
        ).fetchall()  # the whole result: the reject store is written only once the scan has finished
        rows = con.execute(
            f"SELECT line, error_type, error_message, csv_line FROM {REJECTS_TABLE} "
            f"WHERE line = (SELECT min(line) FROM {REJECTS_TABLE})"
        ).fetchall()
    except duckdb.Error:
        return None
    finally:
        for table in tables:
            con.execute(f"DROP TABLE IF EXISTS {table}")
    if not rows:
        return None
    line, error_type, _, text = rows[0]
    found = [int(m.group(1)) for r in rows if (m := re.search(r"Found: (\d+)", str(r[2])))]
    expected = re.search(r"Expected Number of Columns: (\d+)", str(rows[0][2]))
    if found and expected and error_type in ("TOO MANY COLUMNS", "MISSING COLUMNS"):
        count = max(found) if error_type == "TOO MANY COLUMNS" else min(found)
        problem = f"{count} field(s) where the header has {expected.group(1)}"
    else:
        problem = str(error_type).lower()
    shown = str(text)[:80] + ("..." if len(str(text)) > 80 else "")
    return InputError(
        f"cannot parse the file as {KIND_NAMES[kind]}: {problem}: {shown!r}",
        where=f"{path}, line {line}",
        fix="repair or drop the malformed line (the header is line 1; a field with a comma needs double quotes)",
    )


def check_files(con: duckdb.DuckDBPyConnection, spec: LogSpec, kinds: dict[str, list[str]]) -> None:
    """Fail on the first file that is empty, unreadable, malformed, or lacks a mapped column."""
    for kind, group in sorted(kinds.items()):
        for path in group:
            if os.path.getsize(path) == 0:
                raise _empty(path)
            try:
                available = describe_columns(con, _schema_sql(kind, path))
            except duckdb.Error as exc:
                located = malformed_line(con, kind, path)
                if located is not None:
                    raise located from exc
                raise InputError(
                    f"cannot read the file as {KIND_NAMES[kind]}: {duckdb_reason(exc)}",
                    where=path,
                    fix=f"check the file is valid {KIND_NAMES[kind]} (its type is taken from the extension)",
                ) from exc
            _check_not_boolean(spec, kind, path, available)
            missing = [(f, c) for f, c in spec.columns.items() if c not in available]
            if kind in ("jsonl", "json"):  # keys only seen past the schema sample still count
                missing = [(f, c) for f, c in missing if not _json_key_present(con, kind, path, spec, c)]
            if not missing:
                continue
            if _row_count(con, kind, path, spec) == 0:
                raise _empty(path)
            field, column = missing[0]
            names = [c for c in available if c != FILE_COLUMN]
            near = [c for c in names if c.lower() == column.lower()]
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise InputError(
                f"column {column!r} (for {field}) is missing; the file has columns: {', '.join(map(repr, names))}",
                where=f"{path}, column {column!r}",
                fix=f"{hint}map the right column, e.g. --format generic --map {field}=COLUMN,... "
                "(CSV files need a header line)",
            )


def _check_not_boolean(spec: LogSpec, kind: str, path: str, available: dict[str, str]) -> None:
    """A typed file (Parquet) whose token column is true/false: DuckDB would read true as 1 token."""
    for field in (PROMPT, OUTPUT):
        column = spec.columns[field]
        if available.get(column, "").upper() == "BOOLEAN":
            raise InputError(
                f"column {column!r} ({field}) holds true/false values, not token counts",
                where=f"{path}, column {column!r}",
                fix=f"map {field} to the column with the token count, e.g. --format generic --map {field}=COLUMN,...",
            )


def _json_key_present(con: duckdb.DuckDBPyConnection, kind: str, path: str, spec: LogSpec, column: str) -> bool:
    source = source_sql(kind, [path], spec)
    try:
        row = con.execute(f"SELECT count({quote_ident(column)}) FROM {source}").fetchone()
    except duckdb.Error:
        return False
    return bool(row and row[0])


def _row_count(con: duckdb.DuckDBPyConnection, kind: str, path: str, spec: LogSpec) -> int:
    try:
        row = con.execute(f"SELECT count(*) FROM {_schema_sql(kind, path)}").fetchone()
    except duckdb.Error:
        return -1
    return int(row[0]) if row else 0


def scan_checked(
    con: duckdb.DuckDBPyConnection, spec: LogSpec, kinds: dict[str, list[str]], scan: Callable[[], T]
) -> T:
    """Run ``scan`` (a query over every file); if DuckDB rejects the input, name the file it cannot parse."""
    try:
        return scan()
    except (duckdb.InvalidInputException, duckdb.IOException, duckdb.ConversionException) as exc:
        for kind, group in sorted(kinds.items()):
            for path in group:
                parsed = parsed_sql(source_sql(kind, [path], spec), spec, _types(con, kind, path, spec))
                try:
                    con.execute(f"SELECT count(*) FROM ({clean_select_sql(parsed)})").fetchone()
                except duckdb.Error as single:
                    located = malformed_line(con, kind, path)
                    if located is not None:
                        raise located from single
                    raise InputError(
                        f"cannot parse the file as {KIND_NAMES[kind]}: {duckdb_reason(single)}",
                        where=path,
                        fix="repair or drop the malformed line (the line number counts the header as line 1)",
                    ) from single
        raise InputError(
            f"cannot read the inputs together: {duckdb_reason(exc)}",
            where=", ".join(p for group in kinds.values() for p in group),
            fix="check that files of one type share column types, or ingest them separately",
        ) from exc


def _types(con: duckdb.DuckDBPyConnection, kind: str, path: str, spec: LogSpec) -> dict[str, str]:
    return describe_columns(con, source_sql(kind, [path], spec)) if kind == "parquet" else {}


def check_scan_counts(
    con: duckdb.DuckDBPyConnection, spec: LogSpec, kinds: dict[str, list[str]], rows: int, bad: int
) -> int:
    """Fail when a file has no data rows or a row has a bad value; return ``rows``.

    ``rows`` and ``bad`` are the scan's totals over every file. A clean scan of one file
    needs nothing more; of several, each file is probed for a first row. Only when the
    scan found a bad value are the files counted one by one, so the error names each.
    """
    files = sorted(path for group in kinds.values() for path in group)
    if bad:
        per_file = file_counts(con, spec, kinds)
    elif len(files) == 1:
        per_file = {files[0]: (rows, 0)}
    else:
        per_file = {path: (_first_rows(con, kind, path, spec), 0) for kind, group in kinds.items() for path in group}
    check_file_counts(con, spec, kinds, per_file)
    return rows


def file_counts(
    con: duckdb.DuckDBPyConnection, spec: LogSpec, kinds: dict[str, list[str]]
) -> dict[str, tuple[int, int]]:
    """File -> (rows, rows with a bad value): a scan by file, run only once a bad value is known to exist."""
    bad = " OR ".join(f"{column} IS NULL" for column in ("ts_us", PROMPT, OUTPUT, *LABELS))
    counts = con.execute(
        f"SELECT file, count(*), count(*) FILTER (WHERE {bad}) FROM ({clean_sql(con, spec, kinds)}) GROUP BY file"
    ).fetchall()
    return {str(file): (int(n), int(n_bad)) for file, n, n_bad in counts}


def _first_rows(con: duckdb.DuckDBPyConnection, kind: str, path: str, spec: LogSpec) -> int:
    """1 if the file has a data row, else 0 (reads only as far as the first row)."""
    row = con.execute(f"SELECT count(*) FROM (SELECT 1 FROM {source_sql(kind, [path], spec)} LIMIT 1)").fetchone()
    return int(row[0]) if row else 0


def check_file_counts(
    con: duckdb.DuckDBPyConnection, spec: LogSpec, kinds: dict[str, list[str]], per_file: dict[str, tuple[int, int]]
) -> int:
    """Fail, naming every problem at once, when a file has no rows or a bad value; return the total row count.

    ``per_file`` maps file -> (rows, rows with a bad value), as counted by :func:`file_counts`. Each
    file with bad values is read again to find, for every column that has one, its first bad row
    and how many rows share it; one error then lists them all, file by file in path order.
    """
    problems: list[Problem] = []
    for path, kind in sorted((p, k) for k, group in kinds.items() for p in group):
        n, n_bad = per_file.get(path, (0, 0))
        if n == 0:
            problems.append(Problem(None, "", "the file has no data rows",
                                    "check the file was fully written, or leave it out of the inputs", place=path))
        elif n_bad:
            problems += bad_values(con, spec, kind, path, n_bad)
    sources = {problem.place.split(", ")[0] for problem in problems if problem.place}
    if len(problems) == 1:
        only = problems[0]
        raise InputError(only.problem, where=only.place or "", fix=only.fix)
    raise_problems(problems, sources.pop() if len(sources) == 1 else "the request logs", lambda _p: "",
                   many_fix="correct or drop the rows listed above")
    return sum(n for n, _ in per_file.values())


def _checks(spec: LogSpec) -> list[tuple[str, str, str]]:
    """(canonical field, source column, SQL 'value is good' predicate) in the order a row is judged."""
    checks = [
        (TS, spec.columns[TS], f"COALESCE({ts_ok('ts_parsed_us')}, false)"),
        (PROMPT, spec.columns[PROMPT], f"COALESCE({tokens_ok('prompt_real')}, false)"),
        (OUTPUT, spec.columns[OUTPUT], f"COALESCE({tokens_ok('output_real')}, false)"),
    ]
    for label in LABELS:
        if label in spec.columns:
            checks.append((label, spec.columns[label], f"({label} IS NOT NULL)"))
    return checks


def bad_values(con: duckdb.DuckDBPyConnection, spec: LogSpec, kind: str, path: str, n_bad: int) -> list[Problem]:
    """Re-read one file in order: one problem per column with a bad value, at its first bad row."""
    parsed = parsed_sql(source_sql(kind, [path], spec), spec, _types(con, kind, path, spec))
    checks = _checks(spec)
    flags = ", ".join(f"{sql} AS ok_{field}" for field, _, sql in checks)
    numbered = f"SELECT *, {flags} FROM (SELECT row_number() OVER () AS row_no, * FROM ({parsed}))"
    counts = ", ".join(f"count(*) FILTER (WHERE NOT ok_{f}), min(row_no) FILTER (WHERE NOT ok_{f})"
                       for f, _, _ in checks)
    con.execute("SET preserve_insertion_order = true")  # row_number() must follow file order
    try:
        tally = con.execute(f"SELECT {counts} FROM ({numbered})").fetchone() or ()
        firsts = {f: (int(tally[2 * i]), int(tally[2 * i + 1])) for i, (f, _, _) in enumerate(checks)
                  if tally and tally[2 * i]}
        cursor = con.execute(f"SELECT * FROM ({numbered}) WHERE row_no IN "
                             f"({', '.join(str(row_no) for _, row_no in firsts.values()) or 'NULL'})")
        names = [d[0] for d in cursor.description]
        rows = {int(found[0]): dict(zip(names, found, strict=True)) for found in cursor.fetchall()}
    finally:
        con.execute("SET preserve_insertion_order = false")
    if not firsts:  # cannot happen unless the file changed between the two reads
        return [Problem(None, "", "the file changed while it was read", "ingest a file that is not being written",
                        place=path)]
    problems = []
    for field, column, _ in checks:
        if field not in firsts:
            continue
        count, row_no = firsts[field]
        message, fix = _describe(spec, field, column, rows[row_no])
        total = n_bad if len(firsts) == 1 else count
        what = "bad values" if len(firsts) == 1 else f"a bad {column}"
        others = f" ({total:,} rows in this file have {what}; this is the first)" if total > 1 else ""
        problems.append(Problem(row_no - 1, column, message + others, fix,
                                place=f"{path}, {_row_word(kind)} {row_no}, column {column!r}"))
    return problems


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _describe(spec: LogSpec, field: str, column: str, row: dict[str, Any]) -> tuple[str, str]:
    """The message and fix for one bad value."""
    if field == TS:
        raw = row["raw_ts"]
        if raw is None or not str(raw).strip():
            return f"{column} is empty", "every request needs an arrival time; fill it or drop the row"
        parsed = row["ts_parsed_us"]
        if parsed is None:
            if spec.ts_unit is None:
                return (
                    f"{column} value {raw!r} is not a date-time",
                    "write ISO-8601 such as 2023-11-16 18:17:03.98 or 2023-11-16T18:17:03Z "
                    "(for epoch numbers add ts_unit=s, ms, us or ns to --map)",
                )
            if not _is_number(raw):
                return (
                    f"{column} value {raw!r} is not a number of {spec.ts_unit}",
                    "numeric timestamps must be plain numbers; check ts_unit in --map",
                )
            parsed = TS_MAX_US * 10**6  # too large for BIGINT microseconds: certainly out of range
        try:
            when = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(parsed))).isoformat()
        except OverflowError:
            when = f"about the year {1970 + int(parsed) / 31_557_600e6:,.0f}"
        if spec.ts_unit is not None and spec.origin_us == 0 and 0 <= int(parsed) < TS_MIN_US:
            return (
                f"{column} value {raw!r} is {when}, outside 2000-2200: a number this small is an offset from the "
                "trace start, not an epoch time",
                "pass --start with the trace's start time (e.g. --start 2024-05-01T00:00:00Z), or check ts_unit in "
                "--map",
            )
        return (
            f"{column} value {raw!r} is {when}, outside 2000-2200",
            "check the timestamp unit (ts_unit in --map) and --start",
        )
    if field in (PROMPT, OUTPUT):
        raw = row[f"raw_{field}"]
        real = row["prompt_real" if field == PROMPT else "output_real"]
        what = "a token count must be a non-negative integer"
        if raw is None or not str(raw).strip():
            problem = "is empty"
        elif real is None:
            problem = f"value {raw!r} is not a number"
        elif real != real or real < 0:
            problem = f"value {raw!r} is negative" if real < 0 else f"value {raw!r} is not a number"
        elif real > MAX_TOKENS:
            problem = f"value {raw!r} is above {MAX_TOKENS:,} tokens, longer than any model's context"
        else:
            problem = f"value {raw!r} is not a whole number"
        return f"{column} {problem}; {what}", "correct the value or drop the row"
    option = LABEL_OPTIONS[field]
    return (
        f"{column} is empty; every request needs a {field}",
        f"fill the column, or drop {field}= from --map and pass {option} VALUE for the whole log",
    )

"""From request-log files to one SQL relation of canonical, typed fields, read by DuckDB.

The logs are never loaded into Python: DuckDB scans them straight from disk (CSV/TSV,
optionally gzipped, Parquet, JSONL) in a connection with a memory limit and a spill
folder under the system temporary folder, so a 50M-row log keeps a bounded resident
set. The relation built here (:func:`clean_sql`) is scanned once, by
:mod:`planner.ingest.aggregate`; only when that scan finds a bad value does
:mod:`planner.ingest.validate` read the offending files again to name the row.

Columns of the clean relation (one row per request):

=============== ======= =================================================================
column          type    meaning
=============== ======= =================================================================
file            VARCHAR the source file (only when asked for: naming it on every row costs)
ts_us           BIGINT  arrival, microseconds since 1970-01-01 UTC; NULL if unparsable or
                        outside [2000, 2200)
region, model,  VARCHAR the series labels (column value or constant); NULL if empty.
traffic_class           A blank label is kept as read: the scan refuses it per group, which
                        costs far less than trimming every row
prompt_tokens,  BIGINT  token counts; NULL unless a whole number from 0 to 10M (``12`` and
output_tokens           ``12.0`` are accepted, ``12.5``, ``-1``, ``1e12`` and ``abc`` are not)
=============== ======= =================================================================

A NULL marks a bad value; :mod:`planner.ingest.validate` then re-reads only the
offending file to name its first bad row.

Timestamps: ISO-8601 text is cast to TIMESTAMPTZ in a session whose zone is UTC,
so naive text is UTC and text with an offset is converted. Text that cannot carry a
zone (:func:`naive_text_sql`) is cast to TIMESTAMP instead, which gives the same
instant at a third of the cost; DuckDB keeps microseconds
and truncates finer digits (the Azure trace's 100 ns digit), which is the right
rounding for bucketing. Numeric timestamps (``ts_unit``) are
``origin_us + value * unit_us``, computed in exact integer arithmetic when the value
is integral (floor division for ns) and as ``floor(value * unit_us)`` otherwise.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from planner.ceilings import MAX_TOKENS_PER_REQUEST
from planner.errors import InputError
from planner.ingest.formats import LABELS, OUTPUT, PROMPT, REUSE_FIELDS, TS, LogSpec, file_kind

# The exact quantile states of the 50M-row benchmark log fit in one scan (1.05 GiB peak resident set).
MEMORY_LIMIT = "1.5GB"
FILE_COLUMN = "__ingest_file"
TS_MIN_US = 946_684_800_000_000
"""2000-01-01T00:00:00Z: no LLM request log is older, and an epoch number read in the wrong unit, or a
relative offset read without --start, lands in 1970; such a time is refused, never bucketed."""
TS_MAX_US = 7_258_118_400_000_000  # 2200-01-01T00:00:00Z
MAX_TOKENS = MAX_TOKENS_PER_REQUEST  # a longer prompt or output cannot have been served (planner.ceilings)
TIMESTAMP_TYPES = ("TIMESTAMP", "DATE")  # prefixes of DuckDB types cast directly, not via text


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def expand_paths(paths: Sequence[str | Path]) -> list[str]:
    """Expand globs, check each path is an existing file, drop duplicates, and sort.

    A pattern that matches nothing is an error (a typo would otherwise ingest
    nothing silently). The result is sorted by path string, so the same arguments in
    any order give the same file list.
    """
    if not paths:
        raise InputError("no input files were given", fix="pass one or more request-log files or globs")
    found: dict[str, str] = {}
    for entry in paths:
        text = str(entry)
        if glob.has_magic(text):
            matches = [m for m in glob.glob(text, recursive=True) if os.path.isfile(m)]
            if not matches:
                raise InputError("the pattern matches no file", where=text, fix="check the pattern and the folder")
        else:
            if not os.path.exists(text):
                raise InputError("file not found", where=text, fix="check the path")
            if os.path.isdir(text):
                raise InputError(
                    "is a folder, not a file", where=text, fix=f"pass a glob such as {os.path.join(text, '*.csv')}"
                )
            matches = [text]
        for match in matches:
            found.setdefault(os.path.realpath(match), match)
    files = sorted(found.values())
    for path in files:
        try:
            with open(path, "rb") as handle:
                handle.read(1)
        except OSError as exc:
            raise InputError(f"cannot read the file: {exc.strerror}", where=path, fix="check its permissions") from exc
    return files


def connect(workdir: Path, memory_limit: str = MEMORY_LIMIT) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that spills to ``workdir/spill`` past ``memory_limit``."""
    spill = workdir / "spill"
    spill.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit = {quote_literal(memory_limit)}")
    con.execute(f"SET temp_directory = {quote_literal(str(spill))}")
    con.execute("SET TimeZone = 'UTC'")
    # Aggregations are order-free and the outputs are sorted explicitly, so the scan need not keep order.
    con.execute("SET preserve_insertion_order = false")
    return con


def source_sql(kind: str, files: Sequence[str], spec: LogSpec, with_file: bool = True) -> str:
    """A DuckDB table function reading ``files`` (all of one kind), with the file name as a column if asked."""
    listed = "[" + ", ".join(quote_literal(f) for f in files) + "]"
    name = quote_literal(FILE_COLUMN) if with_file else "false"
    if kind in ("csv", "tsv"):
        delim = quote_literal("\t" if kind == "tsv" else ",")
        return (
            f"read_csv({listed}, header = true, all_varchar = true, delim = {delim}, skip = 0, "
            f"union_by_name = {str(len(files) > 1).lower()}, filename = {name})"
        )
    if kind in ("jsonl", "json"):
        layout = "'newline_delimited'" if kind == "jsonl" else "'auto'"
        wanted = sorted(set(spec.columns.values()))
        columns = "{" + ", ".join(f"{quote_literal(c)}: 'VARCHAR'" for c in wanted) + "}"
        return f"read_json({listed}, format = {layout}, columns = {columns}, filename = {name})"
    return f"read_parquet({listed}, union_by_name = true, filename = {name})"


def describe_columns(con: duckdb.DuckDBPyConnection, relation_sql: str) -> dict[str, str]:
    """Column name -> DuckDB type of a relation (reads only what schema detection needs)."""
    rows = con.execute(f"DESCRIBE SELECT * FROM {relation_sql}").fetchall()
    return {str(row[0]): str(row[1]) for row in rows}


def naive_text_sql(text: str) -> str:
    """SQL predicate: the date-time text cannot name a zone or an offset, so TIMESTAMP reads it as TIMESTAMPTZ does.

    DuckDB's TIMESTAMP cast passes over a zone, an offset or other trailing text,
    where TIMESTAMPTZ applies it or refuses it. Text let through here holds no ``+``
    and no ``/``, at most the date's two ``-``, at most one space and only right after
    a ten-character date, and ends in a digit: an offset needs a sign, a zone name
    ends in a letter unless it holds a ``/`` or a sign or is ``GMT0`` (UTC), and
    trailing text follows a space. Anything else takes the TIMESTAMPTZ cast, which
    costs three times as much. Each test is a byte search: a character-class test
    (``rtrim`` with a set, a regular expression) measured costlier than the cast saves.
    """
    return (
        f"(NOT contains({text}, '+') AND NOT contains({text}, '/') AND {text} NOT LIKE '%-%-%-%' "
        f"AND strpos({text}, ' ') IN (0, 11) AND {text} NOT LIKE '% % %')"
    )


def _ts_parse_expr(raw: str, spec: LogSpec, source_type: str) -> str:
    """SQL for the arrival time in microseconds since the epoch (HUGEINT/BIGINT), NULL if unparsable."""
    if spec.ts_unit is None:
        if source_type.upper().startswith(TIMESTAMP_TYPES):
            return f"epoch_us(CAST({raw} AS TIMESTAMPTZ))"
        text = f"CAST({raw} AS VARCHAR)"
        return (
            f"CASE WHEN {naive_text_sql(text)} THEN epoch_us(TRY_CAST({text} AS TIMESTAMP)) "
            f"ELSE epoch_us(TRY_CAST({text} AS TIMESTAMPTZ)) END"
        )
    text = f"CAST({raw} AS VARCHAR)"
    whole = f"TRY_CAST({text} AS BIGINT)"
    real = f"TRY_CAST({text} AS DOUBLE)"
    if spec.ts_unit == "ns":
        exact = f"(CAST({whole} AS HUGEINT) - ((CAST({whole} AS HUGEINT) % 1000) + 1000) % 1000) // 1000"
        scale = "0.001"
    else:
        unit_us = {"s": 1_000_000, "ms": 1_000, "us": 1}[spec.ts_unit]
        exact = f"CAST({whole} AS HUGEINT) * {unit_us}"
        scale = str(unit_us)
    # TRY_CAST(text AS BIGINT) rounds '12.5' to 13, so the exact path is taken only
    # when the integer and the real reading agree.
    offset = (
        f"CASE WHEN {whole} IS NOT NULL AND CAST({whole} AS DOUBLE) = {real} THEN {exact} "
        f"ELSE TRY_CAST(floor({real} * {scale}) AS HUGEINT) END"
    )
    return f"TRY_CAST({spec.origin_us} + ({offset}) AS BIGINT)"


def parsed_sql(source: str, spec: LogSpec, types: dict[str, str], scan: bool = False) -> str:
    """SELECT over ``source`` giving raw text and parsed values for every canonical field.

    Columns: file, raw_ts, raw_prompt_tokens, raw_output_tokens, raw_<label> (for
    mapped labels), ts_parsed_us, prompt_real, output_real, each label's value
    (NULL if blank), and raw_prefix_hashes and raw_session_id as text when mapped (a
    Parquet list as JSON). With ``scan`` (the aggregation's form, ``source`` read
    without its file name): no file column, labels as read, and no reuse columns.
    """
    cols = spec.columns
    raw = {field: quote_ident(cols[field]) for field in (TS, PROMPT, OUTPUT)}
    select = [] if scan else [f"{quote_ident(FILE_COLUMN)} AS file"]
    select += [
        f"CAST({raw[TS]} AS VARCHAR) AS raw_ts",
        f"CAST({raw[PROMPT]} AS VARCHAR) AS raw_prompt_tokens",
        f"CAST({raw[OUTPUT]} AS VARCHAR) AS raw_output_tokens",
        f"{_ts_parse_expr(raw[TS], spec, types.get(cols[TS], 'VARCHAR'))} AS ts_parsed_us",
        f"TRY_CAST({raw[PROMPT]} AS DOUBLE) AS prompt_real",
        f"TRY_CAST({raw[OUTPUT]} AS DOUBLE) AS output_real",
    ]
    for label in LABELS:
        where, value = spec.label_source(label)
        if where == "column":
            text = f"CAST({quote_ident(value)} AS VARCHAR)"
            select.append(f"{text} AS raw_{label}")
            if scan:
                select.append(f"{text} AS {label}")
                continue
            # trim() only for values that start or end with a space: most never pay for it.
            select.append(
                f"CASE WHEN {text} <> '' AND ((left({text}, 1) <> ' ' AND right({text}, 1) <> ' ') "
                f"OR trim({text}) <> '') THEN {text} END AS {label}"
            )
        else:
            select.append(f"{quote_literal(value)} AS {label}")
    for field in REUSE_FIELDS if not scan else ():
        if field in cols:
            column = quote_ident(cols[field])
            listed = types.get(cols[field], "VARCHAR").endswith("[]")
            select.append(f"CAST({f'to_json({column})' if listed else column} AS VARCHAR) AS raw_{field}")
    return f"SELECT {', '.join(select)} FROM {source}"


def tokens_ok(real: str) -> str:
    """SQL predicate: a DOUBLE reading is a whole number from 0 to ``MAX_TOKENS`` (NaN fails)."""
    return f"({real} >= 0 AND {real} = trunc({real}) AND {real} <= {MAX_TOKENS})"


def ts_ok(parsed: str) -> str:
    return f"({parsed} >= {TS_MIN_US} AND {parsed} < {TS_MAX_US})"


def clean_select_sql(parsed: str, with_file: bool = True) -> str:
    """The clean columns from a :func:`parsed_sql` relation: bad values become NULL."""
    return (
        f"SELECT {'file, ' if with_file else ''}"
        f"CASE WHEN {ts_ok('ts_parsed_us')} THEN CAST(ts_parsed_us AS BIGINT) END AS ts_us, "
        f"{', '.join(LABELS)}, "
        f"CASE WHEN {tokens_ok('prompt_real')} THEN CAST(prompt_real AS BIGINT) END AS prompt_tokens, "
        f"CASE WHEN {tokens_ok('output_real')} THEN CAST(output_real AS BIGINT) END AS output_tokens "
        f"FROM ({parsed})"
    )


def duckdb_reason(exc: duckdb.Error) -> str:
    """DuckDB's message without its query echo and option dump: the part a user can act on."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept: list[str] = []
    for line in lines:
        if line.startswith(("LINE ", "Possible fixes", "file =", "^", "The search space used was")) or (
                kept and not line):
            break
        if line:
            kept.append(line)
    text = re.sub(r"^[A-Za-z ]+ Error: ", "", " ".join(kept))
    return text[:400] or type(exc).__name__


def files_by_kind(files: Sequence[str]) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {}
    for path in files:
        kinds.setdefault(file_kind(path), []).append(path)
    return kinds


def clean_sql(con: duckdb.DuckDBPyConnection, spec: LogSpec, kinds: dict[str, list[str]], scan: bool = False) -> str:
    """The clean relation over every input file: one reader per file kind, combined with UNION ALL.

    With ``scan``, the aggregation's form: no file column, and blank labels kept as read
    (see :func:`parsed_sql`).
    """
    parts = []
    for kind, group in sorted(kinds.items()):
        source = source_sql(kind, group, spec, with_file=not scan)
        types = describe_columns(con, source) if kind == "parquet" else {}
        parts.append(clean_select_sql(parsed_sql(source, spec, types, scan), with_file=not scan))
    return " UNION ALL ".join(parts)

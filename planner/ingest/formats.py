"""Request-log formats: the presets for known public traces and the generic column mapping.

A log is reduced to five canonical fields per request:

* ``ts``: when the request arrived, UTC;
* ``prompt_tokens`` and ``output_tokens``: its prompt (context) and generated lengths;
* ``region``, ``model``, ``traffic_class``: the series it belongs to, each either a
  column of the log or a constant label given on the command line.

Presets name the columns of traces whose layout is fixed:

* ``azure`` (Azure LLM inference trace 2023, Patel et al., ISCA 2024): CSV with
  ``TIMESTAMP`` ("2023-11-16 18:17:03.9799600", 100 ns precision, UTC, no zone
  marker), ``ContextTokens``, ``GeneratedTokens``.
* ``mooncake`` (Kimi's Mooncake trace, FAST 2025): JSONL with ``timestamp`` in
  milliseconds since the trace start (which the user must supply), ``input_length``,
  ``output_length`` and ``hash_ids`` (hashes of the prompt's 512-token blocks, read
  for the prefix-reuse statistics, :mod:`planner.ingest.reuse`).
* ``generic``: any CSV/TSV/Parquet/JSONL, with a mapping
  ``ts=COL,prompt_tokens=COL,output_tokens=COL[,region=COL,model=COL,traffic_class=COL][,ts_unit=U]``.
  Without ``ts_unit`` the timestamp column holds ISO-8601 date-times (naive ones are
  read as UTC, ones with an offset are converted to UTC). With ``ts_unit`` (s, ms,
  us or ns) it holds numbers: seconds/milliseconds/... since the Unix epoch, or since
  ``start`` when one is given. Two optional keys carry prefix reuse:
  ``prefix_hashes=COL`` (each request's prompt-block hashes, a JSON list or a space or
  comma separated string; the block size is ``--block-tokens``) and ``session_id=COL``
  (requests sharing it are turns of one conversation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from planner.contracts import SERIES_KEY
from planner.errors import InputError

TS = "ts"
PROMPT = "prompt_tokens"
OUTPUT = "output_tokens"
LABELS: tuple[str, ...] = SERIES_KEY
REQUIRED_FIELDS: tuple[str, ...] = (TS, PROMPT, OUTPUT)
TS_UNIT_KEY = "ts_unit"
PREFIX_HASHES = "prefix_hashes"
SESSION = "session_id"
REUSE_FIELDS: tuple[str, ...] = (PREFIX_HASHES, SESSION)
MAPPING_KEYS: tuple[str, ...] = (*REQUIRED_FIELDS, *LABELS, TS_UNIT_KEY, *REUSE_FIELDS)

# Microseconds per unit; timestamps are held as integer microseconds since the epoch.
TS_UNITS_US: dict[str, int] = {"s": 1_000_000, "ms": 1_000, "us": 1}
TS_UNITS: tuple[str, ...] = ("s", "ms", "us", "ns")

LABEL_OPTIONS = {"region": "--region", "model": "--model", "traffic_class": "--traffic-class"}

# File kinds, chosen by extension (a trailing .gz is read transparently).
KIND_BY_SUFFIX: dict[str, str] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
}
GZIP_KINDS = ("csv", "tsv", "jsonl", "json")


@dataclass(frozen=True)
class Preset:
    """A known trace layout: which source column holds each canonical field."""

    name: str
    columns: Mapping[str, str]
    ts_unit: str | None
    needs_start: bool
    description: str
    block_tokens: int | None = None
    """Tokens per prompt block of its prefix hashes, if it has them."""


PRESETS: dict[str, Preset] = {
    "azure": Preset(
        name="azure",
        columns={TS: "TIMESTAMP", PROMPT: "ContextTokens", OUTPUT: "GeneratedTokens"},
        ts_unit=None,
        needs_start=False,
        description="Azure LLM inference trace 2023: CSV TIMESTAMP (UTC), ContextTokens, GeneratedTokens",
    ),
    "mooncake": Preset(
        name="mooncake",
        columns={TS: "timestamp", PROMPT: "input_length", OUTPUT: "output_length", PREFIX_HASHES: "hash_ids"},
        ts_unit="ms",
        needs_start=True,
        description="Mooncake trace: JSONL timestamp (ms since --start), input_length, output_length, hash_ids",
        block_tokens=512,
    ),
}
FORMATS: tuple[str, ...] = (*PRESETS, "generic")
TABLE_FORMATS: tuple[str, ...] = ("rates",)
"""Formats of aggregated tables, not request logs (:mod:`planner.ingest.rates_read`)."""


@dataclass(frozen=True)
class LogSpec:
    """Everything the reader needs to turn one request log into canonical fields.

    ``columns`` maps canonical field -> source column; ``constants`` maps label ->
    constant value for labels the log does not carry. ``origin_us`` is the instant
    numeric timestamps count from (microseconds since the Unix epoch), ``None`` for
    ISO-8601 text timestamps. ``block_tokens`` is the prompt-block size of the
    ``prefix_hashes`` column, set exactly when that column is mapped.
    """

    format_name: str
    columns: Mapping[str, str]
    constants: Mapping[str, str] = field(default_factory=dict)
    ts_unit: str | None = None
    origin_us: int | None = None
    block_tokens: int | None = None

    @property
    def carries_reuse(self) -> bool:
        """Whether the log has prefix hashes or session ids, so prefix reuse can be measured."""
        return any(key in self.columns for key in REUSE_FIELDS)

    def label_source(self, label: str) -> tuple[str, str]:
        """('column', name) or ('constant', value) for one of region/model/traffic_class."""
        if label in self.columns:
            return "column", self.columns[label]
        return "constant", self.constants[label]


def parse_mapping(
    text: str,
    keys: tuple[str, ...] = MAPPING_KEYS,
    example: str = "ts=timestamp,prompt_tokens=input_tokens,output_tokens=output_tokens",
) -> dict[str, str]:
    """Parse ``"ts=COL,prompt_tokens=COL,output_tokens=COL[,region=COL,...]"`` into a dict.

    Keys must be among ``keys`` (by default the request-log fields and ``ts_unit``);
    each may appear once; values are column names (spaces around ``=`` and ``,`` are
    ignored).
    """
    if not text or not text.strip():
        raise InputError("the column mapping is empty", where="--map", fix=f"pass e.g. --map {example}")
    mapping: dict[str, str] = {}
    for position, item in enumerate(text.split(","), start=1):
        item = item.strip()
        if not item:
            raise InputError(
                f"entry {position} of the column mapping is empty (a stray comma?)",
                where="--map",
                fix=f"separate KEY=COLUMN pairs with single commas, e.g. {example}",
            )
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise InputError(
                f"mapping entry {item!r} has no '='",
                where="--map",
                fix=f"write each entry as KEY=COLUMN, e.g. {example}",
            )
        if key not in keys:
            raise InputError(
                f"unknown mapping key {key!r}",
                where="--map",
                fix=f"use only these keys: {', '.join(keys)}",
            )
        if key in mapping:
            raise InputError(f"mapping key {key!r} is given twice", where="--map", fix="give each key once")
        if not value:
            raise InputError(f"mapping key {key!r} has no column name", where="--map", fix=f"write {key}=COLUMN")
        mapping[key] = value
    return mapping


def file_kind(path: str | Path) -> str:
    """The reader for a file, by extension: csv, tsv, parquet, jsonl or json (``.gz`` allowed on text kinds)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    compressed = bool(suffixes) and suffixes[-1] == ".gz"
    if compressed:
        suffixes = suffixes[:-1]
    kind = KIND_BY_SUFFIX.get(suffixes[-1]) if suffixes else None
    if kind is None or (compressed and kind not in GZIP_KINDS):
        known = ", ".join([*KIND_BY_SUFFIX, ".csv.gz", ".tsv.gz", ".jsonl.gz"])
        raise InputError(
            "cannot tell the file type from its extension",
            where=str(path),
            fix=f"name request logs with one of these extensions: {known}",
        )
    return kind


def _start_us(start: datetime) -> int:
    """Microseconds since the Unix epoch; a naive ``start`` is taken as UTC."""
    moment = start.replace(tzinfo=UTC) if start.tzinfo is None else start.astimezone(UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _block_tokens(fmt: str, columns: Mapping[str, str], block_tokens: int | None) -> int | None:
    """The prompt-block size of the prefix hashes: ``--block-tokens``, else the preset's; None without hashes."""
    if block_tokens is not None and block_tokens <= 0:
        raise InputError(
            f"--block-tokens must be a positive number of tokens, got {block_tokens}",
            where="--block-tokens",
            fix="give the tokens each prefix hash covers, e.g. --block-tokens 512 (vLLM's default block is 16)",
        )
    if PREFIX_HASHES not in columns:
        if block_tokens is not None:
            raise InputError(
                "--block-tokens only applies to logs with prefix hashes, and this one has none",
                where="--block-tokens",
                fix="drop --block-tokens, or map the hash column with --map prefix_hashes=COLUMN",
            )
        return None
    if block_tokens is not None:
        return block_tokens
    preset = PRESETS.get(fmt)
    if preset is None or preset.block_tokens is None:
        raise InputError(
            "the prefix hashes need a block size: how many prompt tokens each hash covers",
            where="--block-tokens",
            fix="pass --block-tokens N with the block size the hashes were computed over, e.g. --block-tokens 512",
        )
    return preset.block_tokens


def _constants(labels: Mapping[str, str | None], given: Mapping[str, str]) -> dict[str, str]:
    """Constant labels, each checked: known, non-empty, and not also a mapped column; every label from one place."""
    constants: dict[str, str] = {}
    for key, value in labels.items():
        if key not in LABELS:
            raise InputError(f"unknown label {key!r}", fix=f"constant labels are {', '.join(LABELS)}")
        if value is None:
            continue
        if not str(value).strip():
            raise InputError(
                f"the constant {key} label is empty", where=LABEL_OPTIONS[key], fix="pass a non-empty value"
            )
        if key in given:
            raise InputError(
                f"{key} is given both as column {given[key]!r} and as the constant {value!r}",
                where=LABEL_OPTIONS[key],
                fix=f"drop {LABEL_OPTIONS[key]} to use the column, or drop {key}= from --map",
            )
        constants[key] = str(value)
    absent = [key for key in LABELS if key not in given and key not in constants]
    if absent:
        options = " ".join(f"{LABEL_OPTIONS[key]} VALUE" for key in absent)
        raise InputError(
            f"no {', '.join(absent)} for the requests: the log has no such column and no constant was given",
            fix=f"pass {options}, or map a column with --map {absent[0]}=COLUMN",
        )
    return constants


def resolve_spec(
    fmt: str,
    mapping: Mapping[str, str] | None,
    start: datetime | None,
    labels: Mapping[str, str | None],
    block_tokens: int | None = None,
) -> LogSpec:
    """Check the format, mapping, start, constant labels and block size together; return the reader's spec.

    Every label must come from exactly one place: a mapped column or a constant.
    """
    fmt = fmt.strip().lower()
    if fmt not in FORMATS:
        raise InputError(f"unknown log format {fmt!r}", where="--format",
                         fix=f"use one of: {', '.join((*FORMATS, *TABLE_FORMATS))}")
    given = dict(mapping or {})
    for key in given:
        if key not in MAPPING_KEYS:
            raise InputError(f"unknown mapping key {key!r}", where="--map", fix=f"use only: {', '.join(MAPPING_KEYS)}")
    if fmt == "generic":
        missing = [key for key in REQUIRED_FIELDS if key not in given]
        if missing:
            raise InputError(
                f"the generic format needs a column for {', '.join(missing)}",
                where="--map",
                fix="pass --map ts=COL,prompt_tokens=COL,output_tokens=COL "
                "(plus region=, model=, traffic_class= if the log has them)",
            )
        ts_unit, needs_start = given.pop(TS_UNIT_KEY, None), False
    else:
        preset = PRESETS[fmt]
        ts_unit, needs_start = given.pop(TS_UNIT_KEY, preset.ts_unit), preset.needs_start
        given = {**preset.columns, **given}
    if ts_unit is not None and ts_unit not in TS_UNITS:
        raise InputError(f"unknown ts_unit {ts_unit!r}", where="--map", fix=f"use one of: {', '.join(TS_UNITS)}")

    if needs_start and start is None:
        raise InputError(
            f"the {fmt} format has timestamps relative to the trace start, and no start was given",
            where="--start",
            fix="pass --start with the trace's start time, e.g. --start 2024-05-01T00:00:00Z",
        )
    if start is not None and ts_unit is None:
        raise InputError(
            "--start only applies to numeric relative timestamps, and this log has date-time text",
            where="--start",
            fix="drop --start, or add ts_unit=ms (or s, us, ns) to --map if the column holds offsets",
        )
    origin_us = None if ts_unit is None else (_start_us(start) if start is not None else 0)
    constants = _constants(labels, given)
    return LogSpec(format_name=fmt, columns=given, constants=constants, ts_unit=ts_unit, origin_us=origin_us,
                   block_tokens=_block_tokens(fmt, given, block_tokens))

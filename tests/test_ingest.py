"""planner ingest: presets, mappings, globs, buckets, validation errors, exact statistics, real traces."""

from __future__ import annotations

import csv
import gzip
import json
import math
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from conftest import samples_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.ceilings import MAX_TOKENS_PER_REQUEST
from planner.errors import InputError
from planner.ingest import (
    DEMAND_COLUMNS,
    FREQ_EXAMPLES,
    HISTOGRAM_COLUMNS,
    ingest_logs,
    output_paths,
    parse_freq,
    parse_mapping,
    write_ingest_outputs,
)
from planner.ingest.quantiles import BINS, bin_counts_sql, bin_upper
from planner.ingest.reader import naive_text_sql

LABELS = {"region": "eu-west", "model": "llama-3.1-8b", "traffic_class": "interactive"}
GENERIC = "ts=ts,prompt_tokens=prompt,output_tokens=output"
GENERIC_LABELLED = GENERIC + ",region=region,model=model,traffic_class=class"


def write_csv(path: Path, header: list[str], rows: list[list[object]], delimiter: str = ",") -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def run_ingest(paths: list[str], out: Path, fmt: str = "generic", **kwargs) -> list[Path]:
    """What the CLI does: check the outputs, read everything, then write both outputs."""
    out_path, histogram = output_paths(out)
    result = ingest_logs(paths, fmt, **kwargs)
    return write_ingest_outputs(result, out_path, histogram)


def iso_hour(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:00:00Z")


# --------------------------------------------------------------------------- presets
def test_azure_preset_buckets_sums_and_quantiles(tmp_path: Path) -> None:
    rows = [
        ["2023-11-16 18:17:03.9799600", 4808, 10],
        ["2023-11-16 18:59:59.9999996", 100, 1],  # 100 ns digit truncated: still the 18:00 hour
        ["2023-11-16 18:30:00.0000000", 0, 0],
        ["2023-11-16 19:00:00.0000000", 7, 3],
        ["2023-11-16 19:01:00.5", 9, 5],
    ]
    log = write_csv(tmp_path / "azure.csv", ["TIMESTAMP", "ContextTokens", "GeneratedTokens"], rows)
    result = ingest_logs([str(log)], "azure", labels=LABELS)
    demand = result.demand
    assert list(demand.columns) == list(DEMAND_COLUMNS)
    assert demand["ts"].tolist() == ["2023-11-16T18:00:00Z", "2023-11-16T19:00:00Z"]
    assert demand["requests"].tolist() == [3, 2]
    assert demand["prompt_tokens_sum"].tolist() == [4908, 16]
    assert demand["output_tokens_sum"].tolist() == [11, 8]
    first = demand.iloc[0]
    assert first["prompt_tokens_p50"] == np.percentile([4808, 100, 0], 50)
    assert math.isclose(first["prompt_tokens_p99"], np.percentile([4808, 100, 0], 99))
    assert (demand[["region", "model", "traffic_class"]].iloc[0].tolist()) == ["eu-west", "llama-3.1-8b", "interactive"]
    assert result.rows_read == 5 and result.files == [str(log)] and result.format_name == "azure"


def test_mooncake_preset_is_relative_to_start(tmp_path: Path) -> None:
    records = [
        {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]},
        {"timestamp": 1_799_999, "input_length": 10, "output_length": 2, "hash_ids": [3]},
        {"timestamp": 1_800_000, "input_length": 20, "output_length": 4, "hash_ids": []},
    ]
    log = write_jsonl(tmp_path / "trace.jsonl", records)
    start = datetime(2024, 5, 1, 2, 30, tzinfo=timezone(timedelta(hours=2)))  # 00:30 UTC
    result = ingest_logs([str(log)], "mooncake", start=start, labels=LABELS)
    assert result.demand["ts"].tolist() == ["2024-05-01T00:00:00Z", "2024-05-01T01:00:00Z"]
    assert result.demand["requests"].tolist() == [2, 1]
    assert result.demand["prompt_tokens_sum"].tolist() == [6768, 20]
    naive = ingest_logs([str(log)], "mooncake", start=datetime(2024, 5, 1, 0, 30), labels=LABELS)
    pd.testing.assert_frame_equal(naive.demand, result.demand)
    with pytest.raises(InputError, match="--start"):
        ingest_logs([str(log)], "mooncake", labels=LABELS)


def test_generic_mapping_with_label_columns_sorts_by_series_then_time(tmp_path: Path) -> None:
    rows = [
        ["2024-01-01T10:05:00Z", 100, 10, "us-east", "llama-3.1-8b", "batch"],
        ["2024-01-01T09:05:00Z", 200, 20, "us-east", "llama-3.1-8b", "batch"],
        ["2024-01-01T09:10:00+01:00", 300, 30, "ap-northeast", "llama-3.1-70b", "interactive"],  # 08:10 UTC
        ["2024-01-01T09:50:00Z", 400, 40, "us-east", "llama-3.1-8b", "batch"],
    ]
    log = write_csv(tmp_path / "log.csv", ["ts", "prompt", "output", "region", "model", "class"], rows)
    demand = ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC_LABELLED)).demand
    assert demand[["ts", "region", "requests", "prompt_tokens_sum"]].values.tolist() == [
        ["2024-01-01T08:00:00Z", "ap-northeast", 1, 300],
        ["2024-01-01T09:00:00Z", "us-east", 2, 600],
        ["2024-01-01T10:00:00Z", "us-east", 1, 100],
    ]


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "tsv", "csv.gz", "json"])
def test_generic_reads_every_file_type(tmp_path: Path, kind: str) -> None:
    frame = pd.DataFrame(
        {
            "ts": ["2024-01-01 00:10:00", "2024-01-01 00:20:00", "2024-01-01 01:00:00"],
            "prompt": [5, 6, 7],
            "output": [1, 2, 3],
        }
    )
    path = tmp_path / f"log.{kind}"
    if kind == "parquet":
        frame.to_parquet(path)
    elif kind == "jsonl":
        write_jsonl(path, frame.to_dict("records"))
    elif kind == "json":
        path.write_text(json.dumps(frame.to_dict("records")), encoding="utf-8")
    elif kind == "tsv":
        write_csv(path, list(frame.columns), frame.values.tolist(), delimiter="\t")
    else:
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            frame.to_csv(handle, index=False)
    demand = ingest_logs([str(path)], "generic", mapping=parse_mapping(GENERIC), labels=LABELS).demand
    assert demand["requests"].tolist() == [2, 1]
    assert demand["prompt_tokens_sum"].tolist() == [11, 7]


def test_parquet_native_timestamps_and_epoch_units(tmp_path: Path) -> None:
    moments = pd.to_datetime(["2024-01-01T00:59:59.999999Z", "2024-01-01T01:00:00.000000Z"], format="ISO8601")
    pd.DataFrame({"ts": moments, "prompt": [1, 2], "output": [3, 4]}).to_parquet(tmp_path / "native.parquet")
    demand = ingest_logs(
        [str(tmp_path / "native.parquet")], "generic", mapping=parse_mapping(GENERIC), labels=LABELS
    ).demand
    assert demand["requests"].tolist() == [1, 1]

    base_s = 1_704_067_200  # 2024-01-01T00:00:00Z
    for unit, scale in (("s", 1), ("ms", 10**3), ("us", 10**6), ("ns", 10**9)):
        rows = [[(base_s + 3600) * scale - 1, 1, 1], [(base_s + 3600) * scale, 2, 2]]  # one tick before 01:00
        log = write_csv(tmp_path / f"epoch_{unit}.csv", ["ts", "prompt", "output"], rows)
        mapping = parse_mapping(GENERIC + f",ts_unit={unit}")
        demand = ingest_logs([str(log)], "generic", mapping=mapping, labels=LABELS).demand
        assert demand["ts"].tolist() == ["2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z"], unit
    fractional = write_csv(tmp_path / "frac.csv", ["ts", "prompt", "output"], [[f"{base_s + 3599}.75", 1, 1]])
    demand = ingest_logs(
        [str(fractional)], "generic", mapping=parse_mapping(GENERIC + ",ts_unit=s"), labels=LABELS
    ).demand
    assert demand["ts"].tolist() == ["2024-01-01T00:00:00Z"]


def test_preset_mapping_can_add_label_columns(tmp_path: Path) -> None:
    rows = [["2023-11-16 18:00:01", 5, 1, "us-west"], ["2023-11-16 18:00:02", 6, 1, "eu-west"]]
    log = write_csv(tmp_path / "azure_regions.csv", ["TIMESTAMP", "ContextTokens", "GeneratedTokens", "dc"], rows)
    result = ingest_logs([str(log)], "azure", mapping={"region": "dc"}, labels={"model": "m", "traffic_class": "c"})
    assert result.demand["region"].tolist() == ["eu-west", "us-west"]


# --------------------------------------------------------------------------- globs and labels
def test_glob_combines_files_and_quantiles_span_them(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    prompts = {"b.csv": [10, 20, 30], "a.csv": [1000, 5], "c.csv": [7]}
    for name, values in prompts.items():
        rows = [[f"2024-02-01 12:{i:02d}:00", v, 1] for i, v in enumerate(values)]
        write_csv(folder / name, ["ts", "prompt", "output"], rows)
    result = ingest_logs([str(folder / "*.csv")], "generic", mapping=parse_mapping(GENERIC), labels=LABELS)
    assert result.files == sorted(str(folder / n) for n in prompts)
    everything = [v for values in prompts.values() for v in values]
    row = result.demand.iloc[0]
    assert row["requests"] == 6 and row["prompt_tokens_sum"] == sum(everything)
    assert math.isclose(row["prompt_tokens_p99"], np.percentile(everything, 99))
    again = ingest_logs(
        [str(folder / "c.csv"), str(folder / "[ab].csv"), str(folder / "a.csv")],
        "generic",
        mapping=parse_mapping(GENERIC),
        labels=LABELS,
    )
    assert again.files == result.files  # duplicates dropped, order fixed
    pd.testing.assert_frame_equal(again.demand, result.demand)
    with pytest.raises(InputError, match="matches no file") as caught:
        ingest_logs([str(folder / "*.parquet")], "generic", mapping=parse_mapping(GENERIC), labels=LABELS)
    assert "*.parquet" in str(caught.value)


def test_files_of_different_types_combine(tmp_path: Path) -> None:
    frame = pd.DataFrame({"ts": ["2024-01-01 00:10:00", "2024-01-01 00:20:00"], "prompt": [5, 6], "output": [1, 2]})
    frame.to_parquet(tmp_path / "part1.parquet")
    write_jsonl(tmp_path / "part2.jsonl", frame.to_dict("records"))
    frame.to_csv(tmp_path / "part3.csv", index=False)
    result = ingest_logs([str(tmp_path / "part*")], "generic", mapping=parse_mapping(GENERIC), labels=LABELS)
    assert len(result.files) == 3 and result.rows_read == 6
    assert result.demand["prompt_tokens_sum"].tolist() == [33]


def test_labels_must_come_from_a_column_or_a_constant(tmp_path: Path) -> None:
    log = write_csv(tmp_path / "l.csv", ["ts", "prompt", "output", "region"], [["2024-01-01", 1, 1, "us-east"]])
    with pytest.raises(InputError, match="--model") as caught:
        ingest_logs(
            [str(log)], "generic", mapping=parse_mapping(GENERIC + ",region=region"), labels={"traffic_class": "b"}
        )
    assert "--traffic-class" not in str(caught.value)
    with pytest.raises(InputError, match="both as column"):
        ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC + ",region=region"), labels=LABELS)
    with pytest.raises(InputError, match="--region"):
        ingest_logs([str(log)], "azure", labels={"model": "m", "traffic_class": "c"})


# --------------------------------------------------------------------------- freq
def test_freq_sizes() -> None:
    assert [parse_freq(f) for f in FREQ_EXAMPLES] == [60, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400]
    assert parse_freq("60min") == 3600 and parse_freq("24h") == 86400
    for bad in ("7min", "5h", "2d", "30s", "1w", "hourly", "", "0min", "1.5h"):
        with pytest.raises(InputError, match="--freq"):
            parse_freq(bad)


@pytest.mark.parametrize(
    ("freq", "expected"),
    [
        ("1min", ["2024-03-10T05:59:00Z", "2024-03-10T06:00:00Z", "2024-03-10T23:17:00Z"]),
        ("15min", ["2024-03-10T05:45:00Z", "2024-03-10T06:00:00Z", "2024-03-10T23:15:00Z"]),
        ("6h", ["2024-03-10T00:00:00Z", "2024-03-10T06:00:00Z", "2024-03-10T18:00:00Z"]),
        ("1d", ["2024-03-10T00:00:00Z"]),
    ],
)
def test_buckets_align_to_midnight_utc(tmp_path: Path, freq: str, expected: list[str]) -> None:
    rows = [["2024-03-10T05:59:59.999Z", 1, 1], ["2024-03-10T06:00:00Z", 2, 2], ["2024-03-10T23:17:30Z", 3, 3]]
    log = write_csv(tmp_path / "f.csv", ["ts", "prompt", "output"], rows)
    result = ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC), labels=LABELS, freq=freq)
    assert result.demand["ts"].tolist() == expected
    assert result.demand["requests"].sum() == 3 and result.freq == freq


# --------------------------------------------------------------------------- mapping and format errors
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("ts=a,,prompt_tokens=b", "stray comma"),
        ("ts", "has no '='"),
        ("ts=a,colour=b", "unknown mapping key 'colour'"),
        ("ts=a,ts=b", "given twice"),
        ("ts=", "no column name"),
    ],
)
def test_parse_mapping_errors(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        parse_mapping(text)
    assert caught.value.where == "--map" and caught.value.fix


def test_parse_mapping_and_format_errors(tmp_path: Path) -> None:
    assert parse_mapping(" ts = t , prompt_tokens=p,output_tokens=o ") == {
        "ts": "t",
        "prompt_tokens": "p",
        "output_tokens": "o",
    }
    log = write_csv(tmp_path / "x.csv", ["ts", "prompt", "output"], [["2024-01-01", 1, 1]])
    with pytest.raises(InputError, match="unknown log format 'sharegpt'"):
        ingest_logs([str(log)], "sharegpt", labels=LABELS)
    with pytest.raises(InputError, match="output_tokens"):
        ingest_logs([str(log)], "generic", mapping={"ts": "ts", "prompt_tokens": "prompt"}, labels=LABELS)
    with pytest.raises(InputError, match="--map"):
        ingest_logs([str(log)], "generic", labels=LABELS)
    with pytest.raises(InputError, match="--start only applies"):
        ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC), start=datetime(2024, 1, 1), labels=LABELS)
    with pytest.raises(InputError, match="extension"):
        ingest_logs(
            [str(write_csv(tmp_path / "x.txt", ["a"], [[1]]))], "generic", mapping=parse_mapping(GENERIC), labels=LABELS
        )


# --------------------------------------------------------------------------- bad inputs
def _good_rows(n: int = 3) -> list[list[object]]:
    return [[f"2024-01-01 00:{i % 60:02d}:00", 10 + i, 5] for i in range(n)]


def _bad_csv(row: list[object], at: int = 2, n: int = 4):
    def build(tmp_path: Path) -> list[str]:
        rows = _good_rows(n)
        rows[at - 1] = row
        return [str(write_csv(tmp_path / "requests.csv", ["ts", "prompt", "output"], rows))]

    return build


def _file(name: str, data: bytes):
    def build(tmp_path: Path) -> list[str]:
        (tmp_path / name).write_bytes(data)
        return [str(tmp_path / name)]

    return build


def _second_file_bad(tmp_path: Path) -> list[str]:
    write_csv(tmp_path / "day1.csv", ["ts", "prompt", "output"], _good_rows())
    rows = _good_rows(6)
    rows[4][2] = -3
    write_csv(tmp_path / "day2.csv", ["ts", "prompt", "output"], rows)
    return [str(tmp_path / "day*.csv")]


def _deep_bad_row(tmp_path: Path) -> list[str]:
    rows = _good_rows(30_000)
    rows[24_999][1] = "1e400"
    return [str(write_csv(tmp_path / "requests.csv", ["ts", "prompt", "output"], rows))]


def _blank_label(tmp_path: Path) -> list[str]:
    rows = [r + ["us-east", "m", "batch"] for r in _good_rows()]
    rows[2][3] = "  "
    return [str(write_csv(tmp_path / "requests.csv", ["ts", "prompt", "output", "region", "model", "class"], rows))]


def _bad_jsonl_value(tmp_path: Path) -> list[str]:
    records = [{"ts": "2024-01-01", "prompt": 1, "output": 1}, {"ts": "2024-01-01", "prompt": 2.5, "output": 1}]
    return [str(write_jsonl(tmp_path / "requests.jsonl", records))]


BAD_CASES = {
    "missing column": (
        lambda p: [str(write_csv(p / "requests.csv", ["ts", "prompt", "out"], _good_rows()))],
        GENERIC,
        ["requests.csv", "'output'", "'out'", "has columns"],
    ),
    "unparsable timestamp": (
        _bad_csv(["16/11/2023 18:00", 1, 1]),
        GENERIC,
        ["requests.csv", "data row 2", "'ts'", "16/11/2023 18:00"],
    ),
    "empty timestamp": (_bad_csv(["", 1, 1], at=3), GENERIC, ["requests.csv", "data row 3", "'ts'", "empty"]),
    "negative tokens": (
        _bad_csv(["2024-01-01", 1, -4], at=4),
        GENERIC,
        ["requests.csv", "data row 4", "'output'", "'-4'", "negative"],
    ),
    "fractional tokens": (
        _bad_csv(["2024-01-01", "12.5", 1]),
        GENERIC,
        ["data row 2", "'prompt'", "'12.5'", "whole number"],
    ),
    "text tokens": (
        _bad_csv(["2024-01-01", "many", 1], at=1),
        GENERIC,
        ["data row 1", "'prompt'", "'many'", "not a number"],
    ),
    "empty tokens": (_bad_csv(["2024-01-01", 3, ""]), GENERIC, ["data row 2", "'output'", "empty"]),
    "huge tokens": (_deep_bad_row, GENERIC, ["requests.csv", "data row 25000", "'prompt'", "1e400"]),
    "bad row in second file": (_second_file_bad, GENERIC, ["day2.csv", "data row 5", "'output'", "'-3'"]),
    "blank label": (_blank_label, GENERIC_LABELLED, ["requests.csv", "data row 3", "'region'", "--region"]),
    "json record": (_bad_jsonl_value, GENERIC, ["requests.jsonl", "record 2", "'prompt'", "'2.5'"]),
    "epoch out of range": (
        lambda p: [str(write_csv(p / "requests.csv", ["ts", "prompt", "output"], [[1_704_067_200_000, 1, 1]]))],
        GENERIC + ",ts_unit=s",
        ["requests.csv", "data row 1", "outside 2000-2200", "ts_unit"],
    ),
    "empty file": (_file("requests.csv", b""), GENERIC, ["requests.csv", "no data rows"]),
    "header only": (_file("requests.csv", b"ts,prompt,output\n"), GENERIC, ["requests.csv", "no data rows"]),
    "empty gzip": (_file("requests.csv.gz", gzip.compress(b"")), GENERIC, ["requests.csv.gz", "no data rows"]),
    "garbage parquet": (
        _file("requests.parquet", b"PAR1 not really"),
        GENERIC,
        ["requests.parquet", "cannot read the file as Parquet"],
    ),
    "garbage gzip": (_file("requests.csv.gz", b"\x00\x01 not gzip"), GENERIC, ["requests.csv.gz", "cannot read"]),
    "ragged csv": (
        _file("requests.csv", ("ts,prompt,output\n" + "2024-01-01,1,1\n" * 30_000 + "2024-01-01,1,1,9\n").encode()),
        GENERIC,
        ["requests.csv", "30002", "cannot parse"],
    ),
    "ragged row near the top": (
        _file("requests.csv", ("ts,prompt,output\n" + "2024-01-01,1,1\n" * 20 + "2024-01-01,1,1,9,9\n"
                               + "2024-01-01,1,1\n" * 20).encode()),
        GENERIC,
        ["requests.csv, line 22", "5 field(s) where the header has 3", "'2024-01-01,1,1,9,9'"],
    ),
    "short row": (
        _file("requests.csv", ("ts,prompt,output\n" + "2024-01-01,1,1\n" * 5 + "2024-01-01\n").encode()),
        GENERIC,
        ["requests.csv, line 7", "1 field(s) where the header has 3"],
    ),
    "token count beyond any context": (
        _bad_csv(["2024-01-01", 20_000_000, 1]),
        GENERIC,
        ["requests.csv", "data row 2", "'prompt'", "above 10,000,000 tokens"],
    ),
    "relative offsets without a start": (
        lambda p: [str(write_csv(p / "requests.csv", ["ts", "prompt", "output"], [[0, 1, 1], [1500, 1, 1]]))],
        GENERIC + ",ts_unit=ms",
        ["requests.csv", "data row 1", "1970-01-01", "offset from the trace start", "--start"],
    ),
    "true/false token counts": (
        lambda p: (pd.DataFrame({"ts": ["2024-01-01 00:00:01"], "prompt": [True], "output": [3]}).to_parquet(
            p / "requests.parquet"), [str(p / "requests.parquet")])[1],
        GENERIC,
        ["requests.parquet", "'prompt'", "true/false"],
    ),
    "broken json": (
        _file("requests.jsonl", b'{"ts": "2024-01-01", "prompt": 1, "output": 1}\n{"ts": \n'),
        GENERIC,
        ["requests.jsonl", "Malformed JSON", "line 3"],
    ),
    "missing file": (lambda p: [str(p / "nope.csv")], GENERIC, ["nope.csv", "not found"]),
    "folder": (lambda p: [str(p)], GENERIC, ["is a folder", "*.csv"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_names_file_row_and_column_and_writes_nothing(tmp_path: Path, case: str) -> None:
    build, mapping, expected = BAD_CASES[case]
    inputs = tmp_path / "in"
    inputs.mkdir()
    paths = build(inputs)
    fresh = tmp_path / "fresh" / "demand.csv"
    with pytest.raises(InputError) as caught:
        run_ingest(paths, fresh, mapping=parse_mapping(mapping), labels={} if "region=" in mapping else LABELS)
    text = str(caught.value)
    for piece in expected:
        assert piece in text, f"{piece!r} not in {text!r}"
    assert caught.value.fix and caught.value.exit_code == 3
    assert not fresh.parent.exists()

    # A good earlier output survives a failed run byte for byte.
    good_log = write_csv(tmp_path / "good.csv", ["ts", "prompt", "output"], _good_rows())
    kept = tmp_path / "kept" / "demand.csv"
    run_ingest([str(good_log)], kept, mapping=parse_mapping(GENERIC), labels=LABELS)
    before = {p.name: p.read_bytes() for p in kept.parent.iterdir()}
    with pytest.raises(InputError):
        run_ingest(paths, kept, mapping=parse_mapping(mapping), labels={} if "region=" in mapping else LABELS)
    assert {p.name: p.read_bytes() for p in kept.parent.iterdir()} == before


def test_bad_row_message_counts_the_other_bad_rows(tmp_path: Path) -> None:
    rows = _good_rows(10)
    for i in (3, 6, 7):
        rows[i][1] = "x"
    log = write_csv(tmp_path / "r.csv", ["ts", "prompt", "output"], rows)
    with pytest.raises(InputError, match="3 rows in this file have bad values") as caught:
        ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC), labels=LABELS)
    assert "data row 4" in str(caught.value)


# --------------------------------------------------------------------------- writer
def test_writer_csv_parquet_histogram_and_determinism(tmp_path: Path) -> None:
    log = write_csv(tmp_path / "w.csv", ["ts", "prompt", "output"], _good_rows(50))
    kwargs = {"mapping": parse_mapping(GENERIC), "labels": LABELS}
    written = run_ingest([str(log)], tmp_path / "out" / "demand.csv", **kwargs)
    assert [p.name for p in written] == ["demand.csv", "demand.histogram.csv"]
    first = [p.read_bytes() for p in written]
    assert [p.read_bytes() for p in run_ingest([str(log)], tmp_path / "out" / "demand.csv", **kwargs)] == first
    assert first[0].decode().splitlines()[0] == ",".join(DEMAND_COLUMNS)
    assert pd.read_csv(written[1]).columns.tolist() == list(HISTOGRAM_COLUMNS)

    result = ingest_logs([str(log)], "generic", **kwargs)
    paths = write_ingest_outputs(result, tmp_path / "pq" / "demand.parquet", tmp_path / "pq" / "hist.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(paths[0]), result.demand)
    pd.testing.assert_frame_equal(pd.read_parquet(paths[1]), result.histogram)
    for bad_out, bad_hist in (("demand.txt", None), ("demand.csv", "h.json"), ("d.csv", "d.csv")):
        with pytest.raises(InputError):
            output_paths(tmp_path / bad_out, None if bad_hist is None else tmp_path / bad_hist)
    assert not (tmp_path / "demand.txt").exists()


def test_histogram_bins_are_contiguous_powers_of_two(tmp_path: Path) -> None:
    values = [0, 1, 2, 3, 4, 7, 8, 1023, 1024, 1025]
    rows = [[f"2024-01-01 00:00:{i:02d}", v, 1] for i, v in enumerate(values)]
    log = write_csv(tmp_path / "h.csv", ["ts", "prompt", "output"], rows)
    result = ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC), labels=LABELS)
    prompt = result.histogram[result.histogram["measure"] == "prompt_tokens"]
    assert prompt["bin_lo_tokens"].tolist() == [0] + [2**k for k in range(11)]
    assert prompt["bin_hi_tokens"].tolist() == [1] + [2 ** (k + 1) for k in range(11)]
    expected = Counter(0 if v == 0 else 2 ** (v.bit_length() - 1) for v in values)
    assert dict(zip(prompt["bin_lo_tokens"], prompt["count"], strict=True)) == {
        lo: expected.get(lo, 0) for lo in prompt["bin_lo_tokens"]
    }
    output = result.histogram[result.histogram["measure"] == "output_tokens"]
    assert output["count"].tolist() == [0, len(values)]
    assert result.summary_rows() == [
        {
            "region": "eu-west",
            "model": "llama-3.1-8b",
            "traffic_class": "interactive",
            "buckets": 1,
            "requests": len(values),
            "first_ts": "2024-01-01T00:00:00Z",
            "last_ts": "2024-01-01T00:00:00Z",
        }
    ]


def test_histogram_bins_are_exact_near_powers_of_two() -> None:
    top = MAX_TOKENS_PER_REQUEST.bit_length()
    values = [0, 1, 2, 3] + [v for k in range(2, top) for v in (2**k - 1, 2**k, 2**k + 1)] + [MAX_TOKENS_PER_REQUEST]
    values = [v for v in values if v <= MAX_TOKENS_PER_REQUEST]
    con = duckdb.connect()
    for v in values:
        (bins,) = con.execute(
            f"SELECT {bin_counts_sql('prompt_tokens')} FROM (SELECT CAST(? AS BIGINT) AS prompt_tokens)", [v]
        ).fetchone()
        k = v.bit_length() - 1
        assert {upper: n for upper, n in bins.items() if n} == {bin_upper(k): 1}, v
        assert k in BINS


def test_quantiles_equal_duckdb_quantile_cont_on_wide_values(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    n = 4000
    # seven decades of values, up to the ceiling of 10M tokens per request
    wide = np.minimum(rng.lognormal(9, 3, n - n // 4).astype(np.int64) % 2**45, MAX_TOKENS_PER_REQUEST)
    prompt = np.concatenate([rng.integers(0, 70, n // 4), wide])
    rng.shuffle(prompt)
    seconds = rng.integers(0, 6 * 3600, n)
    ts = [(datetime(2024, 6, 1, tzinfo=UTC) + timedelta(seconds=int(s))).isoformat() for s in seconds]
    frame = pd.DataFrame({"ts": ts, "prompt": prompt, "output": rng.integers(0, 3, n)})
    frame.to_parquet(tmp_path / "wide.parquet")
    demand = ingest_logs(
        [str(tmp_path / "wide.parquet")], "generic", mapping=parse_mapping(GENERIC), labels=LABELS
    ).demand
    oracle = (
        duckdb.connect()
        .execute(
            "SELECT strftime(time_bucket(INTERVAL 1 HOUR, CAST(ts AS TIMESTAMPTZ) AT TIME ZONE 'UTC'), "
            "'%Y-%m-%dT%H:%M:%SZ') AS b, "
            "quantile_cont(prompt, 0.5), quantile_cont(prompt, 0.99), quantile_cont(output, 0.99) "
            f"FROM read_parquet('{tmp_path / 'wide.parquet'}') GROUP BY b ORDER BY b"
        )
        .fetchall()
    )
    assert demand["ts"].tolist() == [r[0] for r in oracle]
    assert demand["prompt_tokens_p50"].tolist() == [r[1] for r in oracle]
    assert demand["prompt_tokens_p99"].tolist() == [r[2] for r in oracle]
    assert demand["output_tokens_p99"].tolist() == [r[3] for r in oracle]


# --------------------------------------------------------------------------- property
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(
        st.tuples(
            st.integers(0, 3 * 86_400 * 1_000_000 - 1),  # microseconds into a 3-day window
            st.integers(0, 200_000),
            st.integers(0, 5_000),
            st.sampled_from(["us-east", "eu-west"]),
        ),
        min_size=1,
        max_size=300,
    ),
    freq=st.sampled_from(FREQ_EXAMPLES),
)
def test_property_counts_sums_quantiles_match_pure_python(tmp_path: Path, data, freq: str) -> None:
    origin = datetime(2024, 4, 1, tzinfo=UTC)
    width_us = parse_freq(freq) * 1_000_000
    rows = [
        [(origin + timedelta(microseconds=us)).strftime("%Y-%m-%d %H:%M:%S.%f"), p, o, region]
        for us, p, o, region in data
    ]
    log = write_csv(tmp_path / "prop.csv", ["ts", "prompt", "output", "region"], rows)
    result = ingest_logs(
        [str(log)],
        "generic",
        mapping=parse_mapping(GENERIC + ",region=region"),
        labels={"model": "m", "traffic_class": "c"},
        freq=freq,
    )
    origin_us = int(origin.timestamp()) * 1_000_000
    groups: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for us, p, o, region in data:
        start_us = (origin_us + us) // width_us * width_us
        stamp = datetime.fromtimestamp(start_us // 1_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        groups[(region, stamp)].append((p, o))
    got = result.demand
    assert sorted(zip(got["region"], got["ts"], strict=True)) == sorted(groups)
    assert got["requests"].sum() == len(data) == result.rows_read
    for row in got.itertuples():
        values = groups[(row.region, row.ts)]
        prompts, outputs = [p for p, _ in values], [o for _, o in values]
        assert row.requests == len(values)
        assert row.prompt_tokens_sum == sum(prompts) and row.output_tokens_sum == sum(outputs)
        for measure, sample in (("prompt_tokens", prompts), ("output_tokens", outputs)):
            for name, q in (("p50", 50), ("p99", 99)):
                expected = float(np.percentile(sample, q))
                assert math.isclose(getattr(row, f"{measure}_{name}"), expected, rel_tol=1e-12, abs_tol=1e-9)
    assert result.histogram.groupby("measure")["count"].sum().tolist() == [len(data), len(data)]


# --------------------------------------------------------------------------- real traces
def _independent_azure(path: Path, minutes: bool = False) -> tuple[int, int, int, Counter]:
    per_bucket: Counter = Counter()
    prompt = output = n = 0
    with open(path, newline="", encoding="utf-8") as handle:
        for record in csv.DictReader(handle):
            n += 1
            prompt += int(record["ContextTokens"])
            output += int(record["GeneratedTokens"])
            stamp = record["TIMESTAMP"]  # "2023-11-16 18:17:03.9799600"
            per_bucket[f"{stamp[:10]}T{stamp[11:16] if minutes else stamp[11:13] + ':00'}:00Z"] += 1
    return n, prompt, output, per_bucket


@pytest.mark.parametrize("trace", ["conv", "code"])
def test_real_azure_trace_end_to_end(tmp_path: Path, trace: str) -> None:
    path = samples_dir() / "azure_llm_2023" / f"AzureLLMInferenceTrace_{trace}.csv"
    assert path.exists(), f"the bundled Azure trace is missing at {path}"
    n, prompt, output, per_hour = _independent_azure(path)
    written = run_ingest([str(path)], tmp_path / "azure.csv", "azure", labels=LABELS)
    demand = pd.read_csv(written[0])
    assert demand["requests"].sum() == n and n == {"conv": 19_366, "code": 8_819}[trace]
    assert demand["prompt_tokens_sum"].sum() == prompt and demand["output_tokens_sum"].sum() == output
    assert dict(zip(demand["ts"], demand["requests"], strict=True)) == dict(per_hour)
    by_minute = ingest_logs([str(path)], "azure", labels=LABELS, freq="1min").demand
    assert dict(zip(by_minute["ts"], by_minute["requests"], strict=True)) == dict(_independent_azure(path, True)[3])
    histogram = pd.read_csv(written[1])
    assert (histogram.groupby("measure")["count"].sum() == n).all()


def test_real_mooncake_sample(tmp_path: Path) -> None:
    path = samples_dir() / "mooncake" / "conversation_trace_head200.jsonl"
    assert path.exists(), f"the bundled Mooncake sample is missing at {path}"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = datetime(2024, 5, 1, tzinfo=UTC)
    result = ingest_logs([str(path)], "mooncake", start=start, labels=LABELS, freq="1min")
    assert result.rows_read == len(records) == 200
    assert result.demand["prompt_tokens_sum"].sum() == sum(r["input_length"] for r in records)
    assert result.demand["output_tokens_sum"].sum() == sum(r["output_length"] for r in records)
    minutes = Counter((start + timedelta(milliseconds=r["timestamp"])).strftime("%Y-%m-%dT%H:%M:00Z") for r in records)
    assert dict(zip(result.demand["ts"], result.demand["requests"], strict=True)) == dict(minutes)


def test_every_bad_column_of_every_file_is_named_in_one_error(tmp_path: Path) -> None:
    first = _good_rows(10)
    first[2][1] = "x"  # prompt, data row 3
    first[5][1] = "-4"
    first[7][2] = "1.5"  # output, data row 8
    second = _good_rows(10)
    second[4][0] = "not a time"  # ts, data row 5
    logs = [write_csv(tmp_path / "a.csv", ["ts", "prompt", "output"], first),
            write_csv(tmp_path / "b.csv", ["ts", "prompt", "output"], second)]
    with pytest.raises(InputError, match="3 problems") as caught:
        ingest_logs([str(p) for p in logs], "generic", mapping=parse_mapping(GENERIC), labels=LABELS)
    text = str(caught.value)
    assert f"{logs[0]}, data row 3, column 'prompt'" in text and "2 rows in this file have a bad prompt" in text
    assert f"{logs[0]}, data row 8, column 'output'" in text and "not a whole number" in text
    assert f"{logs[1]}, data row 5, column 'ts'" in text and "'not a time' is not a date-time" in text


# --------------------------------------------------------------------------- one pass
class _SqlLog:
    """A DuckDB connection that records every statement it runs."""

    def __init__(self, con: duckdb.DuckDBPyConnection, log: list[str]) -> None:
        self._con, self._log = con, log

    def execute(self, sql: str, *args):
        self._log.append(sql)
        return self._con.execute(sql, *args)

    def close(self) -> None:
        self._con.close()


def _hourly_sample(tmp_path: Path, seed: int, n: int) -> tuple[Path, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    offsets = rng.integers(0, 30 * 3_600_000_000, n)
    ts = (np.datetime64("2024-06-01T00:00:00", "us") + offsets.astype("timedelta64[us]")).astype(str)
    frame = pd.DataFrame({
        "ts": ts,
        "prompt": np.minimum(rng.lognormal(7, 1.5, n), MAX_TOKENS_PER_REQUEST).astype(np.int64),
        "output": rng.integers(0, 40, n),  # many ties: ranks fall inside runs of equal values
        "region": rng.choice(["us-east", "eu-west", "ap-northeast"], n),
    })
    frame.to_csv(tmp_path / "sample.csv", index=False)
    return tmp_path / "sample.csv", frame


def test_one_pass_quantiles_equal_numpy_order_statistics_on_a_random_sample(tmp_path: Path, monkeypatch) -> None:
    import planner.ingest.pipeline as pipeline

    statements: list[str] = []
    connect = pipeline.connect
    monkeypatch.setattr(pipeline, "connect", lambda workdir: _SqlLog(connect(workdir), statements))
    log, frame = _hourly_sample(tmp_path, seed=15, n=20_000)
    result = ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC + ",region=region"),
                         labels={"model": "m", "traffic_class": "c"})

    scans = [sql for sql in statements if "read_csv" in sql and "GROUP BY" in sql]
    assert len(scans) == 1, "the logs are aggregated in one pass"

    frame["hour"] = pd.to_datetime(frame["ts"]).dt.strftime("%Y-%m-%dT%H:00:00Z")
    got = result.demand.set_index(["region", "ts"])
    assert len(got) == frame.groupby(["region", "hour"]).ngroups > 30 * 3 - 3
    for (region, hour), part in frame.groupby(["region", "hour"]):
        row = got.loc[(region, hour)]
        for measure, column in (("prompt_tokens", "prompt"), ("output_tokens", "output")):
            values = np.sort(part[column].to_numpy())
            # the median is exact in floating point (a value, or the mean of two), so it must match to the bit
            assert row[f"{measure}_p50"] == np.percentile(values, 50), (region, hour, measure)
            # the 99th percentile interpolates between the same two order statistics as numpy's
            h = (len(values) - 1) * 0.99
            lo, hi = values[math.floor(h)], values[math.ceil(h)]
            assert lo <= row[f"{measure}_p99"] <= hi
            assert math.isclose(row[f"{measure}_p99"], np.percentile(values, 99), rel_tol=1e-13), (region, hour)
            # to the bit: lo (1 - d) + hi d with one rounding of the sum (a fused multiply-add), as quantile_cont does
            d = h - math.floor(h)
            fused = float(Fraction(float(lo)) * Fraction(1 - d) + Fraction(float(hi) * d))
            assert row[f"{measure}_p99"] == fused, (region, hour, measure)


def test_text_the_fast_timestamp_path_takes_reads_the_same_as_timestamptz() -> None:
    """Every text naive_text_sql lets through reads the same with TIMESTAMP as with TIMESTAMPTZ (or fails both)."""
    dates = ["2024-01-01", "2024-1-1", " 2024-02-29", "2023-02-29", "-2024-01-01", "2024-01-01 "]
    seps = ["T", " ", "t", "", "  "]
    clocks = ["", "09:10", "09:10:00", "9:10:00", "09:10:00.5", "23:59:59.9999996", "24:00:00", "09:10:00.5.5"]
    zones = ["", "Z", "z", " UTC", "+01:00", "-05:30", "+0100", "-05", " +01:00", " GMT0", "GMT0", " Etc/GMT+5",
             " Etc/GMT-14", " SystemV/EST5", " America/New_York", " EST", " CET", "CET", " BC", " (BC)", " 5", "0",
             "-", "--1", "T", "T5", "UTC", "EST", "EST5EDT", "PST8PDT", "Asia/Tokyo", "BC", "Zulu", "GMT+1", "utc"]
    tails = ["", " ", "0", "1", "T", " T"]
    texts = [f"{d}{s if c else ''}{c}{z}{t}" for d in dates for s in seps for c in clocks for z in zones for t in tails]
    rng = np.random.default_rng(21)
    alphabet = np.array(list("0123456789:.-+ TtZzUCGMESB/()"))
    heads = ["2024-01-01", "2024-1-1", "2024-01-01T09:10", "2024-01-01 09:10:00.5", "", " "]
    texts += [heads[i % len(heads)] + "".join(rng.choice(alphabet, rng.integers(0, 12))) for i in range(20_000)]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    taken, differ = con.execute(
        f"SELECT count(*) FILTER (WHERE {naive_text_sql('t')}), list(t) FILTER (WHERE {naive_text_sql('t')} AND "
        "epoch_us(TRY_CAST(t AS TIMESTAMP)) IS DISTINCT FROM epoch_us(TRY_CAST(t AS TIMESTAMPTZ))) "
        "FROM (SELECT unnest(?::VARCHAR[]) AS t)", [texts]
    ).fetchone()
    assert taken > 1_000  # the fast path is taken often enough for the check to mean something
    assert not differ, differ[:10]


class _OutOfMemoryOnce(_SqlLog):
    """Refuses the first one-part scan as DuckDB does when the quantile states outgrow the memory limit."""

    def execute(self, sql: str, *args):
        if "TEMP TABLE groups" in sql and "hash(bucket_us)" not in sql:
            self._log.append("refused")
            raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")
        return super().execute(sql, *args)


def test_a_log_too_large_for_memory_is_scanned_in_parts_with_the_same_result(tmp_path: Path, monkeypatch) -> None:
    import planner.ingest.pipeline as pipeline

    log, _ = _hourly_sample(tmp_path, seed=4, n=5_000)
    kwargs = {"mapping": parse_mapping(GENERIC + ",region=region"), "labels": {"model": "m", "traffic_class": "c"}}
    whole = ingest_logs([str(log)], "generic", **kwargs)
    statements: list[str] = []
    connect = pipeline.connect
    monkeypatch.setattr(pipeline, "connect", lambda workdir: _OutOfMemoryOnce(connect(workdir), statements))
    parted = ingest_logs([str(log)], "generic", **kwargs)
    assert statements.count("refused") == 1
    assert sum("hash(bucket_us) % 2" in sql for sql in statements) == 2
    pd.testing.assert_frame_equal(parted.demand, whole.demand)
    pd.testing.assert_frame_equal(parted.histogram, whole.histogram)
    assert parted.rows_read == whole.rows_read == 5_000

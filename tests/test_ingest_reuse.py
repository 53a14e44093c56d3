"""Prefix reuse in `planner ingest`: the block and session rules, an independent oracle on the real
Mooncake slice, properties, the reuse JSON beside the history, and bad inputs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import samples_dir
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import InputError
from planner.ingest import ingest_logs, output_paths, parse_mapping, reuse_path, write_ingest_outputs
from planner.ingest.reuse import ReuseRequest, block_hits, cached_tokens, power_of_two_histogram, series_reuse
from planner.ingest.reuse_read import BadHashes, parse_hashes

LABELS = {"region": "ap-northeast", "model": "kimi", "traffic_class": "interactive"}
START = datetime(2024, 6, 1, tzinfo=UTC)
SLICE = samples_dir() / "mooncake" / "conversation_trace_6001_7000.jsonl"
GENERIC = "ts=ts,prompt_tokens=prompt,output_tokens=output"


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "".join(row + "\n" for row in rows), encoding="utf-8")
    return path


def common_run(a: list[int], b: list[int]) -> int:
    run = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        run += 1
    return run


def brute_force_cached(records: list[dict], block_tokens: int) -> list[int]:
    """For each request (arrival order, ties in file order), the longest common leading run of hash_ids
    with any earlier request, in tokens, capped at its prompt: every pair compared."""
    ordered = sorted(range(len(records)), key=lambda i: records[i]["timestamp"])
    cached = []
    for position, i in enumerate(ordered):
        best = max((common_run(records[i]["hash_ids"], records[j]["hash_ids"]) for j in ordered[:position]),
                   default=0)
        cached.append(min(best * block_tokens, records[i]["input_length"]))
    return cached


# --------------------------------------------------------------------------- the oracle on real data
def test_ideal_share_on_the_mooncake_slice_equals_a_brute_force_oracle() -> None:
    records = [json.loads(line) for line in SLICE.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(records) == 1000
    oracle = brute_force_cached(records, 512)
    prompt = sum(r["input_length"] for r in records)

    result = ingest_logs([str(SLICE)], "mooncake", start=START, labels=LABELS)
    (series,) = result.reuse["series"]
    assert (series["model"], series["traffic_class"], series["source"]) == ("kimi", "interactive",
                                                                             "mooncake hash_ids")
    assert series["block_tokens"] == 512 and series["requests"] == 1000
    assert series["prompt_tokens"] == prompt
    assert series["ideal_cached_tokens"] == sum(oracle)  # exact, in tokens
    assert series["ideal_share"] == sum(oracle) / prompt
    assert series["requests_with_hit"] == sum(1 for c in oracle if c > 0)
    assert series["cached_prefix_tokens"]["mean"] == pytest.approx(sum(oracle) / 1000, rel=1e-12)
    assert sum(b["count"] for b in series["cached_prefix_tokens"]["histogram"]) == 1000
    assert series["sessions"] is None
    assert sum(oracle) == 1_941_182 and prompt == 11_380_372  # the figures the docs quote


# --------------------------------------------------------------------------- the rules on small cases
def test_block_rule_counts_only_a_leading_run_and_caps_at_the_prompt() -> None:
    requests = [
        ReuseRequest(0, 1000, 10, (1, 2)),
        ReuseRequest(1, 1500, 10, (1, 2, 3)),   # run 2 -> 1024
        ReuseRequest(2, 700, 10, (1, 2)),       # run 2 -> 1024, capped at its 700-token prompt
        ReuseRequest(3, 900, 10, (9, 2, 3)),    # block 2 and 3 match, but not the first: no hit
        ReuseRequest(4, 2000, 10, (1, 2, 3, 4)),  # run 3 (request 1's chain)
    ]
    assert block_hits(requests, 512) == [0, 1024, 700, 0, 1536]


def test_sessions_by_hand(tmp_path: Path) -> None:
    """Two conversations interleaved, and one request outside any session."""
    log = write_csv(tmp_path / "chat.csv", "ts,prompt,output,conv", [
        "2026-01-01T00:00:00Z,100,50,a",
        "2026-01-01T00:00:10Z,300,20,b",
        "2026-01-01T00:00:30Z,180,40,a",   # min(100 + 50, 180) = 150
        "2026-01-01T00:01:00Z,200,10,",    # no session: 0
        "2026-01-01T00:01:30Z,200,30,a",   # min(180 + 40, 200) = 200
        "2026-01-01T00:02:10Z,400,5,b",    # min(300 + 20, 400) = 320
    ])
    result = ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC + ",session_id=conv"), labels=LABELS)
    (series,) = result.reuse["series"]
    assert series["source"] == "generic session_id" and series["block_tokens"] is None
    assert series["prompt_tokens"] == 1380 and series["ideal_cached_tokens"] == 150 + 200 + 320
    assert series["ideal_share"] == 670 / 1380 and series["requests_with_hit"] == 3
    prefix = series["cached_prefix_tokens"]
    assert prefix["mean"] == 670 / 6 and prefix["p50"] == 75.0  # [0, 0, 0, 150, 200, 320]
    sessions = series["sessions"]
    assert sessions["sessions"] == 2
    assert sessions["turns_per_session"] == {"mean": 2.5, "p50": 2.5, "p99": pytest.approx(2.99)}
    # gaps: a 30 s and 60 s, b 120 s
    assert sessions["think_time_s"] == {"mean": 70.0, "p50": 60.0, "gaps": 3}


def test_hashes_and_sessions_take_the_larger_and_text_hashes_equal_json_lists(tmp_path: Path) -> None:
    log = write_csv(tmp_path / "log.csv", "ts,prompt,output,h,s", [
        '2026-01-01T00:00:00Z,40,8,"[7, 8]",x',
        "2026-01-01T00:00:01Z,40,8,7 8 9,y",       # blocks 7 8 cached: min(2 * 16, 40) = 32
        '2026-01-01T00:00:02Z,60,8,"7,5",x',        # block 7 -> 16; session x: min(40 + 8, 60) = 48
    ])
    mapping = parse_mapping(GENERIC + ",prefix_hashes=h,session_id=s")
    result = ingest_logs([str(log)], "generic", mapping=mapping, labels=LABELS, block_tokens=16)
    (series,) = result.reuse["series"]
    assert series["source"] == "generic prefix_hashes + generic session_id" and series["block_tokens"] == 16
    assert series["ideal_cached_tokens"] == 32 + 48


def test_series_are_separate_caches_and_ties_keep_file_order(tmp_path: Path) -> None:
    log = write_csv(tmp_path / "log.csv", "ts,prompt,output,h,model", [
        "2026-01-01T00:00:05Z,1024,1,1 2,m1",
        "2026-01-01T00:00:05Z,1024,1,1 2,m1",   # same instant, later in the file: hits the first
        "2026-01-01T00:00:01Z,1024,1,1 2,m2",   # another model: its own cache
    ])
    mapping = parse_mapping(GENERIC + ",prefix_hashes=h,model=model")
    labels = {"region": "r", "traffic_class": "k"}
    reuse = ingest_logs([str(log)], "generic", mapping=mapping, labels=labels, block_tokens=512).reuse
    assert [(s["model"], s["ideal_cached_tokens"]) for s in reuse["series"]] == [("m1", 1024), ("m2", 0)]


def test_power_of_two_histogram() -> None:
    assert power_of_two_histogram([0, 1, 3, 4, 1024]) == [
        {"bin_lo_tokens": 0, "bin_hi_tokens": 1, "count": 1},
        {"bin_lo_tokens": 1, "bin_hi_tokens": 2, "count": 1},
        {"bin_lo_tokens": 2, "bin_hi_tokens": 4, "count": 1},
        {"bin_lo_tokens": 4, "bin_hi_tokens": 8, "count": 1},
        *({"bin_lo_tokens": 2**k, "bin_hi_tokens": 2 ** (k + 1), "count": 0} for k in range(3, 10)),
        {"bin_lo_tokens": 1024, "bin_hi_tokens": 2048, "count": 1},
    ]


def test_parse_hashes() -> None:
    assert parse_hashes("[1, 2, 3]", integers_only=True) == (1, 2, 3)
    assert parse_hashes("[]", integers_only=True) == ()
    assert parse_hashes("[1, 2]", integers_only=False) == parse_hashes(" 1, 2 ", integers_only=False) == ("1", "2")
    assert parse_hashes('["ab", "cd"]', integers_only=False) == ("ab", "cd")
    for raw in ("1 2 3", "[1.5]", '["a"]', "[true]", "[[1]]", "{}", "", None, "[1,"):
        with pytest.raises(BadHashes):
            parse_hashes(raw, integers_only=True)


# --------------------------------------------------------------------------- properties
blocks = st.lists(st.integers(0, 3), max_size=5).map(tuple)
requests_strategy = st.lists(
    st.builds(ReuseRequest, st.integers(0, 50), st.integers(0, 3000), st.integers(0, 100), blocks,
              st.one_of(st.none(), st.sampled_from(["a", "b"]))),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(requests_strategy, requests_strategy, st.sampled_from([1, 16, 512]), st.booleans())
def test_property_hits_never_exceed_the_prompt_and_more_history_never_lowers_a_hit(
        history, later, block_tokens, sessions) -> None:
    later = [ReuseRequest(r.arrival_us + 1000, r.prompt_tokens, r.output_tokens, r.blocks, r.session)
             for r in later]
    alone = cached_tokens(later, block_tokens, sessions)
    assert all(0 <= hit <= r.prompt_tokens for hit, r in zip(alone, later, strict=True))
    with_history = cached_tokens([*history, *later], block_tokens, sessions)[len(history):]
    assert all(b >= a for a, b in zip(alone, with_history, strict=True))
    if sessions:  # the larger of the two rules: at least the block rule's hit
        blocks_only = cached_tokens(later, block_tokens, sessions=False)
        assert all(a <= hit for a, hit in zip(blocks_only, alone, strict=True))
    figures = series_reuse([*history, *later], block_tokens, sessions)
    assert figures["ideal_cached_tokens"] <= figures["prompt_tokens"]


# --------------------------------------------------------------------------- outputs
def test_reuse_json_is_written_beside_the_history_and_only_when_measured(tmp_path: Path) -> None:
    out, histogram = output_paths(tmp_path / "demand.csv")
    result = ingest_logs([str(SLICE)], "mooncake", start=START, labels=LABELS)
    written = write_ingest_outputs(result, out, histogram)
    assert [p.name for p in written] == ["demand.csv", "demand.histogram.csv", "demand.reuse.json"]
    assert json.loads((tmp_path / "demand.reuse.json").read_text())["series"][0]["ideal_cached_tokens"] == 1_941_182
    moved = write_ingest_outputs(result, tmp_path / "b.csv", None, tmp_path / "elsewhere" / "r.json")
    assert moved[-1] == tmp_path / "elsewhere" / "r.json" and moved[-1].exists()

    log = write_csv(tmp_path / "plain.csv", "ts,prompt,output", ["2026-01-01T00:00:00Z,10,1"])
    plain = ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC), labels=LABELS)
    assert plain.reuse is None
    assert [p.name for p in write_ingest_outputs(plain, tmp_path / "c.csv")] == ["c.csv", "c.histogram.csv"]
    assert not (tmp_path / "c.reuse.json").exists()


def test_reuse_path_checks() -> None:
    assert reuse_path(Path("d/h.parquet"), Path("d/h.histogram.csv")) == Path("d/h.reuse.json")
    with pytest.raises(InputError, match="--reuse-out|.json"):
        reuse_path(Path("h.csv"), Path("h.histogram.csv"), Path("r.csv"))


# --------------------------------------------------------------------------- bad inputs
MOONCAKE_OK = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}


@pytest.mark.parametrize(("bad", "said"), [
    ("0 1 2", "is not a list of integers"),
    ([0, 1.5], "holds 1.5"),
    ([0, "x"], "holds 'x'"),
    (None, "is empty"),
])
def test_mooncake_hash_ids_must_be_a_list_of_integers(tmp_path: Path, bad, said: str) -> None:
    log = write_jsonl(tmp_path / "trace.jsonl", [MOONCAKE_OK, MOONCAKE_OK, {**MOONCAKE_OK, "hash_ids": bad}])
    with pytest.raises(InputError) as caught:
        ingest_logs([str(log)], "mooncake", start=START, labels=LABELS)
    assert caught.value.where == f"{log}, record 3, column 'hash_ids'"
    assert said in caught.value.message


@pytest.mark.parametrize("block_tokens", [0, -512])
def test_block_tokens_must_be_positive(tmp_path: Path, block_tokens: int) -> None:
    log = write_jsonl(tmp_path / "trace.jsonl", [MOONCAKE_OK])
    with pytest.raises(InputError, match="--block-tokens must be a positive") as caught:
        ingest_logs([str(log)], "mooncake", start=START, labels=LABELS, block_tokens=block_tokens)
    assert caught.value.where == "--block-tokens"


def test_generic_hashes_need_a_block_size_and_a_block_size_needs_hashes(tmp_path: Path) -> None:
    log = write_csv(tmp_path / "log.csv", "ts,prompt,output,h", ["2026-01-01T00:00:00Z,10,1,1 2"])
    with pytest.raises(InputError, match="block size"):
        ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC + ",prefix_hashes=h"), labels=LABELS)
    with pytest.raises(InputError, match="only applies"):
        ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC), labels=LABELS, block_tokens=16)


def test_session_id_mapped_to_a_missing_column(tmp_path: Path) -> None:
    log = write_csv(tmp_path / "log.csv", "ts,prompt,output", ["2026-01-01T00:00:00Z,10,1"])
    with pytest.raises(InputError, match="'conversation' \\(for session_id\\) is missing") as caught:
        ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC + ",session_id=conversation"),
                    labels=LABELS)
    assert caught.value.where == f"{log}, column 'conversation'"


def test_generic_hash_cell_with_a_float_names_the_data_row(tmp_path: Path) -> None:
    log = write_csv(tmp_path / "log.csv", "ts,prompt,output,h", [
        "2026-01-01T00:00:00Z,10,1,1 2", '2026-01-01T00:00:01Z,10,1,"[1, 2.5]"'])
    with pytest.raises(InputError, match="holds 2.5") as caught:
        ingest_logs([str(log)], "generic", mapping=parse_mapping(GENERIC + ",prefix_hashes=h"), labels=LABELS,
                    block_tokens=16)
    assert caught.value.where == f"{log}, data row 2, column 'h'"


def test_parquet_list_hashes(tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame({"ts": ["2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z"], "prompt": [40, 40],
                          "output": [1, 1], "h": [[1, 2], [1, 2, 3]]})
    frame.to_parquet(tmp_path / "log.parquet")
    reuse = ingest_logs([str(tmp_path / "log.parquet")], "generic", mapping=parse_mapping(GENERIC + ",prefix_hashes=h"),
                        labels=LABELS, block_tokens=16).reuse
    assert reuse["series"][0]["ideal_cached_tokens"] == 32

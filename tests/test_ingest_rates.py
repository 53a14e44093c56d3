"""`planner ingest --format rates`: tables of request counts or rates per interval to demand history."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner import cli
from planner.contracts import HISTORY_COLUMNS
from planner.errors import ExitCode, InputError
from planner.forecast.history_input import validated_history
from planner.ingest import ingest_logs, ingest_rates
from planner.ingest.rates import Interval, lengths_from_histogram, spread
from planner.sim.workload import EmpiricalLength

runner = CliRunner()
LENGTHS = {("kimi", "interactive"): (1535.5, 95.5), ("llama", "batch"): (100.0, 10.0)}
SOURCE = "declared in the test"
HEADER = "start,end,region,model,traffic_class,requests"


def table(path: Path, rows: list[str], header: str = HEADER) -> str:
    path.write_text(header + "\n" + "".join(row + "\n" for row in rows), encoding="utf-8")
    return str(path)


def histogram(path: Path) -> Path:
    """kimi/interactive: every prompt in [1024, 2048), every output in [64, 128): means 1535.5 and 95.5."""
    pd.DataFrame([
        ("kimi", "interactive", "output_tokens", 0, 1, 0), ("kimi", "interactive", "output_tokens", 64, 128, 7),
        ("kimi", "interactive", "prompt_tokens", 1024, 2048, 7),
    ], columns=["model", "traffic_class", "measure", "bin_lo_tokens", "bin_hi_tokens", "count"]).to_csv(
        path, index=False)
    return path


def test_a_small_table_exactly(tmp_path: Path) -> None:
    path = table(tmp_path / "rates.csv", [
        "2024-06-01T00:00:00Z,2024-06-01T00:30:00Z,ap,kimi,interactive,10",
        "2024-06-01T00:30:00Z,2024-06-01T01:30:00Z,ap,kimi,interactive,30",   # spans two hours: 15 + 15
        "2024-06-01T01:30:00Z,2024-06-01T03:30:00Z,ap,kimi,interactive,40",   # 10 + 20 + 10
        "2024-06-01T00:00:00Z,2024-06-01T00:15:00Z,eu,llama,batch,3",         # shorter than a bucket: summed
        "2024-06-01T00:15:00Z,2024-06-01T00:30:00Z,eu,llama,batch,4",
        "2024-06-01T05:00:00Z,2024-06-01T06:00:00Z,eu,llama,batch,0",         # an observed zero is kept
    ])
    result = ingest_rates([path], lengths=LENGTHS, length_source=SOURCE)
    demand = result.demand
    assert list(demand.columns) == list(HISTORY_COLUMNS)
    assert demand[["ts", "region", "requests"]].values.tolist() == [
        ["2024-06-01T00:00:00Z", "ap", 25.0], ["2024-06-01T01:00:00Z", "ap", 25.0],
        ["2024-06-01T02:00:00Z", "ap", 20.0], ["2024-06-01T03:00:00Z", "ap", 10.0],
        ["2024-06-01T00:00:00Z", "eu", 7.0], ["2024-06-01T05:00:00Z", "eu", 0.0],
    ]
    assert demand["requests"].sum() == 10 + 30 + 40 + 3 + 4  # conserved
    assert (demand["prompt_tokens_sum"] == demand["requests"] * demand["model"].map(
        {"kimi": 1535.5, "llama": 100.0})).all()
    assert (demand["output_tokens_sum"] == demand["requests"] * demand["model"].map(
        {"kimi": 95.5, "llama": 10.0})).all()
    quantiles = ["prompt_tokens_p50", "prompt_tokens_p99", "output_tokens_p50", "output_tokens_p99"]
    assert demand[quantiles].isna().all().all()
    assert result.rows_read == 6 and result.measure == "requests" and result.length_source == SOURCE
    assert [r["length_source"] for r in result.lengths] == [SOURCE, SOURCE]
    validated_history(demand, "requests")  # the forecaster reads it
    validated_history(demand, "prompt_tokens_sum")


def test_rates_without_end_last_one_bucket_and_freq_is_honoured(tmp_path: Path) -> None:
    path = table(tmp_path / "rps.csv", ["2024-06-01T00:00:00Z,kimi,0.5", "2024-06-01T01:00:00Z,kimi,1.25"],
                 header="start,model,rps")
    labels = {"region": "ap", "traffic_class": "interactive"}
    hourly = ingest_rates([path], lengths=LENGTHS, length_source=SOURCE, labels=labels)
    assert hourly.demand["requests"].tolist() == [1800.0, 4500.0] and hourly.measure == "rps"
    # without an end column each row lasts one --freq bucket, whatever the table meant
    halves = ingest_rates([path], lengths=LENGTHS, length_source=SOURCE, labels=labels, freq="30min")
    assert halves.demand["requests"].tolist() == [900.0, 2250.0]
    with pytest.raises(InputError, match="overlap"):  # two one-day intervals an hour apart
        ingest_rates([path], lengths=LENGTHS, length_source=SOURCE, labels=labels, freq="1d")
    ended = table(tmp_path / "ended.csv", ["2024-06-01T00:00:00Z,2024-06-01T01:00:00Z,kimi,0.5",
                                           "2024-06-01T01:00:00Z,2024-06-01T02:00:00Z,kimi,1.25"],
                  header="start,end,model,rps")
    halves = ingest_rates([ended], lengths=LENGTHS, length_source=SOURCE, labels=labels, freq="30min")
    assert halves.demand["requests"].tolist() == [900.0, 900.0, 2250.0, 2250.0]
    daily = ingest_rates([ended], lengths=LENGTHS, length_source=SOURCE, labels=labels, freq="1d")
    assert daily.demand["requests"].tolist() == [6300.0]


def test_mapped_columns_and_parquet(tmp_path: Path) -> None:
    frame = pd.DataFrame({"from": pd.to_datetime(["2024-06-01 00:20", "2024-06-01 03:10"]),
                          "to": pd.to_datetime(["2024-06-01 03:10", "2024-06-01 04:00"]),
                          "dc": ["ap", "ap"], "n": [100, 6]})
    frame.to_parquet(tmp_path / "t.parquet")
    result = ingest_rates([str(tmp_path / "t.parquet")], lengths=LENGTHS, length_source=SOURCE,
                          mapping={"start": "from", "end": "to", "region": "dc", "requests": "n"},
                          labels={"model": "kimi", "traffic_class": "interactive"})
    got = result.demand["requests"].tolist()
    # 00:20-03:10 (170 min, 100 requests) by overlap: 40, 60, 60 and 10 minutes; 03:10-04:00 (6) all in 03:00
    assert got == [100 * 40 / 170, 100 * 60 / 170, 100 * 60 / 170, 100 * 10 / 170 + 6]
    assert math.isclose(sum(got), 106.0, rel_tol=1e-15)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 600), st.integers(0, 10_000)), min_size=1, max_size=20),
       st.sampled_from([60, 900, 3600, 86_400]), st.integers(0, 3599))
def test_property_counts_are_conserved(lengths_min, bucket_seconds, offset_s) -> None:
    start = 1_717_200_000_000_000 + offset_s * 1_000_000
    intervals = []
    for minutes, count in lengths_min:
        intervals.append(Interval("r", "m", "k", start, start + minutes * 60_000_000, float(count)))
        start += minutes * 60_000_000
    totals = spread(intervals, bucket_seconds)
    assert math.isclose(sum(totals.values()), sum(c for _, c in lengths_min), rel_tol=1e-12, abs_tol=1e-9)
    assert all(v >= 0 for v in totals.values())


def test_lengths_from_histogram_are_the_simulators_means(repo_root: Path, tmp_path: Path) -> None:
    assert lengths_from_histogram(pd.read_csv(histogram(tmp_path / "h.csv"))) == {("kimi", "interactive"):
                                                                                  (1535.5, 95.5)}
    real = ingest_logs([str(repo_root / "data/samples/mooncake/conversation_trace_head200.jsonl")], "mooncake",
                       start=datetime(2024, 6, 1, tzinfo=UTC),
                       labels={"region": "ap", "model": "kimi", "traffic_class": "interactive"}).histogram
    (means,) = lengths_from_histogram(real).values()
    for measure, mean in zip(("prompt_tokens", "output_tokens"), means, strict=True):
        rows = real[real["measure"] == measure]
        law = EmpiricalLength(rows["bin_lo_tokens"].to_numpy(), rows["bin_hi_tokens"].to_numpy(),
                              rows["count"].to_numpy(dtype=float))
        assert mean == law.mean()


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("rows", "where", "said"), [
    (["2024-06-01T00:00:00Z,2024-06-01T02:00:00Z,ap,kimi,interactive,10",
      "2024-06-01T03:00:00Z,2024-06-01T04:00:00Z,ap,kimi,interactive,1",
      "2024-06-01T01:00:00Z,2024-06-01T02:30:00Z,ap,kimi,interactive,5"],
     "rates.csv, data row 1, column 'start' and ", "overlap"),
    (["2024-06-01T00:00:00Z,2024-06-01T00:00:00Z,ap,kimi,interactive,10"], "rates.csv, data row 1, column 'end'",
     "not after its start"),
    (["2024-06-01T00:00:00Z,2024-06-01T01:00:00Z,ap,kimi,interactive,1",
      "2024-06-01T01:00:00Z,2024-06-01T02:00:00Z,ap,kimi,interactive,-3"], "rates.csv, data row 2, column 'requests'",
     "is negative"),
    (["2024-06-01T00:00:00Z,2024-06-01T01:00:00Z,ap,kimi,interactive,many"], "rates.csv, data row 1, column 'requests'",
     "not a number"),
    (["yesterday,2024-06-01T01:00:00Z,ap,kimi,interactive,1"], "rates.csv, data row 1, column 'start'",
     "not a date-time"),
    (["2024-06-01T00:00:00Z,2024-06-01T01:00:00Z,ap,gpt,interactive,1"],
     "rates.csv, data row 1, columns 'model' and 'traffic_class'", "no token lengths for model 'gpt'"),
    (["2024-06-01T00:00:00Z,2024-06-01T01:00:00Z,,kimi,interactive,1"], "rates.csv, data row 1, column 'region'",
     "empty"),
])
def test_bad_rows_name_the_file_row_and_column(tmp_path: Path, rows: list[str], where: str, said: str) -> None:
    path = table(tmp_path / "rates.csv", rows)
    with pytest.raises(InputError) as caught:
        ingest_rates([path], lengths=LENGTHS, length_source=SOURCE)
    assert caught.value.where.startswith(f"{tmp_path}/{where}") or f"{tmp_path}/{where}" in caught.value.where
    assert said in caught.value.message


def test_overlap_names_both_rows(tmp_path: Path) -> None:
    path = table(tmp_path / "rates.csv", ["2024-06-01T00:00:00Z,2024-06-01T02:00:00Z,ap,kimi,interactive,10",
                                          "2024-06-01T01:00:00Z,2024-06-01T03:00:00Z,ap,kimi,interactive,5",
                                          "2024-06-01T01:00:00Z,2024-06-01T03:00:00Z,eu,kimi,interactive,5"])
    with pytest.raises(InputError, match="overlap") as caught:
        ingest_rates([path], lengths=LENGTHS, length_source=SOURCE)
    assert caught.value.where == f"{path}, data row 1, column 'start' and {path}, data row 2, column 'start'"


def test_negative_rate_and_both_measures(tmp_path: Path) -> None:
    path = table(tmp_path / "rps.csv", ["2024-06-01T00:00:00Z,ap,kimi,interactive,-0.5"],
                 header="start,region,model,traffic_class,rps")
    with pytest.raises(InputError, match="rps value '-0.5' is negative"):
        ingest_rates([path], lengths=LENGTHS, length_source=SOURCE)
    both = table(tmp_path / "both.csv", ["2024-06-01T00:00:00Z,ap,kimi,interactive,1,1"],
                 header="start,region,model,traffic_class,rps,requests")
    with pytest.raises(InputError, match="both a requests and an rps column"):
        ingest_rates([both], lengths=LENGTHS, length_source=SOURCE)


# --------------------------------------------------------------------------- CLI
def test_cli_rates_with_a_histogram(tmp_path: Path) -> None:
    path = table(tmp_path / "rates.csv", ["2024-06-01T00:30:00Z,2024-06-01T01:30:00Z,ap,kimi,interactive,30"])
    lengths = histogram(tmp_path / "lengths.histogram.csv")
    out = tmp_path / "demand.csv"
    result = runner.invoke(cli.app, ["ingest", path, "--format", "rates", "--lengths", str(lengths), "--out",
                                     str(out), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["measure"] == "requests" and payload["written"] == [str(out)]
    assert payload["lengths"] == [{"model": "kimi", "traffic_class": "interactive", "mean_prompt_tokens": 1535.5,
                                   "mean_output_tokens": 95.5,
                                   "length_source": f"ingest histogram {lengths} (bin means)"}]
    history = pd.read_csv(out)
    assert history["requests"].tolist() == [15.0, 15.0]
    assert history["prompt_tokens_sum"].tolist() == [15 * 1535.5, 15 * 1535.5]
    table_run = runner.invoke(cli.app, ["ingest", path, "--format", "rates", "--lengths", str(lengths), "--out",
                                        str(tmp_path / "again.csv")])
    assert table_run.exit_code == 0 and "lengths.histogram.csv" in table_run.output


def test_cli_rates_without_lengths_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    path = table(tmp_path / "rates.csv", ["2024-06-01T00:30:00Z,2024-06-01T01:30:00Z,ap,kimi,interactive,30"])
    out = tmp_path / "demand.csv"
    out.write_text("an earlier output\n")
    result = runner.invoke(cli.app, ["ingest", path, "--format", "rates", "--out", str(out)])
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert "--lengths HISTOGRAM" in result.output
    assert out.read_text() == "an earlier output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demand.csv", "rates.csv"]


def test_cli_rates_refuses_log_options(tmp_path: Path) -> None:
    path = table(tmp_path / "rates.csv", ["2024-06-01T00:30:00Z,2024-06-01T01:30:00Z,ap,kimi,interactive,30"])
    lengths = histogram(tmp_path / "lengths.histogram.csv")
    result = runner.invoke(cli.app, ["ingest", path, "--format", "rates", "--lengths", str(lengths), "--out",
                                     str(tmp_path / "d.csv"), "--histogram-out", str(tmp_path / "h.csv")])
    assert result.exit_code == ExitCode.INVALID_INPUT and "--histogram-out" in result.output
    bad_key = runner.invoke(cli.app, ["ingest", path, "--format", "rates", "--lengths", str(lengths), "--out",
                                      str(tmp_path / "d.csv"), "--map", "ts=start"])
    assert bad_key.exit_code == ExitCode.INVALID_INPUT and "unknown mapping key 'ts'" in bad_key.output
    assert not (tmp_path / "d.csv").exists()


def test_a_constant_label_and_a_column_of_that_name_are_refused_together(tmp_path: Path) -> None:
    path = table(tmp_path / "rates.csv", ["2024-06-01T00:00:00Z,2024-06-01T01:00:00Z,ap,kimi,interactive,1"])
    with pytest.raises(InputError, match="has a 'region' column and --region was given") as caught:
        ingest_rates([path], lengths=LENGTHS, length_source=SOURCE, labels={"region": "eu"})
    assert caught.value.where == f"{path}, column 'region'"


def test_cli_rates_with_a_scenarios_declared_lengths(tmp_path: Path, repo_root: Path) -> None:
    """The demo scenario declares each class's lengths (built-in laws by name): their means fill the token sums,
    and a --lengths histogram replaces them for the pairs it has."""
    from planner.workflows.data import declared_lengths

    scenario = repo_root / "scenarios" / "demo.toml"
    path = table(tmp_path / "rates.csv", ["2024-06-01T00:00:00Z,2024-06-01T01:00:00Z,us-east,llama-3.1-8b,batch,10"])
    out = tmp_path / "demand.csv"
    result = runner.invoke(cli.app, ["ingest", path, "--format", "rates", "--scenario", str(scenario), "--out",
                                     str(out), "--json"])
    assert result.exit_code == 0, result.output
    prompt, output = declared_lengths(scenario)[("llama-3.1-8b", "batch")]
    history = pd.read_csv(out)
    assert history["prompt_tokens_sum"].tolist() == [pytest.approx(10 * prompt)]
    assert history["output_tokens_sum"].tolist() == [pytest.approx(10 * output)]
    assert "scenario" in json.loads(result.stdout)["lengths"][0]["length_source"]
    logs = runner.invoke(cli.app, ["ingest", path, "--format", "generic", "--scenario", str(scenario), "--out",
                                   str(tmp_path / "other.csv")])
    assert logs.exit_code == ExitCode.INVALID_INPUT and "--scenario only applies to --format rates" in logs.output

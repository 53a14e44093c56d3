"""``benchmarks/ingest_throughput.py`` on a tiny log: CPU-seconds reported, same table both ways.

The comparison writes a 20k-row synthetic log, runs the DuckDB ingest and the pandas
``read_csv`` + ``groupby`` each in a child process, and checks their demand tables agree;
the figures must carry each side's CPU-seconds, and ``--busy-cores`` processes must be
gone when it returns.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "benchmarks" / "ingest_throughput.py"


@pytest.fixture(scope="module")
def it():
    name = "ingest_throughput_benchmark"
    spec = importlib.util.spec_from_file_location(name, BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)


@pytest.fixture
def child_env(monkeypatch):
    """The children import ``planner`` from this checkout."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))


def test_the_comparison_reports_cpu_seconds_and_one_table(it, child_env, tmp_path):
    log = tmp_path / "requests.csv"
    it.write_log(log, 20_000, seed=7)
    started = []
    real_start = it.start_busy

    def start_busy(count):
        spinners = real_start(count)
        started.extend(spinners)
        return spinners

    it.start_busy = start_busy
    try:
        comparison = it.compare(log, "1h", tmp_path, busy_cores=1)
    finally:
        it.start_busy = real_start

    assert comparison["agreement"].startswith("same table from both")
    for side in ("duckdb", "pandas"):
        figures = comparison[side]
        assert figures["rows"] == 20_000
        assert figures["cpu_seconds"] > 0
        assert figures["process_cpu_seconds"] >= figures["cpu_seconds"]
    assert comparison["duckdb"]["demand_rows"] == comparison["pandas"]["demand_rows"]
    assert comparison["wall_ratio"] > 0 and comparison["cpu_ratio"] > 0
    assert len(started) == 1 and all(spinner.poll() is not None for spinner in started)


def test_the_printed_comparison_shows_the_wall_ratio_and_both_cpu_seconds(it, child_env, capsys):
    assert it.main(["--rows", "20000", "--compare-rows", "20000"]) == 0
    out = capsys.readouterr().out
    assert "same table from both" in out
    assert "x the rows/s (wall)" in out
    assert "CPU-seconds on 20,000 rows: duckdb " in out and " pandas " in out
    assert "|  CPU s |" in out
    assert "comparison run with 0 busy core(s)" in out

"""Ingest throughput and memory: DuckDB streaming on a 50M-row log, and against pandas on 5M rows.

What it does:

1. Writes a synthetic request log in the generic CSV format (columns ts, region,
   model, traffic_class, prompt_tokens, output_tokens; 14 days of arrivals,
   log-normal token counts), chunk by chunk with numpy and pyarrow, from a fixed
   seed, into a temporary folder that is deleted at the end.
2. Runs ``planner.ingest.ingest_logs`` on it in a child process and reports rows/s
   and the child's peak resident set (``ru_maxrss``). Goal: under 2 GiB at 50M rows.
3. On a smaller log that pandas can hold (``--compare-rows``, default 5M), runs both
   ``ingest_logs`` and a plain pandas ``read_csv`` + ``groupby`` doing the same
   aggregation, each in its own child process, one after the other, and prints the
   ratio of their rows/s (wall clock) and the CPU-seconds each spent (user + system
   of all its threads, from ``getrusage`` in the child, over the same timed section).
   DuckDB runs on every core and pandas on one, so the wall ratio depends on how many
   cores are free; the CPU-seconds much less. Each child saves its table after its clock
   stops; the two tables must agree (counts and sums equal, quantiles to 1e-12
   relative), or the run stops. The load average read just before the comparison is
   printed with it.

``--busy-cores N`` keeps N other processes spinning on the CPU during the comparison
(started before the DuckDB child, stopped after the pandas child, always stopped on
exit), to measure the ratio on a machine with fewer free cores, reproducibly.

Usage: ``python benchmarks/ingest_throughput.py [--rows 50000000] [--compare-rows 5000000]
[--busy-cores 0]``. It prints figures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REGIONS = ("us-east", "us-west", "eu-west", "ap-northeast")
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-235b-a22b")
CLASSES = ("interactive", "standard", "batch")
MAPPING = (
    "ts=ts,prompt_tokens=prompt_tokens,output_tokens=output_tokens,"
    "region=region,model=model,traffic_class=traffic_class"
)
START = np.datetime64("2024-03-04T00:00:00", "us")
SPAN_US = 14 * 86_400 * 1_000_000
GIB = 1024**3


def write_log(path: Path, rows: int, seed: int, chunk: int = 1_000_000) -> float:
    """Write ``rows`` synthetic requests as CSV; return seconds taken. Same seed, same bytes."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    n_chunks = max(1, -(-rows // chunk))
    schema = pa.schema(
        [(name, pa.string()) for name in ("ts", "region", "model", "traffic_class")]
        + [("prompt_tokens", pa.int64()), ("output_tokens", pa.int64())]
    )
    with pacsv.CSVWriter(str(path), schema, write_options=pacsv.WriteOptions(quoting_style="none")) as writer:
        for index in range(n_chunks):
            size = min(chunk, rows - index * chunk)
            lo = SPAN_US * index // n_chunks
            hi = SPAN_US * (index + 1) // n_chunks
            offsets = np.sort(rng.integers(lo, hi, size))
            ts = np.datetime_as_string(START + offsets.astype("timedelta64[us]"), unit="us")
            columns = [
                pa.array(ts, pa.string()),
                pa.array(np.asarray(REGIONS)[rng.integers(0, len(REGIONS), size)], pa.string()),
                pa.array(np.asarray(MODELS)[rng.integers(0, len(MODELS), size)], pa.string()),
                pa.array(np.asarray(CLASSES)[rng.integers(0, len(CLASSES), size)], pa.string()),
                pa.array(np.minimum(rng.lognormal(7.0, 1.0, size), 131_072).astype(np.int64)),
                pa.array(np.minimum(rng.lognormal(5.0, 1.0, size), 8_192).astype(np.int64)),
            ]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
    return time.perf_counter() - began


def cpu_seconds() -> float:
    """User + system CPU-seconds this process has spent so far, all its threads included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child_duckdb(path: str, freq: str, table: str = "") -> dict[str, Any]:
    from planner.ingest import ingest_logs, parse_mapping

    cpu = cpu_seconds()
    began = time.perf_counter()
    result = ingest_logs([path], "generic", mapping=parse_mapping(MAPPING), freq=freq)
    seconds = time.perf_counter() - began
    cpu = cpu_seconds() - cpu
    if table:
        result.demand.to_parquet(table)
    return {"rows": result.rows_read, "seconds": seconds, "cpu_seconds": cpu, "demand_rows": len(result.demand)}


def child_pandas(path: str, freq: str, table: str = "") -> dict[str, Any]:
    """The same aggregation as ingest_logs, the way one would write it in pandas."""
    import pandas as pd

    cpu = cpu_seconds()
    began = time.perf_counter()
    frame = pd.read_csv(path)
    frame["bucket"] = pd.to_datetime(frame["ts"], utc=True, format="ISO8601").dt.floor(freq)
    grouped = frame.groupby(["region", "model", "traffic_class", "bucket"], sort=True)
    demand = grouped.agg(
        requests=("prompt_tokens", "size"),
        prompt_tokens_sum=("prompt_tokens", "sum"),
        output_tokens_sum=("output_tokens", "sum"),
    )
    for measure in ("prompt_tokens", "output_tokens"):
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            demand[f"{measure}_{name}"] = grouped[measure].quantile(q)
    seconds = time.perf_counter() - began
    cpu = cpu_seconds() - cpu
    if table:
        demand = demand.reset_index()
        demand.insert(0, "ts", demand.pop("bucket").dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
        demand.to_parquet(table)
    return {"rows": int(len(frame)), "seconds": seconds, "cpu_seconds": cpu, "demand_rows": int(len(demand))}


def check_same_figures(duckdb_table: Path, pandas_table: Path) -> str:
    """Stop unless both paths computed the same demand table; say how close the quantiles were."""
    import pandas as pd

    ours, theirs = pd.read_parquet(duckdb_table), pd.read_parquet(pandas_table)
    theirs = theirs.loc[:, list(ours.columns)]
    if len(ours) != len(theirs) or not ours.iloc[:, :7].astype(str).equals(theirs.iloc[:, :7].astype(str)):
        raise SystemExit("duckdb and pandas disagree on buckets, series, counts or sums")
    quantiles = ours.columns[7:]
    gap = float(((ours[quantiles] - theirs[quantiles]).abs() / theirs[quantiles].abs().clip(lower=1)).max().max())
    if gap > 1e-12:
        raise SystemExit(f"duckdb and pandas quantiles differ by up to {gap:.2e} (relative)")
    return f"same table from both ({len(ours):,} rows; quantiles agree to {gap:.1e} relative)"


def run_child(kind: str, path: Path, freq: str, table: Path | None = None) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its own peak RSS is read with getrusage.

    ``cpu_seconds`` covers the timed section only (read in the child);
    ``process_cpu_seconds`` the whole child, imports and table writing included (the
    parent's ``RUSAGE_CHILDREN`` before and after; spinning processes are not waited
    for until they stop, so they are not counted in it).
    """
    code = (
        "import json, resource, sys; sys.path.insert(0, sys.argv[1]);"
        "import ingest_throughput as b;"
        f"r = b.child_{kind}(sys.argv[2], sys.argv[3], sys.argv[4]);"
        "r['maxrss_bytes'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024;"
        "print(json.dumps(r))"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent), str(path), freq, str(table or "")],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{kind} child failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["wall_seconds"] = wall
    figures["process_cpu_seconds"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    figures["children_maxrss_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return figures


def start_busy(count: int) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` processes that spin on the CPU until they are stopped."""
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            spinners.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
    except BaseException:
        stop_busy(spinners)
        raise
    return spinners


def stop_busy(spinners: list[subprocess.Popen[bytes]]) -> None:
    """Kill and reap every spinning process (each by its own handle); empties the list."""
    while spinners:
        spinner = spinners.pop()
        spinner.kill()
        spinner.wait()


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``/proc/loadavg`` gives them."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def compare(path: Path, freq: str, scratch: Path, busy_cores: int = 0) -> dict[str, Any]:
    """Run the DuckDB child, then the pandas child, on ``path``; check that their tables agree.

    ``busy_cores`` processes spin on the CPU from before the first child to after the
    second. Returns both children's figures, the agreement note, the load average read
    before anything started, the wall ratio (DuckDB rows/s over pandas rows/s) and the
    CPU ratio (pandas CPU-seconds over DuckDB's, above 1 when DuckDB spends less).
    """
    load = load_average()
    spinners = start_busy(busy_cores)
    try:
        duck = run_child("duckdb", path, freq, scratch / "duckdb.parquet")
        pandas = run_child("pandas", path, freq, scratch / "pandas.parquet")
    finally:
        stop_busy(spinners)
    agreement = check_same_figures(scratch / "duckdb.parquet", scratch / "pandas.parquet")
    return {
        "duckdb": duck,
        "pandas": pandas,
        "agreement": agreement,
        "load_before": load,
        "busy_cores": busy_cores,
        "wall_ratio": (duck["rows"] / duck["seconds"]) / (pandas["rows"] / pandas["seconds"]),
        "cpu_ratio": pandas["cpu_seconds"] / duck["cpu_seconds"],
    }


def _row(label: str, rows: int, size: int, figures: dict[str, Any]) -> str:
    rate = figures["rows"] / figures["seconds"]
    return (
        f"| {label:<28} | {rows:>12,} | {size / 1e9:>7.2f} | {figures['seconds']:>8.1f} | "
        f"{rate:>12,.0f} | {figures['maxrss_bytes'] / GIB:>8.2f} | {figures['cpu_seconds']:>6.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000_000, help="rows in the large log (default 50M)")
    parser.add_argument("--compare-rows", type=int, default=5_000_000, help="rows in the pandas comparison log")
    parser.add_argument("--freq", default="1h")
    parser.add_argument("--seed", type=int, default=20240304)
    parser.add_argument(
        "--busy-cores",
        type=int,
        default=0,
        help="processes kept spinning on the CPU during the pandas comparison (default 0)",
    )
    args = parser.parse_args(argv)
    if args.busy_cores < 0:
        parser.error("--busy-cores must be 0 or more")

    scratch = Path(tempfile.mkdtemp(prefix="planner-bench-ingest-"))
    lines = [
        "| run                          |         rows | file GB | seconds |       rows/s | peak GiB |  CPU s |",
        "|------------------------------|--------------|---------|---------|--------------|----------|--------|",
    ]
    try:
        small = scratch / "requests_small.csv"
        write_log(small, args.compare_rows, args.seed)
        comparison = compare(small, args.freq, scratch, args.busy_cores)
        duck_small, pandas_small = comparison["duckdb"], comparison["pandas"]
        size_small = small.stat().st_size
        small.unlink()
        lines.append(_row("duckdb ingest_logs (small)", args.compare_rows, size_small, duck_small))
        lines.append(_row("pandas read_csv+groupby", args.compare_rows, size_small, pandas_small))

        large = scratch / "requests_large.csv"
        gen_seconds = write_log(large, args.rows, args.seed)
        size_large = large.stat().st_size
        duck_large = run_child("duckdb", large, args.freq)
        large.unlink()
        lines.append(_row("duckdb ingest_logs (large)", args.rows, size_large, duck_large))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print("\n".join(lines))
    print()
    print(f"large log written in {gen_seconds:.1f} s ({size_large / 1e9:.2f} GB), then deleted")
    print(comparison["agreement"])
    print(
        f"comparison run with {args.busy_cores} busy core(s) of {os.cpu_count()}; "
        f"load average before it: {comparison['load_before']}"
    )
    print(
        f"duckdb vs pandas on {args.compare_rows:,} rows: {comparison['wall_ratio']:.2f}x the rows/s (wall), "
        f"{pandas_small['maxrss_bytes'] / duck_small['maxrss_bytes']:.1f}x less peak memory"
    )
    print(
        f"CPU-seconds on {args.compare_rows:,} rows: duckdb {duck_small['cpu_seconds']:.1f} "
        f"({duck_small['cpu_seconds'] / duck_small['seconds']:.2f} cores busy on average), "
        f"pandas {pandas_small['cpu_seconds']:.1f} "
        f"({pandas_small['cpu_seconds'] / pandas_small['seconds']:.2f}); "
        f"duckdb spends {1 / comparison['cpu_ratio']:.2f}x pandas' CPU"
    )
    goal = "met" if duck_large["maxrss_bytes"] < 2 * GIB else "NOT met"
    print(f"peak RSS at {args.rows:,} rows: {duck_large['maxrss_bytes'] / GIB:.2f} GiB (goal < 2 GiB: {goal})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Commands about inputs: validate a scenario, list the catalog and profiles, ingest request logs."""

from __future__ import annotations

import glob
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import JsonFlag, app, guarded, print_outputs
from planner.cli.paths import check_paths
from planner.console import print_table, stderr
from planner.errors import InputError


# --------------------------------------------------------------------------- validate
@app.command()
@guarded
def validate(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML file.")],
    as_json: JsonFlag = False,
) -> None:
    """Validate a scenario file and print a readable summary (exit 3 with every error otherwise)."""
    check_paths(inputs={"SCENARIO": scenario})

    from planner.catalog import load_catalog
    from planner.profiles import load_profiles
    from planner.scenario import check_against_data, load_scenario

    loaded = load_scenario(scenario)
    problems = check_against_data(loaded, load_catalog().offers, load_profiles())
    if problems:
        raise InputError(
            "the scenario does not match the bundled data:\n  - " + "\n  - ".join(problems),
            where=scenario,
            fix="use serving regions listed by `planner catalog` and models listed by `planner profiles`",
        )
    print_table(
        loaded.summary_rows(),
        title=f"Scenario {scenario}: valid",
        as_json=as_json,
        json_extra={"scenario": str(scenario), "valid": True},
    )


# --------------------------------------------------------------------------- catalog
@app.command()
@guarded
def catalog(
    region: Annotated[str | None, typer.Option(help="Only this serving region key, e.g. aws:us-east-1.")] = None,
    sku: Annotated[str | None, typer.Option(help="Only this GPU SKU, e.g. H100.")] = None,
    tier: Annotated[str | None, typer.Option(help="Only this tier: reserved, on_demand or spot.")] = None,
    skus: Annotated[bool, typer.Option("--skus", help="List GPU SKU specifications instead of offers.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """List GPU offers (USD per GPU-hour by region, SKU and tier) or SKU specifications."""
    from planner.catalog import load_catalog, offers_table

    loaded = load_catalog()
    if skus:
        print_table(loaded.skus.to_dict("records"), title="GPU SKUs", as_json=as_json)
        return
    rows = offers_table(loaded, region=region, sku=sku, tier=tier)
    if not rows:
        raise InputError(
            f"no offers match region={region!r} sku={sku!r} tier={tier!r}",
            fix="run `planner catalog` without filters to see what exists",
        )
    print_table(rows, title=f"GPU offers ({len(rows)})", as_json=as_json)


# --------------------------------------------------------------------------- profiles
@app.command()
@guarded
def profiles(
    model: Annotated[str | None, typer.Option(help="Only this model.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List model profiles: GPUs per replica, KV capacity and step-time coefficients per (model, SKU)."""
    from planner.profiles import load_profiles

    table = load_profiles()
    if model is not None:
        table = table[table["model"] == model]
        if table.empty:
            raise InputError(f"no profile for model {model!r}", fix="run `planner profiles` to list models")
    # The free-text notes stay in --json and profiles.csv; they would crush the terminal table.
    columns = [name for name in table.columns if name != "notes"]
    print_table(table.to_dict("records"), title="Model profiles", columns=columns, as_json=as_json)


# --------------------------------------------------------------------------- ingest
def _parse_start(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--start {text!r} is not an ISO-8601 date-time",
            fix="pass e.g. --start 2024-05-01T00:00:00Z",
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@app.command()
@guarded
def ingest(
    inputs: Annotated[list[str], typer.Argument(help="Request-log files or globs (CSV, Parquet, JSONL).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Demand history to write (.csv or .parquet).")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="Log format: azure, mooncake or generic.")
    ] = "generic",
    mapping: Annotated[
        str | None,
        typer.Option(
            "--map",
            help="Column mapping for --format generic: ts=COL,prompt_tokens=COL,output_tokens=COL"
            "[,region=COL,model=COL,traffic_class=COL].",
        ),
    ] = None,
    start: Annotated[
        str | None, typer.Option(help="Trace start time (UTC) for relative timestamps (mooncake).")
    ] = None,
    region: Annotated[str | None, typer.Option(help="Constant region label when the log has none.")] = None,
    model: Annotated[str | None, typer.Option(help="Constant model label when the log has none.")] = None,
    traffic_class: Annotated[
        str | None, typer.Option("--traffic-class", help="Constant traffic class when the log has none.")
    ] = None,
    freq: Annotated[str, typer.Option(help="Bucket size, 1min to 1d.")] = "1h",
    histogram_out: Annotated[
        Path | None,
        typer.Option(help="Token-length histogram to write (default: <out>.histogram.csv)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Turn raw request logs into demand history per (bucket, region, model, traffic class), with DuckDB."""
    from planner.ingest import (
        ingest_logs,
        output_paths,
        parse_mapping,
        write_ingest_outputs,
    )

    out, histogram_path = output_paths(out, histogram_out)  # before reading gigabytes of logs
    # A glob is expanded (and each match checked) by the reader; a plain path is checked here.
    check_paths(inputs={"LOGS": [Path(p) for p in inputs if not glob.has_magic(p)]},
                outputs={"--out": out, "--histogram-out": histogram_path})
    labels = {
        key: value
        for key, value in {"region": region, "model": model, "traffic_class": traffic_class}.items()
        if value is not None
    }
    with stderr.status(f"Reading {len(inputs)} input pattern(s) with DuckDB..."):
        result = ingest_logs(
            inputs,
            fmt,
            mapping=parse_mapping(mapping) if mapping else None,
            start=_parse_start(start),
            labels=labels,
            freq=freq,
        )
    written = write_ingest_outputs(result, out, histogram_out)
    print_outputs(
        result.summary_rows(),
        title=f"Ingested {result.rows_read:,} requests from {len(result.files)} file(s)",
        as_json=as_json, written=written, rows_read=result.rows_read, files=result.files,
    )

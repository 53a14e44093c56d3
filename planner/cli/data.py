"""Commands about inputs: validate a scenario, list the catalog and profiles, ingest request logs."""

from __future__ import annotations

import glob
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from planner.cli.app import HistogramOption, JsonFlag, PlannerTyper, app, examples, guarded, print_outputs
from planner.cli.paths import check_paths, histogram_files
from planner.console import print_table, stderr
from planner.errors import InputError
from planner.runs import RunContext


# --------------------------------------------------------------------------- validate
@app.command(epilog=examples(
    "planner validate scenarios/demo.toml",
    "planner validate scenarios/global.toml --json",
))
@guarded
def validate(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML file.")],
    histogram: HistogramOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Validate a scenario file and print a readable summary and each (model, class)'s effective workload (exit 3
    with every error otherwise)."""
    check_paths(inputs={"SCENARIO": scenario, "--histogram": histogram_files(histogram)})

    from planner.catalog import load_catalog
    from planner.scenario.data_check import check_fits_data
    from planner.workflows.common import load_scenario_inputs, read_histograms
    from planner.workloads import default_notes, resolve_workloads, reuse_notes

    loaded, profiles = load_scenario_inputs(scenario)
    workloads = resolve_workloads(loaded, {m: loaded.model_mix(m) for m in loaded.model_names},
                                  histogram=read_histograms(histogram_files(histogram)))
    check_fits_data(loaded, load_catalog().offers, profiles, where=scenario)
    rows = [w.describe() for w in workloads.values()]
    if as_json:
        print_table(loaded.summary_rows(), as_json=True,
                    json_extra={"scenario": str(scenario), "valid": True, "workloads": rows,
                                "length_defaults": default_notes(workloads), "reuse_fits": reuse_notes(workloads)})
        return
    print_table(loaded.summary_rows(), title=f"Scenario {scenario}: valid")
    print_table([_workload_row(r) for r in rows], title="Workload per (model, class): share of the model's requests "
                                                        "(scenario mix), token lengths and where they come from")
    for note in [*default_notes(workloads), *reuse_notes(workloads)]:
        stderr.print(f"[yellow]note:[/] {escape(note)}")


def _workload_row(row: dict[str, Any]) -> dict[str, Any]:
    """One effective workload for the terminal: mean / p50 / p99 per measure, sources shortened to their origin."""
    out: dict[str, Any] = {"model": row["model"], "class": row["traffic_class"], "share": f"{row['share']:.3g}"}
    for measure in ("prompt", "output"):
        out[f"{measure} mean/p50/p99"] = (f"{row[f'{measure}_mean_tokens']:,.0f} / {row[f'{measure}_p50_tokens']:,} / "
                                          f"{row[f'{measure}_p99_tokens']:,}")
    out["reuse"] = row["reuse"] if "ideal_reuse_share" not in row else (
        f"{row['reuse']}: ideal share {row['ideal_reuse_share']:.0%}{_measured(row)}, prompts "
        f"{row['prompt_mean_tokens_all_turns']:,.0f} tokens over all turns")
    sources = dict.fromkeys((row["prompt_source"], row["output_source"]))
    out["lengths from"] = " | ".join(f"{m}: {src}" for m, src in zip(("prompt", "output"), sources, strict=False)) \
        if len(sources) > 1 else next(iter(sources))
    return out


def _measured(row: dict[str, Any]) -> str:
    """The measured figures beside a fitted shape's, so the fit's quality shows."""
    if "measured_ideal_reuse_share" not in row:
        return ""
    return (f" (measured {row['measured_ideal_reuse_share']:.0%}, prompts {row['measured_prompt_mean_tokens']:,.0f} "
            "tokens)")


# --------------------------------------------------------------------------- catalog
@app.command(epilog=examples(
    "planner catalog --sku H100 --tier spot",
    "planner catalog --region aws:us-east-1 --json",
))
@guarded
def catalog(
    region: Annotated[str | None, typer.Option(help="Only this serving region key, e.g. aws:us-east-1.")] = None,
    sku: Annotated[str | None, typer.Option(help="Only this GPU SKU, e.g. H100.")] = None,
    tier: Annotated[str | None, typer.Option(help="Only this tier: reserved, on_demand or spot.")] = None,
    skus: Annotated[bool, typer.Option("--skus", help="List GPU SKU specifications instead of offers (with filters, "
                                                      "of the SKUs offered there).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """List GPU offers (USD per GPU-hour by region, SKU and tier) or SKU specifications."""
    from planner.catalog import check_region, load_catalog, offers_table, skus_table

    loaded = load_catalog()
    if region is not None:
        check_region(loaded, region)
    if skus:  # the filters apply to the offers, and the SKUs listed are those offered
        specs = skus_table(loaded, region=region, sku=sku, tier=tier)
        if not specs:
            raise InputError(f"no SKU is offered for region={region!r} sku={sku!r} tier={tier!r}",
                             fix="run `planner catalog --skus` without filters to see every SKU")
        print_table(specs, title=f"GPU SKUs ({len(specs)})", as_json=as_json)
        return
    rows = offers_table(loaded, region=region, sku=sku, tier=tier)
    if not rows:
        raise InputError(
            f"no offers match region={region!r} sku={sku!r} tier={tier!r}",
            fix="run `planner catalog` without filters to see what exists",
        )
    print_table(rows, title=f"GPU offers ({len(rows)})", as_json=as_json)


# --------------------------------------------------------------------------- profiles
profiles_app = PlannerTyper(
    help="List model profiles (bare `planner profiles`), or fit one to your own measurements (`profiles fit`).",
    invoke_without_command=True,
    no_args_is_help=False,
    epilog=examples(
        "planner profiles --model llama-3.1-8b",
        """planner profiles fit tests/data/vllm_bench --model llama-3.1-8b --sku H100 \\
    --tp 1 --out my_h100.csv""",
    ),
)
app.add_typer(profiles_app, name="profiles")


@profiles_app.callback()
def profiles_group(
    context: typer.Context,
    model: Annotated[str | None, typer.Option(help="Only this model.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List model profiles: GPUs per replica, KV capacity and step-time model per (model, SKU, TP, engine)."""
    if context.invoked_subcommand is None:
        profiles(model=model, as_json=as_json, planner_context=context)  # type: ignore[call-arg]  # the guard takes it
    elif model is not None or as_json:
        raise typer.BadParameter(f"--model and --json of `planner profiles` list profiles; give them to "
                                 f"`planner profiles {context.invoked_subcommand}` instead")


TERMINAL_PROFILE_COLUMNS = ("model", "sku", "tp_degree", "engine", "kv_capacity_tokens", "max_num_seqs",
                            "max_num_batched_tokens", "source", "err_median_pct", "err_p95_pct")


@guarded
def profiles(model: str | None, as_json: bool) -> None:
    """The listing of the bare `planner profiles` (recorded as the command `profiles`)."""
    from planner.profiles import load_profiles

    table = load_profiles()
    if model is not None:
        table = table[table["model"] == model]
        if table.empty:
            raise InputError(f"no profile for model {model!r}", fix="run `planner profiles` to list models")
    # The step model's 40 coefficients and the source details stay in --json and profiles.csv; they would
    # crush the terminal table. `planner step-time` shows one step of a profile in full.
    columns = list(TERMINAL_PROFILE_COLUMNS) if not as_json else list(table.columns)
    print_table(table.to_dict("records"), title="Model profiles", columns=columns, as_json=as_json)


ModelOption = Annotated[str, typer.Option(help="Model, as `planner profiles` lists them, e.g. llama-3.1-8b.")]
SkuOption = Annotated[str, typer.Option(help="GPU SKU, e.g. H100.")]
TpOption = Annotated[int, typer.Option(help="Tensor-parallel degree: GPUs per replica.")]
ServingEngineOption = Annotated[str, typer.Option(help="Serving engine: vllm, sglang or trtllm.")]


def _check_engine(engine: str) -> None:
    from planner.profiles.loader import ENGINE_NAMES

    if engine not in ENGINE_NAMES:
        raise InputError(f"unknown engine {engine!r}", where="--engine", fix=f"use one of: {', '.join(ENGINE_NAMES)}")


def _profile_by_options(table: Any, model: str, sku: str, tp: int, engine: str) -> Any:
    """The profile row of (--model, --sku, --tp, --engine); an error names the first option with no match."""
    _check_engine(engine)
    rows = table[table["model"] == model]
    if rows.empty:
        raise InputError(f"no profile for model {model!r}", where="--model",
                         fix=f"use one of: {', '.join(sorted(table['model'].unique()))}")
    rows = rows[rows["engine"] == engine]
    if not (rows["sku"] == sku).any():
        raise InputError(f"no profile for {model} on SKU {sku!r} under {engine}", where="--sku",
                         fix=f"SKUs profiled for {model} under {engine}: {', '.join(sorted(rows['sku'].unique()))}")
    rows = rows[rows["sku"] == sku]
    match = rows[rows["tp_degree"] == tp]
    if match.empty:
        raise InputError(f"no profile for {model} on {tp} x {sku} under {engine}", where="--tp",
                         fix=f"tensor-parallel degrees profiled for {model} on {sku}: "
                             f"{', '.join(str(t) for t in sorted(rows['tp_degree']))}")
    return match.iloc[0]


def _check_step_shape(batch: int, context: int, prefill: int) -> None:
    for option, value in (("--batch", batch), ("--context", context), ("--prefill", prefill)):
        if value < 0:
            raise InputError(f"{option} must be 0 or more, got {value}", where=option,
                             fix="give a count of sequences (--batch) or tokens (--context, --prefill)")
    if batch == 0 and prefill == 0:
        raise InputError("a step with no decodes and no prefill does no work", where="--batch",
                         fix="give --batch (sequences decoding) or --prefill (prompt tokens), or both")
    if batch > 0 and context == 0:
        raise InputError("decoding sequences have a context of at least one token", where="--context",
                         fix="give their mean context in tokens, e.g. --context 1024")


def _check_step_fits(row: Any, batch: int, context: int, prefill: int) -> None:
    """Refuse a step the deployment cannot run: a step time for it would be a number for nothing.

    A decoding sequence's context, and a fresh prompt chunk, fit within the model's maximum context;
    every decode's context and the chunk's tokens are held in the replica's KV cache at once.
    """
    from planner.sim.workload import CONTEXT_TOKENS

    model, limit = str(row["model"]), CONTEXT_TOKENS.get(str(row["model"]))
    for option, value, what in (("--context", context, "a decoding sequence's context"),
                                ("--prefill", prefill, "a fresh prompt chunk")):
        if limit is not None and value > limit:
            raise InputError(f"{option} {value:,} tokens is beyond {model}'s maximum context of {limit:,} tokens: "
                             f"{what} cannot be that long", where=option,
                             fix=f"give at most {limit:,} tokens")
    capacity, needed = int(row["kv_capacity_tokens"]), batch * context + prefill
    if needed <= capacity:
        return
    holds = f"the KV cache of one replica of {model} on {row['tp_degree']} x {row['sku']} under {row['engine']} " \
            f"holds ({capacity:,} tokens): no replica can run this step"
    if batch == 0:
        raise InputError(f"--prefill {prefill:,} tokens is more than {holds}", where="--prefill",
                         fix="lower --prefill, or use more GPUs per replica (--tp)")
    fit = (capacity - prefill) // context
    most = f"at --context {context:,}{' beside the prefill' if prefill else ''} at most {fit:,} sequences fit: " \
        if fit > 0 else ""
    raise InputError(f"--batch {batch:,} x --context {context:,}" + (f" + --prefill {prefill:,}" if prefill else "")
                     + f" = {needed:,} tokens is more than {holds}", where="--batch",
                     fix=f"{most}lower --batch, --context{' or --prefill' if prefill else ''}, or use more GPUs per "
                         "replica (--tp)")


def _measured_estimate(row: Any, batch: int, context: int, prefill: int) -> tuple[float | None, str | None]:
    """The measured estimate of the step (aiconfigurator-core), or None and why not."""
    from planner.profiles.measured import SYSTEMS, MeasuredEngine, NotMeasured

    if row["source"] != "measured" or row["sku"] not in SYSTEMS:
        return None, f"a {row['source']} profile: no measured tables to compare with"
    if batch > 0 and context < 2:
        return None, "the measured tables start at a decode context of 2 tokens"
    from aiconfigurator_core.sdk.errors import PerfDataNotAvailableError

    engine = MeasuredEngine(str(row["model"]), str(row["sku"]), int(row["tp_degree"]), str(row["engine"]))
    try:
        return engine.step_ms(batch, context, prefill), None
    except (NotMeasured, PerfDataNotAvailableError) as why:
        return None, f"the measured tables have no data for this step ({str(why).split(' at /')[0]})"


@app.command("step-time", epilog=examples(
    """planner step-time --model llama-3.1-8b --sku H100 --tp 1 \\
    --batch 64 --context 1024 --prefill 0""",
    """planner step-time --model llama-3.1-70b --sku H200 --tp 4 \\
    --batch 0 --context 0 --prefill 8192""",
))
@guarded
def step_time(
    model: ModelOption,
    sku: SkuOption,
    tp: TpOption,
    batch: Annotated[int, typer.Option(help="Sequences decoding in the step (one token each).")],
    context: Annotated[int, typer.Option(help="Their mean context in tokens (prompt + generated so far).")],
    prefill: Annotated[int, typer.Option(help="Prompt tokens prefilled in the same step: one fresh chunk.")],
    engine: ServingEngineOption = "vllm",
    as_json: JsonFlag = False,
    run: RunContext | None = None,
) -> None:
    """Predict one engine step's time from a profile, split by kernel, beside the measured estimate where one exists
    (exit 3 for a step no replica can run: beyond the model's context or the replica's KV cache)."""
    from planner.console import print_json, stdout
    from planner.profiles import load_profiles, step_model_of
    from planner.profiles.step_model import causal_pairs

    _check_step_shape(batch, context, prefill)
    row = _profile_by_options(load_profiles(), model, sku, tp, engine)
    _check_step_fits(row, batch, context, prefill)
    parts = step_model_of(row).uniform_parts_ms(batch, context, prefill)
    measured, why_not = _measured_estimate(row, batch, context, prefill)
    result = {
        "model": model, "sku": sku, "tp_degree": tp, "engine": engine,
        "batch": batch, "context": context, "prefill": prefill,
        "decode_kv_tokens": batch * context, "prefill_pairs": causal_pairs(prefill, 0.0),
        "step_ms": parts.total_ms, "dense_ms": parts.dense_ms,
        "decode_attention_ms": parts.decode_attention_ms, "prefill_attention_ms": parts.prefill_attention_ms,
        "measured_ms": measured, "predicted_over_measured": parts.total_ms / measured if measured else None,
        "measured_note": why_not,
        **{column: row[column] for column in ("source", "source_detail", "err_points", "err_median_pct",
                                              "err_p95_pct", "err_max_pct")},
    }
    if (run := run) is not None:
        run.add_figures(step_ms=round(parts.total_ms, 4))
    if as_json:
        print_json(result)
        return
    print_table(_step_rows(result), title=f"One step of {model} on {tp} x {sku} under {engine}: "
                                          f"{parts.total_ms:.3f} ms", columns=["part", "ms", "what"])
    stdout.print(f"profile: {row['source']} ({row['source_detail']}); its error over {row['err_points']:,} steps: "
                 f"median {row['err_median_pct']:g} %, p95 {row['err_p95_pct']:g} %, max {row['err_max_pct']:g} %",
                 highlight=False, markup=False)
    if why_not:
        stdout.print(f"measured estimate: none, {why_not}", highlight=False, markup=False)


def _step_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    batch, prefill = result["batch"], result["prefill"]
    rows = [
        {"part": "dense", "ms": result["dense_ms"], "what": f"GEMMs, MoE, norms, all-reduces of {batch + prefill:,} "
                                                           "tokens"},
        {"part": "decode attention", "ms": result["decode_attention_ms"],
         "what": f"{batch:,} sequences reading {result['decode_kv_tokens']:,} KV tokens"},
        {"part": "prefill attention", "ms": result["prefill_attention_ms"],
         "what": f"{prefill:,} prompt tokens, {result['prefill_pairs']:,.0f} query-key pairs"},
        {"part": "step (predicted)", "ms": result["step_ms"], "what": "the profile's step model"},
    ]
    if result["measured_ms"] is not None:
        rows.append({"part": "measured estimate", "ms": result["measured_ms"],
                     "what": "aiconfigurator-core's estimate of the same step"})
        rows.append({"part": "predicted / measured", "ms": result["predicted_over_measured"], "what": "ratio"})
    return rows


@profiles_app.command("fit", epilog=examples(
    """planner profiles fit tests/data/vllm_bench --model llama-3.1-8b --sku H100 \\
    --tp 1 --out my_h100.csv""",
))
@guarded
def profiles_fit(
    measurements: Annotated[list[str], typer.Argument(help="Step logs (CSV) or vLLM benchmark results (JSON): "
                                                           "files, globs or folders.")],
    model: ModelOption,
    sku: SkuOption,
    tp: TpOption,
    out: Annotated[Path, typer.Option("--out", "-o", help="Profile file to write (.csv or .parquet), one row; "
                                                         "a scenario's `profiles = [...]` reads it.")],
    engine: ServingEngineOption = "vllm",
    accept_outlier: Annotated[bool, typer.Option(
        "--accept-outlier", help="Fit step times more than 10 x off the bundled profile of the same key (or 10 x "
                                 "faster than reading the weights once, without one) instead of refusing them as a "
                                 "wrong unit: for times you really measured.")] = False,
    as_json: JsonFlag = False,
    run: RunContext | None = None,
) -> None:
    """Fit a step-time model to your own measurements and write it as a one-row profile (source user-fit).

    Times far off the bundled profile of the same key (seconds instead of milliseconds, say) are refused unless
    --accept-outlier is given."""
    from planner.profiles.build import profile_row
    from planner.storage import check_table_suffix
    from planner.workflows.data import fit_profile

    check_table_suffix(out)
    check_paths(inputs={"MEASUREMENTS": [Path(p) for p in measurements
                                         if not glob.has_magic(p) and not Path(p).is_dir()]},
                outputs={"--out": out})
    _check_engine(engine)
    bundled = _bundled_replica(model, sku, tp, engine)
    sizing = _sizing(model, sku, tp, engine) if bundled is None else None  # checked before reading measurements

    def base(fit: Any, detail: str) -> dict[str, Any]:
        if bundled is not None:
            return bundled
        assert sizing is not None  # sized above whenever no bundled profile exists
        geometry, spec = sizing
        return profile_row(geometry, spec, tp, engine, fit.step, "user-fit", detail, fit.error)

    fitted = fit_profile(measurements, out, base=base, reference=_reference(bundled, sizing, tp),
                         accept_outlier=accept_outlier, run=run)
    fit, read, table = fitted.fit, fitted.read, fitted.table
    rows = [{"steps": kind, "points": error.points, "median_pct": error.median_pct, "p95_pct": error.p95_pct,
             "max_pct": error.max_pct} for kind, error in [("all", fit.error), *fit.errors_by_kind.items()]
            if error.points]
    print_outputs(rows, title=f"Step model of {model} on {tp} x {sku} under {engine}, fitted to {fit.error.points:,} "
                              "steps: absolute error, %", as_json=as_json, written=[out],
                  files=[{"file": str(f.path), "format": f.kind, "steps": f.steps, "detail": f.detail}
                         for f in read.files],
                  knots=list(fit.knots), notes=list(fitted.notes), profile=table.iloc[0].to_dict())
    if not as_json:
        for note in fitted.notes:
            stderr.print(f"[yellow]note:[/] {escape(note)}", highlight=False)


def _bundled_replica(model: str, sku: str, tp: int, engine: str) -> dict[str, Any] | None:
    """The bundled profile of the same key, whose replica sizing a user fit keeps; None when there is none."""
    from planner.contracts import PROFILE_KEY
    from planner.profiles import load_profiles

    table = load_profiles()
    match = table[(table.loc[:, list(PROFILE_KEY)] == [model, sku, tp, engine]).all(axis=1)]
    return match.iloc[0].to_dict() if len(match) else None


def _reference(bundled: dict[str, Any] | None, sizing: tuple[Any, Any] | None, tp: int) -> Any:
    """What the measured times are checked against: the bundled profile of the key, else the weights' read time."""
    from planner.profiles import step_model_of
    from planner.profiles.plausible import bundled_reference, weights_floor_reference

    if bundled is not None:
        key = f"{bundled['model']} on {tp} x {bundled['sku']} under {bundled['engine']}"
        return bundled_reference(step_model_of(bundled), key)
    assert sizing is not None  # sized whenever no bundled profile exists
    return weights_floor_reference(*sizing, tp)


def _sizing(model: str, sku: str, tp: int, engine: str) -> tuple[Any, Any]:
    """The model's geometry and the SKU's specs, which size a replica by the build's rules (``build.py``)."""
    from planner.paths import catalog_dir
    from planner.profiles import load_models
    from planner.profiles.build import kv_capacity_tokens
    from planner.profiles.specs import read_sku_specs

    geometries = load_models()
    if model not in geometries:
        raise InputError(f"unknown model {model!r}", where="--model",
                         fix=f"use a model of data/profiles/models.csv: {', '.join(sorted(geometries))}")
    specs = read_sku_specs(catalog_dir() / "skus.csv")
    if sku not in specs:
        raise InputError(f"unknown SKU {sku!r}", where="--sku", fix=f"use a catalog SKU: {', '.join(specs)}")
    geometry, spec = geometries[model], specs[sku]
    if not 1 <= tp <= spec.max_gpus_per_node or geometry.attention_heads % tp:
        raise InputError(f"{model} cannot run on {tp} x {sku}", where="--tp",
                         fix=f"use a degree that divides its {geometry.attention_heads} attention heads, at most "
                             f"{spec.max_gpus_per_node} (GPUs per {sku} node)")
    if kv_capacity_tokens(geometry, spec, tp, engine) < 1:
        raise InputError(f"{model}'s weights leave no room for a KV cache on {tp} x {sku}", where="--tp",
                         fix="use more GPUs per replica")
    return geometry, spec


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


@app.command(epilog=examples(
    """planner ingest data/samples/mooncake/conversation_trace_head200.jsonl \\
    --format mooncake --start 2024-06-01T00:00:00Z --region ap-northeast \\
    --model kimi --traffic-class interactive --freq 1min --out mooncake.csv""",
    """planner ingest data/samples/azure_llm_2023/AzureLLMInferenceTrace_code.csv \\
    --format azure --region us-west --model llama-3.1-8b \\
    --traffic-class standard --out azure.parquet""",
    """planner ingest data/samples/mooncake/conversation_trace_6001_7000.jsonl \\
    --format mooncake --start 2024-06-01T00:00:00Z --region ap-northeast \\
    --model kimi --traffic-class interactive --out kimi.csv""",
))
@guarded
def ingest(
    inputs: Annotated[list[str], typer.Argument(help="Request-log files or globs (CSV, Parquet, JSONL).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Demand history to write (.csv or .parquet).")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="Log format: azure, mooncake or generic; or rates, for tables of "
                                                 "request counts or rates per interval.")
    ] = "generic",
    mapping: Annotated[
        str | None,
        typer.Option(
            "--map",
            help="Column mapping for --format generic: ts=COL,prompt_tokens=COL,output_tokens=COL"
            "[,region=COL,model=COL,traffic_class=COL][,prefix_hashes=COL][,session_id=COL]; for --format rates: "
            "start=COL[,end=COL],requests=COL or rps=COL[,region=COL,...] (default: the key's own name).",
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
    block_tokens: Annotated[
        int | None,
        typer.Option(help="Prompt tokens per prefix hash (default 512 for mooncake; needed with prefix_hashes=)."),
    ] = None,
    reuse_out: Annotated[
        Path | None,
        typer.Option(help="Prefix-reuse statistics to write when the logs carry block hashes or session ids "
                          "(default: <out>.reuse.json)."),
    ] = None,
    lengths: Annotated[
        Path | None,
        typer.Option(help="For --format rates: the token-length histogram (.histogram.csv of `planner ingest`) "
                          "whose mean lengths fill the token sums."),
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(help="For --format rates: a scenario whose declared token lengths fill the token sums (a "
                          "--lengths histogram replaces them for the pairs it has)."),
    ] = None,
    as_json: JsonFlag = False,
    run: RunContext | None = None,
) -> None:
    """Turn raw request logs (or tables of counts per interval) into demand history per (bucket, region, model,
    traffic class), with DuckDB."""
    from planner.ingest import output_paths, reuse_path
    from planner.workflows.data import ingest as ingest_workflow

    labels = _labels(region=region, model=model, traffic_class=traffic_class)
    if fmt.strip().lower() == "rates":
        _refuse(LOGS_ONLY, start=start, histogram_out=histogram_out, block_tokens=block_tokens, reuse_out=reuse_out)
        _ingest_rates(inputs, out, mapping=mapping, labels=labels, freq=freq, lengths=lengths, scenario=scenario,
                      as_json=as_json, run=run)
        return
    _refuse(RATES_ONLY, lengths=lengths, scenario=scenario)
    out, histogram_path = output_paths(out, histogram_out)  # before reading gigabytes of logs
    reuse_file = reuse_path(out, histogram_path, reuse_out)
    # A glob is expanded (and each match checked) by the reader; a plain path is checked here.
    check_paths(inputs={"LOGS": [Path(p) for p in inputs if not glob.has_magic(p)]},
                outputs={"--out": out, "--histogram-out": histogram_path, "--reuse-out": reuse_file})
    with stderr.status(f"Reading {len(inputs)} input pattern(s) with DuckDB..."):
        done = ingest_workflow(inputs, fmt, out, mapping=mapping, start=_parse_start(start), labels=labels, freq=freq,
                               histogram_out=histogram_out, block_tokens=block_tokens, reuse_out=reuse_out, run=run)
    result, written = done.result, done.written
    if result.reuse is not None and not as_json:
        print_table(result.reuse_rows(), title="Prefix reuse (an ideal cache that never evicts)")
    print_outputs(
        result.summary_rows(),
        title=f"Ingested {result.rows_read:,} requests from {len(result.files)} file(s)",
        as_json=as_json, written=written, rows_read=result.rows_read, files=result.files, reuse=result.reuse,
    )


def _labels(**given: str | None) -> dict[str, str]:
    """The constant labels given (``--region``, ``--model``, ``--traffic-class``)."""
    return {key: value for key, value in given.items() if value is not None}


LOGS_ONLY = "applies to request logs, not to --format rates"
RATES_ONLY = "only applies to --format rates (request logs carry their own lengths)"


def _refuse(why: str, **given: Any) -> None:
    """Options this input format cannot use: the first one given is exit 3, ``why`` saying what it applies to."""
    for name, value in given.items():
        if value is not None:
            option = "--" + name.replace("_", "-")
            raise InputError(f"{option} {why}", where=option, fix=f"drop {option}")


def _ingest_rates(inputs: list[str], out: Path, *, mapping: str | None, labels: dict[str, str], freq: str,
                  lengths: Path | None, scenario: Path | None, as_json: bool, run: RunContext | None) -> None:
    """``planner ingest --format rates``: tables of counts or rates per interval to demand history."""
    from planner.storage import check_table_suffix
    from planner.workflows.data import ingest_rates

    check_table_suffix(out)
    check_paths(inputs={"TABLES": [Path(p) for p in inputs if not glob.has_magic(p)],
                        "--lengths": lengths, "--scenario": scenario}, outputs={"--out": out})
    done = ingest_rates(inputs, out, mapping=mapping, labels=labels, freq=freq, lengths_file=lengths,
                        scenario_file=scenario, run=run)
    result = done.result
    print_outputs(result.summary_rows(),
                  title=f"Ingested {result.rows_read:,} intervals ({result.measure}) from {len(result.files)} file(s); "
                        f"token lengths from {result.length_source}",
                  as_json=as_json, written=done.written, rows_read=result.rows_read, files=result.files,
                  measure=result.measure, lengths=result.lengths)

"""``planner ingest`` and ``planner profiles fit``: read request logs or step measurements, write, record."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from planner.storage import write_table_atomic

if TYPE_CHECKING:
    from planner.ingest.pipeline import IngestResult
    from planner.ingest.rates_pipeline import RatesResult
    from planner.profiles.measurements import Measurements
    from planner.profiles.plausible import Reference
    from planner.profiles.user_fit import UserFit
    from planner.runs import RunContext


@dataclass(frozen=True)
class Ingested:
    result: IngestResult
    written: list[Path]


def ingest(inputs: Sequence[str], fmt: str, out: Path, *, mapping: str | None = None, start: datetime | None = None,
           labels: Mapping[str, str] | None = None, freq: str = "1h", histogram_out: Path | None = None,
           block_tokens: int | None = None, reuse_out: Path | None = None,
           run: RunContext | None = None) -> Ingested:
    """Aggregate raw request logs into demand history, a token-length histogram beside it and, when the logs
    carry block hashes or session ids, the prefix-reuse statistics: all or none."""
    from planner.ingest import ingest_logs, parse_mapping, write_ingest_outputs

    result = ingest_logs(inputs, fmt, mapping=parse_mapping(mapping) if mapping else None, start=start,
                         labels=dict(labels or {}), freq=freq, block_tokens=block_tokens)
    written = write_ingest_outputs(result, out, histogram_out, reuse_out)
    if run is not None:
        run.add_output(*written)
        if result.reuse is not None:
            run.add_figures(ideal_reuse_share={f"{s['model']}/{s['traffic_class']}": s["ideal_share"]
                                               for s in result.reuse["series"]})
    return Ingested(result, written)


@dataclass(frozen=True)
class IngestedRates:
    result: RatesResult
    written: list[Path]


def histogram_lengths(lengths_file: Path | None) -> tuple[dict[tuple[str, str], tuple[float, float]], str]:
    """(model, class) -> (mean prompt, mean output tokens) from an ingest histogram, and its source."""
    from planner.errors import InputError
    from planner.ingest.rates import lengths_from_histogram
    from planner.ingest.rates_read import checked_histogram
    from planner.workflows.common import read_named

    if lengths_file is None:
        raise InputError("a rates table has no token lengths, and the token statistics of the history need them",
                         where="--lengths",
                         fix="pass --scenario S whose classes declare their lengths, or --lengths HISTOGRAM: a "
                             ".histogram.csv that `planner ingest` wrote from request "
                             "logs of the same models and classes")
    histogram = checked_histogram(read_named(lengths_file))
    return lengths_from_histogram(histogram), f"ingest histogram {lengths_file} (bin means)"


def declared_lengths(scenario_file: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """(model, class) -> (mean prompt, mean output tokens) of every pair whose lengths the scenario declares (or
    names a built-in law for): :func:`planner.workloads.resolve_workloads` over every (model, class)."""
    from planner.scenario import load_scenario
    from planner.workloads import resolve_workloads

    scenario = load_scenario(scenario_file)
    every = {m: dict.fromkeys(scenario.class_names, 0.0) for m in scenario.model_names}
    workloads = resolve_workloads(scenario, every, include_idle=True)
    return {pair: (w.lengths.prompt.mean(), w.lengths.output.mean()) for pair, w in workloads.items()}


def rates_lengths(lengths_file: Path | None, scenario_file: Path | None) -> tuple[
        dict[tuple[str, str], tuple[float, float]], str]:
    """The mean lengths a rates table's token sums use, and their source: the scenario's declarations, with the
    histogram's means over them for the (model, class) pairs it has; one of the two is needed."""
    if scenario_file is None:
        return histogram_lengths(lengths_file)
    lengths = declared_lengths(scenario_file)
    source = f"scenario {scenario_file} (declared laws' means)"
    if lengths_file is not None:
        measured, measured_source = histogram_lengths(lengths_file)
        lengths.update(measured)
        source = f"{measured_source} where it has the (model, class), else {source}"
    return lengths, source


def ingest_rates(inputs: Sequence[str], out: Path, *, mapping: str | None = None,
                 labels: Mapping[str, str] | None = None, freq: str = "1h", lengths_file: Path | None = None,
                 scenario_file: Path | None = None, run: RunContext | None = None) -> IngestedRates:
    """Spread aggregated demand tables (counts or rates per interval) into demand history, with token sums
    from the mean lengths of an ingest histogram and/or a scenario's declared lengths; write it."""
    from planner.ingest import ingest_rates as ingest_rates_core
    from planner.ingest import parse_mapping, write_rates_output
    from planner.ingest.rates_read import RATES_EXAMPLE, RATES_KEYS

    parsed = parse_mapping(mapping, keys=RATES_KEYS, example=RATES_EXAMPLE) if mapping else None
    lengths, source = rates_lengths(lengths_file, scenario_file)
    result = ingest_rates_core(inputs, lengths=lengths, length_source=source, mapping=parsed,
                               labels=dict(labels or {}), freq=freq)
    written = write_rates_output(result, out)
    if run is not None:
        run.add_output(*written)
        run.add_figures(length_source=source, requests=float(result.demand["requests"].sum()))
    return IngestedRates(result, written)


@dataclass(frozen=True)
class FittedProfile:
    table: pd.DataFrame
    fit: UserFit
    read: Measurements
    notes: tuple[str, ...]
    """The fit's notes, after any outlier a user accepted (``plausible.py``)."""


def fit_profile(measurements: Sequence[str], out: Path, *, base: Callable[[Any, str], dict[str, Any]],
                reference: Reference, accept_outlier: bool = False, run: RunContext | None = None) -> FittedProfile:
    """Fit a step-time model to the measurements and write it as a one-row profile at ``out``.

    ``base(fit, detail)`` is the profile row the fit goes into (the bundled one of the same key,
    or one sized by the build's rules); each file's times are first checked against ``reference``
    (``plausible.py``: a file in seconds would fit as well and make a profile 1,000 x too fast).
    """
    from planner.profiles.loader import validate_profiles
    from planner.profiles.measurements import read_measurements
    from planner.profiles.plausible import check_step_times
    from planner.profiles.user_fit import fit_detail, fit_steps, with_fit

    read = read_measurements(list(measurements))
    outliers = check_step_times(read, reference, accept=accept_outlier)
    fit = fit_steps(read.steps, where=", ".join(str(f.path) for f in read.files))
    detail = fit_detail(fit, read.describe())
    if outliers:  # the profile itself says its times were far from the reference, not only this run's terminal
        detail += f"; {len(outliers)} file(s) far off the expected step times, kept with --accept-outlier"
    table = validate_profiles(pd.DataFrame([with_fit(base(fit, detail), fit, detail)]), out)
    write_table_atomic(out, table)
    if run is not None:
        run.add_figures(steps=fit.error.points, err_median_pct=round(fit.error.median_pct, 2),
                        err_p95_pct=round(fit.error.p95_pct, 2), err_max_pct=round(fit.error.max_pct, 2))
        run.add_output(out)
    return FittedProfile(table, fit, read, (*outliers, *fit.notes))

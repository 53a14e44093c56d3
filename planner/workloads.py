"""The workload of each (model, traffic class): its length laws, its share of the model's traffic, and sources.

One :class:`Workload` per (model, class) is what calibration, simulation, validation and
the report read; nothing downstream looks lengths up by class name.

**Lengths**, each of prompt and output on its own, from the first source that has them:

1. an ingested histogram (``planner ingest``'s ``.histogram.csv``) with rows of that
   (model, class) and measure;
2. the model's own declaration, ``[models.workloads.<class>]``;
3. the class's declaration, ``prompt_tokens`` / ``output_tokens`` of ``[[classes]]``;
4. the built-in law of a class named like one (``interactive``, ``standard``, ``batch``,
   ``long-context``): a default standing in for the user's data, so it is reported as one.

A pair that gets traffic and has no lengths from any of them is an input error (exit 3)
naming the class, the model and the fields to add. Declared laws are cut like the built-in
ones: prompts at :func:`planner.sim.workload.prompt_cap_tokens`, outputs at the model's
context. A lognormal declared by mean m and σ has μ = ln m − σ²/2 (the untruncated mean is m).

**Mix.** A model's class shares p_k (Σ p_k = 1) come from its traffic in the forecast
(``plan``, ``report``, ``sweep``: :func:`forecast_mixes`), or from the scenario
(``calibrate``: :meth:`planner.scenario.Scenario.model_mix`). A class with p_k = 0 for a
model is "no traffic": it is neither calibrated, simulated nor counted in an SLO verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.measured_reuse import fit_measured_reuse
from planner.scenario import Scenario
from planner.scenario.lengths import BUILTIN_LAWS, LengthDecl, MeasuredReuse
from planner.sim.class_reuse import ClassReuse, PoolReuse
from planner.sim.prefix_workload import ideal_cached_tokens
from planner.sim.workload import (
    CONTEXT_TOKENS,
    DEFAULT_CONTEXT_TOKENS,
    TRACE_SOURCES,
    ClassWorkload,
    EmpiricalLength,
    LengthLaw,
    LognormalLength,
    builtin_law,
    prompt_cap_tokens,
    sample_requests,
    validate_histogram,
)

MEASURES = (("prompt", "prompt_tokens"), ("output", "output_tokens"))
INGESTED = "ingest histogram"
BUILTIN = "built-in law"


@dataclass(frozen=True)
class Workload:
    """One (model, class): its share of the model's requests, its length laws and where each came from.

    ``defaulted`` names the measures ("prompt", "output") a built-in law stands in for.
    """

    model: str
    traffic_class: str
    share: float
    share_source: str
    lengths: ClassWorkload
    prompt_source: str
    output_source: str
    defaulted: tuple[str, ...] = ()
    reuse: ClassReuse | None = None
    reuse_source: str = "none declared"
    measured: MeasuredReuse | None = None

    def describe(self) -> dict[str, object]:
        """The effective workload, as ``planner validate`` and the outputs show it."""
        row: dict[str, object] = {"model": self.model, "traffic_class": self.traffic_class, "share": self.share,
                                  "share_source": self.share_source}
        for measure, law, source in (("prompt", self.lengths.prompt, self.prompt_source),
                                     ("output", self.lengths.output, self.output_source)):
            row.update({f"{measure}_mean_tokens": round(law.mean(), 1), f"{measure}_p50_tokens": law.quantile(0.5),
                        f"{measure}_p99_tokens": law.quantile(0.99), f"{measure}_source": source})
        row["reuse"] = self.reuse.describe() if self.reuse is not None else "none"
        row["reuse_source"] = self.reuse_source
        if self.reuse is not None:
            row.update(expected_reuse(self.lengths, self.reuse))
        if self.measured is not None:
            row["measured_ideal_reuse_share"] = round(self.measured.ideal_share, 3)
            row["measured_prompt_mean_tokens"] = round(self.measured.prompt_tokens / self.measured.requests, 1)
        return row


REUSE_PREVIEW_REQUESTS = 4000
"""Requests drawn to preview a declared reuse (:func:`expected_reuse`): the ideal share to about ±1 %."""


def expected_reuse(lengths: ClassWorkload, reuse: ClassReuse, block_tokens: int = 16) -> dict[str, float]:
    """What a declared reuse means for the class's requests, measured on a seeded sample of them: the mean prompt
    over every turn (sessions grow it) and the share of prompt tokens a cache that never evicts would serve."""
    rate, duration = 1.0, float(REUSE_PREVIEW_REQUESTS)
    law = PoolReuse((reuse,), (lengths,), (rate,), (reuse.max_prompt_tokens,), duration, block_tokens)
    sample = sample_requests(np.array([rate]), [lengths], duration, np.random.SeedSequence(0), prefix=law)
    prompt = float(sample.prompt_tokens.sum())
    return {"prompt_mean_tokens_all_turns": round(prompt / max(sample.n, 1), 1),
            "ideal_reuse_share": round(float(ideal_cached_tokens(sample).sum()) / prompt, 3) if prompt else 0.0}


def _declared_law(decl: LengthDecl, measure: str, model: str, cap: int) -> LengthLaw:
    """The law a declaration states, cut at ``cap`` tokens (values above it are an error, not cut silently)."""
    if decl.law is not None:
        return builtin_law(decl.law, measure, cap)
    if decl.median is not None and decl.p99 is not None:
        return LognormalLength.through(decl.median, decl.p99, cap)
    if decl.mean is not None and decl.sigma is not None:
        return LognormalLength(math.log(decl.mean) - decl.sigma ** 2 / 2.0, decl.sigma, cap)
    if decl.fixed is not None:
        tokens, weights = np.array([decl.fixed]), np.array([1.0])
    elif decl.points is not None:
        tokens, weights = np.array([p[0] for p in decl.points]), np.array([p[1] for p in decl.points])
    else:
        bins = np.array(decl.bins or (), dtype=np.float64).reshape(-1, 3)
        if not bins.size:
            raise InputError(f"histogram {decl.histogram!r} was not read", where="scenario",
                             fix="load the scenario with planner.scenario.load_scenario, which reads the file")
        if bins[:, 1].max() - 1 > cap:
            _too_long(decl, int(bins[:, 1].max()) - 1, cap, measure, model)
        return EmpiricalLength(bins[:, 0].astype(np.int64), bins[:, 1].astype(np.int64), bins[:, 2],
                               f"declared histogram {decl.histogram}")
    if tokens.max() > cap:
        _too_long(decl, int(tokens.max()), cap, measure, model)
    return EmpiricalLength.points(tokens, weights, "declared " + decl.form)


def _too_long(decl: LengthDecl, tokens: int, cap: int, measure: str, model: str) -> NoReturn:
    raise InputError(f"{decl.describe()} declares {measure}s of {tokens} tokens, more than {model} takes ({cap})",
                     where=f"{measure}_tokens", fix=f"keep {measure} lengths at or below {cap} tokens "
                                                    "(a class's max_prompt_tokens or the model's context)")


def _ingested(histogram: pd.DataFrame | None, model: str, klass: str, measure_column: str) -> LengthLaw | None:
    if histogram is None:
        return None
    rows = histogram[(histogram["model"] == model) & (histogram["traffic_class"] == klass)
                     & (histogram["measure"] == measure_column)].sort_values("bin_lo_tokens", kind="stable")
    if rows.empty or rows["count"].sum() <= 0:
        return None
    return EmpiricalLength(rows["bin_lo_tokens"].to_numpy(dtype=np.int64),
                           rows["bin_hi_tokens"].to_numpy(dtype=np.int64), rows["count"].to_numpy(dtype=np.float64))


def _law_and_source(scenario: Scenario, model: str, klass: str, measure: str, column: str,
                    histogram: pd.DataFrame | None) -> tuple[LengthLaw, str, bool] | None:
    """(law, source, whether a built-in law stands in) of one measure of one pair, or None when none has it."""
    caps = scenario.prompt_caps()
    cap = prompt_cap_tokens(model, caps.get(klass)) if measure == "prompt" else \
        CONTEXT_TOKENS.get(model, DEFAULT_CONTEXT_TOKENS) - 1
    ingested = _ingested(histogram, model, klass, column)
    if ingested is not None:
        return ingested, INGESTED, False
    own, shared = scenario.declared_lengths(model, klass)
    for decl, where in ((getattr(own, column), f"models[{model}].workloads.{klass}.{column}"),
                        (getattr(shared, column), f"classes[{klass}].{column}")):
        if decl is not None:
            try:
                origin = f" ({TRACE_SOURCES[decl.law]})" if decl.law is not None else ""
                return _declared_law(decl, measure, model, cap), f"scenario {where}: {decl.describe()}{origin}", False
            except InputError as exc:
                raise InputError(exc.message, where=f"scenario, {where}", fix=exc.fix) from None
    if klass in BUILTIN_LAWS:
        return builtin_law(klass, measure, cap), f"{BUILTIN} {klass!r} ({TRACE_SOURCES[klass]})", True
    return None


def _reuse(scenario: Scenario, model: str, klass: str,
           lengths: ClassWorkload) -> tuple[ClassReuse | None, str, ClassWorkload, MeasuredReuse | None]:
    """The pair's prefix reuse (the model's declaration, else the class's), its source, the lengths under it (a
    shape fitted to measured sessions rescales the first turn's prompt) and the measured figures, if any."""
    own, shared = scenario.declared_lengths(model, klass)
    cap = prompt_cap_tokens(model, scenario.prompt_caps().get(klass))
    for decl, where in ((own.reuse, f"models[{model}].workloads.{klass}.reuse"), (shared.reuse,
                                                                                 f"classes[{klass}].reuse")):
        if decl is None:
            continue
        if decl.measured is not None:
            measured = _measured_series(decl.series or (), model, klass, f"scenario, {where}.measured")
            fitted = fit_measured_reuse(measured, lengths, cap)
            return fitted.reuse, f"scenario {where}: {decl.describe()}, {fitted.note}", fitted.lengths, measured
        user = _declared_law(decl.user_tokens, "prompt", model, cap) if decl.user_tokens is not None else None
        return (ClassReuse(cap, decl.system_prompt_tokens or 0, decl.variants, decl.turns or 0, decl.think_time_s,
                           user), f"scenario {where}: {decl.describe()}", lengths, None)
    return None, "none declared", lengths, None


def _measured_series(series: Iterable[MeasuredReuse], model: str, klass: str, where: str) -> MeasuredReuse:
    """The model's series of a measured file; a class's declaration with one series measured on another model
    lends it (its source names that model)."""
    every = list(series)
    for one in every:
        if one.model == model:
            return one
    if len(every) == 1:
        return every[0]
    raise InputError(f"the reuse file has series of class {klass!r} for {', '.join(s.model for s in every)}, "
                     f"not for {model}", where=where,
                     fix=f"declare the reuse for each model under [models.workloads.{klass}], or ingest {model}'s log")


def check_histogram(histogram: pd.DataFrame | None, scenario: Scenario) -> None:
    """Refuse a histogram whose columns or bins are broken, or that names a model or class the scenario lacks."""
    if histogram is None:
        return
    validate_histogram(histogram, where="--histogram")
    for column, known, what in (("model", scenario.model_names, "model"),
                                ("traffic_class", scenario.class_names, "traffic class")):
        unknown = sorted(set(histogram[column].astype(str)) - set(known))
        if unknown:
            raise InputError(f"the token histogram has lengths for {what}(s) {', '.join(unknown)}, which the "
                             "scenario does not declare", where=f"--histogram, column {column!r}",
                             fix=f"use the scenario's {what}s ({', '.join(known)}), or add them to the scenario")


def resolve_workloads(scenario: Scenario, mixes: Mapping[str, Mapping[str, float]], *,
                      histogram: pd.DataFrame | None = None, share_source: str = "scenario",
                      include_idle: bool = False) -> dict[tuple[str, str], Workload]:
    """The workload of every (model, class) with a positive share in ``mixes`` (model -> class -> share).

    Raises one InputError (exit 3) naming every pair with traffic that has no lengths. With
    ``include_idle``, a pair of a model in ``mixes`` with share 0 is included too when some source
    has its lengths (calibration gives such a class a capacity row by relative cost, its SLO unchecked).
    """
    check_histogram(histogram, scenario)
    result: dict[tuple[str, str], Workload] = {}
    missing: list[str] = []
    for model, mix in mixes.items():
        for klass in scenario.class_names:
            share = float(mix.get(klass, 0.0))
            if share <= 0 and not include_idle:
                continue
            found = {m: _law_and_source(scenario, model, klass, m, c, histogram) for m, c in MEASURES}
            absent = [c for m, c in MEASURES if found[m] is None]
            if absent:
                if share > 0:
                    missing.append(f"class {klass!r} of model {model!r} ({' and '.join(absent)})")
                continue
            (prompt, p_source, p_default), (output, o_source, o_default) = found["prompt"], found["output"]  # type: ignore[misc]
            source = p_source if p_source == o_source else f"prompt: {p_source}; output: {o_source}"
            lengths = ClassWorkload(prompt, output, source)
            defaulted = tuple(m for m, flag in (("prompt", p_default), ("output", o_default)) if flag)
            reuse, reuse_source, lengths, measured = _reuse(scenario, model, klass, lengths)
            result[(model, klass)] = Workload(model, klass, share, share_source, lengths, p_source, o_source,
                                              defaulted, reuse, reuse_source, measured)
    if missing:
        raise InputError(f"no token lengths for {'; '.join(missing)}", where="scenario, traffic classes",
                         fix="declare them on the class ([[classes]] prompt_tokens = { median = ..., p99 = ... }, "
                             "output_tokens = ...) or for the model ([models.workloads.<class>]), or pass the "
                             "--histogram that `planner ingest` wrote for this traffic")
    return result


MIX_STEPS = 100
"""Forecast mixes are rounded to whole percent: a month's small drift in the mix then keeps the calibration
(whose cache key holds the shares), and a class with any traffic keeps at least 1 %."""


def rounded_mix(weights: Mapping[str, float], steps: int = MIX_STEPS) -> dict[str, float]:
    """Shares proportional to ``weights`` in whole 1/``steps``, summing to exactly 1 (largest remainder), every
    positive weight at least one step (taken from the largest share)."""
    total = math.fsum(weights.values())
    exact = {k: steps * v / total for k, v in weights.items()}
    units = {k: math.floor(x) for k, x in exact.items()}
    by_remainder = sorted(exact, key=lambda k: (-(exact[k] - units[k]), list(exact).index(k)))
    for k in by_remainder[:steps - sum(units.values())]:
        units[k] += 1
    for k in [k for k, v in weights.items() if v > 0 and units[k] == 0]:
        largest = max(units, key=lambda j: (units[j], -list(units).index(j)))
        units[largest] -= 1
        units[k] = 1
    return {k: u / steps for k, u in units.items()}


def forecast_mixes(forecast: pd.DataFrame, models: Iterable[str],
                   classes: Iterable[str]) -> dict[str, dict[str, float]]:
    """Each model's class shares in the forecast: its mean requests per class over the horizon (every
    region) over all its mean requests, in whole percent (:func:`rounded_mix`). A model without forecast
    traffic gets no entry."""
    frame = forecast.assign(mean=pd.to_numeric(forecast["mean"], errors="coerce").fillna(0.0).clip(lower=0.0))
    totals = frame.groupby(["model", "traffic_class"], sort=True)["mean"].sum()
    class_names = list(classes)
    mixes: dict[str, dict[str, float]] = {}
    for model in models:
        per_class = {k: float(totals.get((model, k), 0.0)) for k in class_names}
        if math.fsum(per_class.values()) > 0:
            mixes[model] = rounded_mix(per_class)
    return mixes


def no_traffic_pairs(scenario: Scenario, mixes: Mapping[str, Mapping[str, float]]) -> list[tuple[str, str]]:
    """The (model, class) pairs with no share in ``mixes``, in scenario order."""
    return [(m, k) for m in scenario.model_names for k in scenario.class_names
            if float(mixes.get(m, {}).get(k, 0.0)) <= 0]


def default_notes(workloads: Mapping[tuple[str, str], Workload]) -> list[str]:
    """One line per pair whose lengths a built-in law stands in for: what the terminal and the outputs name."""
    return [f"{w.model} / {w.traffic_class}: {' and '.join(w.defaulted)} lengths from the built-in law "
            f"{w.traffic_class!r} (declare them in the scenario or pass --histogram to use your own)"
            for w in workloads.values() if w.defaulted and w.share > 0]


def reuse_notes(workloads: Mapping[tuple[str, str], Workload]) -> list[str]:
    """One line per pair whose prefix reuse is a shape fitted to measured figures (:mod:`planner.measured_reuse`)."""
    return [f"{w.model} / {w.traffic_class}: prefix reuse {w.reuse_source}"
            for w in workloads.values() if w.measured is not None and w.share > 0]

"""Declared token lengths: how a scenario states a class's prompt and output lengths.

A class (``[[classes]]``), or one model's view of it (``[models.workloads.<class>]``), may
declare ``prompt_tokens`` and ``output_tokens``, each in one of these forms:

* a built-in law by name, ``"interactive"`` or ``{ law = "interactive" }`` (the laws of
  :data:`planner.sim.workload.TRACE_FIGURES`, measured on public traces);
* a lognormal through its median and 99th percentile, ``{ median = 1020, p99 = 4142 }``;
* a lognormal by its mean and the σ of its logarithm, ``{ mean = 1155, sigma = 0.6 }``;
* a fixed length, ``512`` or ``{ fixed = 512 }``;
* weighted points, ``{ points = [[128, 3], [1024, 1]] }`` (tokens, relative weight);
* a histogram file, ``{ histogram = "lengths.csv" }`` with columns ``bin_lo_tokens``,
  ``bin_hi_tokens`` and ``count`` (a ``planner ingest`` histogram works: its ``model``,
  ``traffic_class`` and ``measure`` columns, when present, select the rows). The file is
  read by :func:`planner.scenario.load_scenario`, relative to the scenario file, into
  ``bins``.

Exactly one form per declaration. :mod:`planner.workloads` turns a declaration into a
length law and says where each length came from.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from planner.scenario.fields import Issue, Str, rule_error
from planner.scenario.regions import Frozen

BUILTIN_LAWS = ("interactive", "standard", "batch", "long-context")
"""The built-in laws by name (their figures and sources: :data:`planner.sim.workload.TRACE_FIGURES`)."""

Tokens = Annotated[int, Field(strict=True, ge=1)]
PositiveFloat = Annotated[float, Field(gt=0)]
FORMS = ("law", "median/p99", "mean/sigma", "fixed", "points", "histogram")


class LengthDecl(Frozen):
    """One declared token-length law (module docstring for the forms)."""

    law: Str | None = Field(default=None, description=f"a built-in law: {', '.join(BUILTIN_LAWS)}")
    median: PositiveFloat | None = Field(default=None, description="lognormal: median in tokens (with p99)")
    p99: PositiveFloat | None = Field(default=None, description="lognormal: 99th percentile in tokens (with median)")
    mean: PositiveFloat | None = Field(default=None, description="lognormal: mean in tokens (with sigma)")
    sigma: PositiveFloat | None = Field(default=None, description="lognormal: σ of ln(tokens) (with mean)")
    fixed: Tokens | None = Field(default=None, description="every request has this many tokens")
    points: tuple[tuple[Tokens, PositiveFloat], ...] | None = Field(
        default=None, description="(tokens, relative weight) pairs, e.g. [[128, 3], [1024, 1]]")
    histogram: Str | None = Field(default=None, description="a histogram CSV (bin_lo_tokens, bin_hi_tokens, count), "
                                                            "relative to the scenario file")
    bins: tuple[tuple[int, int, float], ...] | None = Field(
        default=None, description="the histogram's (bin_lo_tokens, bin_hi_tokens, count) rows, read at load time")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        """``512`` is ``{ fixed = 512 }``; ``"interactive"`` is ``{ law = "interactive" }``."""
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return {"fixed": value}
        if isinstance(value, str):
            return {"law": value}
        return value

    @model_validator(mode="after")
    def _one_form(self) -> LengthDecl:
        forms = [name for name, fields in (("law", ("law",)), ("median/p99", ("median", "p99")),
                                           ("mean/sigma", ("mean", "sigma")), ("fixed", ("fixed",)),
                                           ("points", ("points",)), ("histogram", ("histogram",)))
                 if any(getattr(self, f) is not None for f in fields)]
        fix = ("give exactly one of: law = \"interactive\", { median = ..., p99 = ... }, { mean = ..., sigma = ... }, "
               "fixed = N, points = [[tokens, weight], ...], histogram = \"file.csv\"")
        if len(forms) != 1:
            problem = "declares no length law" if not forms else f"mixes the forms {', '.join(forms)}"
            raise rule_error([Issue((), problem, fix)])
        form = forms[0]
        if form == "law" and self.law not in BUILTIN_LAWS:
            raise rule_error([Issue(("law",), f"no built-in law {self.law!r}",
                                    f"use one of {', '.join(BUILTIN_LAWS)}, or declare the lengths")])
        if form == "median/p99" and (self.median is None or self.p99 is None or self.p99 < self.median):
            raise rule_error([Issue((), "a lognormal by percentiles needs median and p99, with p99 >= median",
                                    "e.g. { median = 1020, p99 = 4142 }")])
        if form == "mean/sigma" and (self.mean is None or self.sigma is None):
            raise rule_error([Issue((), "a lognormal by moments needs mean and sigma",
                                    "e.g. { mean = 1155, sigma = 0.6 }")])
        if form == "points" and not self.points:
            raise rule_error([Issue(("points",), "has no points", "e.g. points = [[128, 3], [1024, 1]]")])
        return self

    @property
    def form(self) -> str:
        for name, field in (("law", "law"), ("median/p99", "median"), ("mean/sigma", "mean"), ("fixed", "fixed"),
                            ("points", "points"), ("histogram", "histogram")):
            if getattr(self, field) is not None:
                return name
        return ""

    def describe(self) -> str:
        """The declaration as the scenario wrote it, for sources and summaries."""
        if self.law is not None:
            return f"built-in law {self.law!r}"
        if self.median is not None:
            return f"lognormal median {self.median:g}, p99 {self.p99:g}"
        if self.mean is not None:
            return f"lognormal mean {self.mean:g}, sigma {self.sigma:g}"
        if self.fixed is not None:
            return f"fixed {self.fixed}"
        if self.points is not None:
            return f"{len(self.points)} weighted points"
        return f"histogram {self.histogram}"


class MeasuredReuse(Frozen):
    """One (model, class) series of a reuse file written by ``planner ingest`` (``<out>.reuse.json``): what an
    unbounded prefix cache would have served on the logged requests, and the logged sessions if any."""

    model: Str
    traffic_class: Str
    source: Str
    requests: Annotated[int, Field(strict=True, ge=1)]
    prompt_tokens: Annotated[int, Field(strict=True, ge=1)]
    ideal_cached_tokens: Annotated[int, Field(strict=True, ge=0)]
    requests_with_hit: Annotated[int, Field(strict=True, ge=0)]
    sessions: Annotated[int, Field(strict=True, ge=1)] | None = None
    turns_per_session_mean: Annotated[float, Field(ge=1)] | None = None
    think_time_mean_s: Annotated[float, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> MeasuredReuse:
        if self.ideal_cached_tokens > self.prompt_tokens or self.requests_with_hit > self.requests:
            raise rule_error([Issue((), "serves more than the log holds",
                                    "give ideal_cached_tokens <= prompt_tokens and requests_with_hit <= requests")])
        return self

    @property
    def ideal_share(self) -> float:
        return self.ideal_cached_tokens / self.prompt_tokens

    def describe(self) -> str:
        sessions = (f", {self.sessions:,} sessions of {self.turns_per_session_mean:.2f} turns"
                    if self.sessions is not None else "")
        return (f"{self.source}: {self.requests:,} requests of {self.model}, ideal share "
                f"{self.ideal_share:.1%}{sessions}")


class ReuseDecl(Frozen):
    """Declared prefix reuse of a class (``reuse = { ... }``): a shared system prompt, multi-turn sessions, or both;
    or the reuse measured from the class's logs.

    * ``system_prompt_tokens`` N in ``variants`` K: every request (every session, with sessions) starts with one of
      K system prompts of N tokens, drawn uniformly.
    * ``turns`` T with ``think_time_s``: requests come as conversations of T turns; a turn arrives an
      exponential think time after the previous one, and its prompt is the previous turn's prompt and answer plus
      ``user_tokens`` new tokens (default: the class's prompt law), so it starts with every block of the last.
      The class's prompt law is then the first turn's prompt.
    * ``measured``: a reuse file that ``planner ingest`` wrote (``<out>.reuse.json``), relative to the scenario
      file; read at load time into ``series`` (the file's series of this class). :mod:`planner.measured_reuse`
      fits one of the two shapes above to the (model, class)'s figures.
    """

    system_prompt_tokens: Annotated[int, Field(strict=True, ge=1)] | None = Field(
        default=None, description="tokens of the shared system prompt every request starts with")
    variants: Annotated[int, Field(strict=True, ge=1)] = Field(
        default=1, description="distinct system prompts, drawn uniformly per request (or per session)")
    turns: Annotated[int, Field(strict=True, ge=1)] | None = Field(
        default=None, description="turns per conversation (multi-turn sessions)")
    think_time_s: Annotated[float, Field(ge=0)] = Field(
        default=30.0, description="mean seconds from one turn's arrival to the next's (exponential)")
    user_tokens: LengthDecl | None = Field(
        default=None, description="new tokens a later turn adds (default: the class's prompt law)")
    measured: Str | None = Field(
        default=None, description="a reuse JSON written by `planner ingest`, relative to the scenario file")
    series: tuple[MeasuredReuse, ...] | None = Field(
        default=None, description="the measured file's series of this class, read at load time")

    @model_validator(mode="after")
    def _declares_reuse(self) -> ReuseDecl:
        declared = self.system_prompt_tokens is not None or self.turns is not None
        if self.measured is not None and (declared or self.user_tokens is not None or self.variants != 1):
            raise rule_error([Issue(("measured",), "is measured reuse, and the table also declares a shape",
                                    "keep measured alone, or drop it and declare system_prompt_tokens or turns")])
        if not declared and self.measured is None:
            raise rule_error([Issue((), "declares no reuse", "give system_prompt_tokens (and variants), turns "
                                                             "(and think_time_s), both, or measured = "
                                                             "\"<out>.reuse.json\"")])
        if self.turns is None and self.user_tokens is not None:
            raise rule_error([Issue(("user_tokens",), "applies to multi-turn sessions only", "set turns, or drop it")])
        return self

    def describe(self) -> str:
        if self.measured is not None:
            return f"measured in {self.measured}"
        parts = []
        if self.system_prompt_tokens is not None:
            parts.append(f"system prompt of {self.system_prompt_tokens} tokens in {self.variants} variant(s)")
        if self.turns is not None:
            parts.append(f"sessions of {self.turns} turns, {self.think_time_s:g} s apart")
        return "; ".join(parts)


class WorkloadDecl(Frozen):
    """A class's declared lengths and reuse (``[[classes]]`` fields, or ``[models.workloads.<class>]`` for one
    model)."""

    prompt_tokens: LengthDecl | None = Field(default=None, description="prompt length law (tokens)")
    output_tokens: LengthDecl | None = Field(default=None, description="output length law (tokens)")
    reuse: ReuseDecl | None = Field(default=None, description="prefix reuse: shared system prompt, sessions")

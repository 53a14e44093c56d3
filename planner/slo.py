"""The latency SLO metrics a traffic class may set, named once for the whole project.

Three p99 metrics, each measured at the serving region and each optional (a class sets at
least one; a model may override any of them for one class, ``Scenario.slo``):

* ``ttft``: time to first token (queue wait + prefill);
* ``tpot``: time per output token, (e2e − TTFT) / (output tokens − 1) of each request
  with more than one output token;
* ``e2e``: arrival to last token.

A metric that is not set is not checked anywhere: not by the simulator's verdicts, not by
calibration's predicate, not by the loop's derating. Every column or field that carries a
metric is named by the helpers below and in :mod:`planner.contracts.columns`, so adding a
metric is a member (and its label) in :class:`planner.contracts.SloMetric` and its
``<metric>_p99_ms`` field on :class:`ClassSlo` and the scenario's traffic class.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

from planner.contracts import SLO_METRIC_NAMES, SloMetric, met_column, p99_column, target_column, verdict_column

SLO_METRICS: tuple[str, ...] = SLO_METRIC_NAMES
"""Every SLO metric, in the order tables and messages list them (:class:`planner.contracts.SloMetric`)."""
SLO_LABELS: dict[str, str] = {metric.value: metric.label for metric in SloMetric}
"""How a metric is named in prose (report paragraphs, explanations)."""

__all__ = [
    "SLO_LABELS", "SLO_METRICS", "ClassSlo", "SloMetric", "describe_metrics", "met_column", "p99_column",
    "slo_field_names", "target_column", "target_field", "verdict_column",
]


def target_field(metric: str) -> str:
    """The scenario field that sets the metric's SLO: ``ttft_p99_ms``."""
    return f"{metric}_p99_ms"


def slo_field_names() -> tuple[str, ...]:
    """The scenario fields of every metric, in :data:`SLO_METRICS` order."""
    return tuple(target_field(m) for m in SLO_METRICS)


def describe_metrics(metrics: tuple[str, ...] | list[str], *, before_noun: bool = False) -> str:
    """'TTFT', 'TTFT and end to end', 'TTFT, TPOT and end to end' ('end-to-end' before a noun)."""
    labels = [SLO_LABELS[m].replace(" ", "-") if before_noun else SLO_LABELS[m] for m in metrics]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


@dataclass(frozen=True)
class ClassSlo:
    """The p99 targets (ms) of one traffic class for one model; None = not set, not checked."""

    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    e2e_p99_ms: float | None = None

    @classmethod
    def of(cls, source: object) -> ClassSlo:
        """The targets an object sets under the scenario's field names (a class or a model's override)."""
        return cls(**{name: getattr(source, name, None) for name in slo_field_names()})

    def target(self, metric: str) -> float | None:
        value: float | None = getattr(self, target_field(metric))
        return value

    def targets(self) -> Iterator[tuple[str, float]]:
        """(metric, target ms) for every metric that is set, in :data:`SLO_METRICS` order."""
        for metric in SLO_METRICS:
            value = self.target(metric)
            if value is not None:
                yield metric, float(value)

    def metrics(self) -> tuple[str, ...]:
        """The metrics that are set."""
        return tuple(metric for metric, _ in self.targets())

    def overridden_by(self, other: ClassSlo) -> ClassSlo:
        """These targets with every target ``other`` sets put in their place."""
        return ClassSlo(**{f.name: getattr(other, f.name) if getattr(other, f.name) is not None
                           else getattr(self, f.name) for f in fields(self)})

    def order_problem(self) -> str:
        """Why these targets cannot all hold ('' when they can): e2e must exceed TTFT when both are set."""
        if self.ttft_p99_ms is not None and self.e2e_p99_ms is not None and self.e2e_p99_ms <= self.ttft_p99_ms:
            return (f"e2e_p99_ms ({self.e2e_p99_ms:g}) must be greater than ttft_p99_ms ({self.ttft_p99_ms:g}): "
                    "the first token is part of the whole response")
        return ""

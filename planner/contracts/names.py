"""The fixed vocabularies shared by the catalog, the scenario and every table: tiers, zones,
clouds and SLO metrics.

Each is a :class:`~enum.StrEnum`, so a member is the very string the files hold
(``Tier.SPOT == "spot"``) and code that compares, hashes or formats the text keeps
working. The ``*_NAMES`` tuples are the plain strings in their canonical order, for code
that builds tables (a table holds text, never enum members).
"""

from __future__ import annotations

from enum import StrEnum


class Tier(StrEnum):
    """How GPUs are bought, in the order tables list them (cheapest commitment last)."""

    RESERVED = "reserved"
    ON_DEMAND = "on_demand"
    SPOT = "spot"


class Zone(StrEnum):
    """A residency zone: where a user's traffic may be served (the catalog's ``geo`` column,
    a scenario's ``zone`` and ``residency``)."""

    US = "us"
    CA = "ca"
    EU = "eu"
    APAC = "apac"
    ME = "me"
    SA = "sa"


class Cloud(StrEnum):
    """A cloud that sells GPUs: the catalog's ``cloud`` column and the part of a serving region
    key before the colon (``aws:us-east-1``)."""

    AWS = "aws"
    GCP = "gcp"
    NEBIUS = "nebius"
    LAMBDA = "lambda"


class SloMetric(StrEnum):
    """A p99 latency metric a traffic class may set a target for (see :mod:`planner.slo`)."""

    TTFT = "ttft"
    TPOT = "tpot"
    E2E = "e2e"

    @property
    def label(self) -> str:
        """How the metric is named in prose (report paragraphs, explanations)."""
        return _SLO_LABELS[self]


_SLO_LABELS = {SloMetric.TTFT: "TTFT", SloMetric.TPOT: "TPOT", SloMetric.E2E: "end to end"}

TIER_NAMES: tuple[str, ...] = tuple(tier.value for tier in Tier)
ZONE_NAMES: tuple[str, ...] = tuple(zone.value for zone in Zone)
CLOUD_NAMES: tuple[str, ...] = tuple(cloud.value for cloud in Cloud)
SLO_METRIC_NAMES: tuple[str, ...] = tuple(metric.value for metric in SloMetric)


def region_key(cloud: str, region: str) -> str:
    """The key of a cloud's region, as the catalog and the scenario write it: ``aws:us-east-1``."""
    return f"{cloud}:{region}"

"""Where users are, where replicas may run, the RTT between them, and residency.

A serving region is a cloud region replicas can be placed in (``aws:us-east-1``);
an origin is a user region that sends requests (``eu-west``). ``latency_ms`` is the
complete origin x serving RTT matrix. ``residency`` lists the zones an origin's
traffic may be served in; together with a class's ``latency_budget_ms`` it decides
which serving regions may take which traffic.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.scenario.fields import Issue, ServingKey, Sku, Slug, Str, Zone, duplicate_issues, rule_error


class Frozen(BaseModel):
    """Base for every scenario model: immutable, and unknown keys are errors.

    Enum fields (tiers, zones) keep the plain text value, not the enum member, so a loaded
    scenario compares, prints and serialises exactly as the file wrote it."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=True)


Gpus = Annotated[int, Field(strict=True, ge=0)]
Quotas = dict[Sku, Gpus]


class ServingRegion(Frozen):
    key: ServingKey = Field(description="serving region, '<cloud>:<region>', e.g. 'aws:us-east-1'")
    zone: Zone = Field(description="residency zone the region is in: us, ca, eu, apac, me or sa")
    quotas: Quotas = Field(
        default_factory=dict,
        description="GPU quota per SKU in this region, overriding capacity.quotas and the catalog",
    )


class Origin(Frozen):
    name: Slug = Field(description="user (origin) region name, e.g. 'us-east'")
    zone: Zone = Field(description="residency zone the users are in")
    residency: Annotated[tuple[Zone, ...], Field(min_length=1)] = Field(
        description="zones this origin's traffic may be served in, e.g. [\"eu\"]"
    )


class Regions(Frozen):
    serving: Annotated[tuple[ServingRegion, ...], Field(min_length=1)] = Field(
        description="where replicas may run"
    )
    origins: Annotated[tuple[Origin, ...], Field(min_length=1)] = Field(
        description="where requests come from"
    )
    latency_ms: dict[Str, dict[Str, Annotated[float, Field(strict=True, gt=0)]]] = Field(
        description="round-trip time in ms from each origin to each serving region"
    )

    @model_validator(mode="after")
    def _check_matrix_and_residency(self) -> Regions:
        keys = [region.key for region in self.serving]
        names = [origin.name for origin in self.origins]
        issues = [
            Issue(("serving", *i.path), i.problem, i.fix)
            for i in duplicate_issues(keys, "key", "serving region")
        ]
        issues += [
            Issue(("origins", *i.path), i.problem, i.fix) for i in duplicate_issues(names, "name", "origin")
        ]
        issues += _matrix_issues(self.latency_ms, names, keys)
        issues += _residency_issues(self)
        if issues:
            raise rule_error(issues)
        return self


def _matrix_issues(matrix: dict[str, dict[str, float]], names: list[str], keys: list[str]) -> list[Issue]:
    """Rows and columns must be declared origins and serving regions, and every pair present."""
    issues: list[Issue] = []
    for origin_name, row in matrix.items():
        if origin_name not in names:
            issues.append(
                Issue(
                    ("latency_ms", origin_name),
                    f"latency row for {origin_name!r}, which is not a declared origin",
                    f"declare it in [[regions.origins]] or remove the row (origins: {', '.join(names)})",
                )
            )
            continue
        issues += [
            Issue(
                ("latency_ms", origin_name, key),
                f"{key!r} is not a declared serving region",
                f"declare it in [[regions.serving]] or remove it (serving: {', '.join(keys)})",
            )
            for key in row
            if key not in keys
        ]
    for origin_name in dict.fromkeys(names):
        latencies = matrix.get(origin_name)
        if latencies is None:
            issues.append(
                Issue(
                    ("latency_ms", origin_name),
                    f"no latency row for origin {origin_name!r}",
                    f"add a [regions.latency_ms.{origin_name}] table with the RTT in ms to each "
                    f"serving region ({', '.join(keys)})",
                )
            )
            continue
        issues += [
            Issue(
                ("latency_ms", origin_name, key),
                f"no RTT from {origin_name!r} to {key!r}",
                f'add "{key}" = <RTT in ms> to [regions.latency_ms.{origin_name}]',
            )
            for key in dict.fromkeys(keys)
            if key not in latencies
        ]
    return issues


def _residency_issues(regions: Regions) -> list[Issue]:
    """Every origin's residency zones must contain at least one serving region."""
    serving_zones = {region.zone for region in regions.serving}
    return [
        Issue(
            ("origins", index, "residency"),
            f"origin {origin.name!r} may be served only in zones {list(origin.residency)}, "
            f"but no serving region is in any of them",
            f"add a serving region in one of {list(origin.residency)} or widen the residency",
        )
        for index, origin in enumerate(regions.origins)
        if not serving_zones.intersection(origin.residency)
    ]

"""The vocabulary of a scenario file: fixed names, typed scalars and rule errors.

Scalars are strict: TOML already gives numbers, booleans and strings their own
types, so a quoted number (``share = "0.5"``) or ``true`` where a number belongs is
a mistake worth reporting rather than silently coercing. Integers are accepted
where a float is expected (``weight = 2``).

Rules that span several fields (a sum, a uniqueness, a matrix that must be complete)
raise :func:`rule_error`: one pydantic error that carries every problem found, each
with a path relative to the model that raised it, its problem and its fix. The
loader expands them, so a file with five broken rules reports five lines.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Strict
from pydantic_core import PydanticCustomError

from planner.contracts import (
    CLOUD_NAMES,
    SCENARIO_HORIZON,
    TIER_NAMES,
    ZONE_NAMES,
    DurationError,
    duration_hours,
    parse_duration,
)
from planner.contracts import FORECAST_QUANTILES as FORECAST_QUANTILES
from planner.contracts import Tier as Tier
from planner.contracts import Zone as Zone
from planner.sim.policies.registry import policy_names

# Fixed names shared by the whole project (catalog, profiles, placement, reports). Tiers, zones
# and clouds are enums of planner.contracts; the scenario models store their plain text values
# (``use_enum_values``), so a loaded scenario holds the same strings as before.
Sku = Literal["A100-40GB", "A100-80GB", "H100", "H200", "B200", "B300", "L40S", "L4", "MI300X"]
Engine = Literal["vllm", "sglang", "trtllm"]
TpDegree = Literal[1, 2, 4, 8]

SKU_NAMES: tuple[str, ...] = get_args(Sku)
ZONES: tuple[str, ...] = ZONE_NAMES
POLICY_NAMES: tuple[str, ...] = policy_names()  # when this module loads; PolicyName checks the registry as it is
TIERS: tuple[str, ...] = TIER_NAMES
ENGINES: tuple[str, ...] = get_args(Engine)
TP_DEGREES: tuple[int, ...] = get_args(TpDegree)
CLOUDS: tuple[str, ...] = CLOUD_NAMES

Float = Annotated[float, Strict()]
Int = Annotated[int, Strict()]
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_REGION = re.compile(r"^[a-z0-9][a-z0-9-]*$")
MAX_HORIZON_HOURS = 366 * 24
"""A plan covers at most a year: catalog prices, quotas and an hourly demand model mean little further
out, and every planned hour is a period (or part of one) of the integer program."""


@dataclass(frozen=True)
class Issue:
    """One broken rule: ``path`` is relative to the model whose validator found it."""

    path: tuple[str | int, ...]
    problem: str
    fix: str


def rule_error(issues: list[Issue]) -> PydanticCustomError:
    """Bundle every broken cross-field rule of one model into a single pydantic error."""
    summary = "; ".join(issue.problem for issue in issues)
    return PydanticCustomError("scenario_rule", "{summary}", {"summary": summary, "issues": tuple(issues)})


def custom_error(kind: str, problem: str, fix: str) -> PydanticCustomError:
    return PydanticCustomError(kind, "{problem}", {"problem": problem, "fix": fix})


def _check_slug(value: str) -> str:
    if not _SLUG.match(value):
        raise custom_error(
            "scenario_name",
            f"{value!r} is not a valid name",
            "use lowercase letters, digits, '.', '_' or '-', starting with a letter or digit "
            "(e.g. 'us-east', 'llama-3.1-8b')",
        )
    return value


def _check_serving_key(value: str) -> str:
    cloud, sep, region = value.partition(":")
    if not sep or not region:
        raise custom_error(
            "serving_key",
            f"{value!r} is not a serving region key",
            "write it as '<cloud>:<region>', e.g. 'aws:us-east-1' or 'gcp:europe-west4'",
        )
    if cloud not in CLOUDS:
        raise custom_error(
            "serving_key",
            f"unknown cloud {cloud!r} in {value!r}",
            f"use one of: {', '.join(CLOUDS)}",
        )
    if not _REGION.match(region):
        raise custom_error(
            "serving_key",
            f"region {region!r} in {value!r} is not a cloud region name",
            "use the cloud's own lowercase region name, e.g. 'us-east-1', 'europe-west4', 'eu-north1'",
        )
    return value


def _check_horizon(value: str) -> str:
    try:
        hours = horizon_to_hours(value)
    except DurationError:
        raise custom_error(
            "horizon",
            f"{value!r} is not a horizon",
            "write a whole number followed by h (hours), d (days) or w (weeks), e.g. '14d'",
        ) from None
    if hours > MAX_HORIZON_HOURS:
        raise custom_error(
            "horizon",
            f"{value!r} is {hours:,} hours, more than the {MAX_HORIZON_HOURS:,}-hour (one year) bound",
            "plan at most a year ahead, e.g. '14d', '4w' or '366d'",
        )
    return value


def _check_term(value: str) -> str:
    try:
        hours = horizon_to_hours(value)
    except DurationError:
        hours = 0
    if hours < 1:
        raise custom_error(
            "reserved_term",
            f"{value!r} is not a commitment term",
            "write a whole number followed by h (hours), d (days) or w (weeks), e.g. '365d' for one year",
        )
    return value


def horizon_to_hours(value: str) -> int:
    """Hours of a scenario horizon such as '14d' (336); :class:`DurationError` when it is not one."""
    return duration_hours(parse_duration(value, SCENARIO_HORIZON))


def _check_policy(value: str) -> str:
    names = policy_names()
    if value not in names:
        close = difflib.get_close_matches(value.lower(), names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise custom_error("policy", f"unknown policy {value!r}", f"{hint}use one of: {', '.join(names)}")
    return value


Slug = Annotated[str, Strict(), AfterValidator(_check_slug)]
PolicyName = Annotated[str, Strict(), AfterValidator(_check_policy)]
ServingKey = Annotated[str, Strict(), AfterValidator(_check_serving_key)]
Horizon = Annotated[str, Strict(), AfterValidator(_check_horizon)]
Term = Annotated[str, Strict(), AfterValidator(_check_term)]


def duplicate_issues(names: list[str], field: str, what: str) -> list[Issue]:
    """One issue per repeated name, pointing at the later item and naming the first."""
    first_seen: dict[str, int] = {}
    issues: list[Issue] = []
    for index, name in enumerate(names):
        if name in first_seen:
            issues.append(
                Issue(
                    (index, field),
                    f"{what} {name!r} is declared twice (first at index {first_seen[name]})",
                    f"give each {what} a distinct {field}, or merge the two entries",
                )
            )
        else:
            first_seen[name] = index
    return issues

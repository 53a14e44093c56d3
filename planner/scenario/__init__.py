"""Scenario files: the regions, latency, residency, models, traffic classes, policy and
capacity rules one planning run works under.

``load_scenario(path)`` reads and validates a TOML file once and returns a frozen
:class:`Scenario`; every problem in the file is reported together by
:class:`ScenarioError`. ``check_against_data`` then checks the scenario against the
catalog offers and model profiles.
"""

from planner.scenario.data_check import check_against_data, usable_profiles
from planner.scenario.fields import (
    CLOUDS,
    FORECAST_QUANTILES,
    POLICY_NAMES,
    SKU_NAMES,
    TIERS,
    ZONES,
)
from planner.scenario.loading import ScenarioError, load_scenario, parse_scenario
from planner.scenario.model import (
    Admission,
    Capacity,
    ModelSpec,
    Policy,
    PolicyParams,
    Scenario,
    Seeds,
    SloOverride,
    TrafficClass,
)
from planner.scenario.regions import Origin, Regions, ServingRegion

__all__ = [
    "CLOUDS",
    "FORECAST_QUANTILES",
    "POLICY_NAMES",
    "SKU_NAMES",
    "TIERS",
    "ZONES",
    "Admission",
    "Capacity",
    "ModelSpec",
    "Origin",
    "Policy",
    "PolicyParams",
    "Regions",
    "Scenario",
    "ScenarioError",
    "Seeds",
    "ServingRegion",
    "SloOverride",
    "TrafficClass",
    "check_against_data",
    "usable_profiles",
    "load_scenario",
    "parse_scenario",
]

"""Shared names: the enums are the strings the files hold, and quantile columns parse both ways."""

from __future__ import annotations

import pytest

from planner.catalog import GEOS, TIERS
from planner.contracts import (
    CLOUD_NAMES,
    SLO_METRIC_NAMES,
    TIER_NAMES,
    ZONE_NAMES,
    Cloud,
    SloMetric,
    Tier,
    Zone,
    quantile_column,
    quantile_columns,
    quantile_level,
)
from planner.placement.instance import TIERS as PLACEMENT_TIERS
from planner.scenario import CLOUDS, ZONES
from planner.scenario import TIERS as SCENARIO_TIERS
from planner.slo import SLO_LABELS, SLO_METRICS


def test_enum_members_are_the_strings_in_the_files():
    assert Tier.ON_DEMAND == "on_demand" and f"{Tier.SPOT}" == "spot" and {"spot": 1}[Tier.SPOT] == 1
    assert Zone("eu") is Zone.EU and Cloud("aws") is Cloud.AWS and SloMetric("e2e") is SloMetric.E2E
    assert all(type(name) is str for name in (*TIER_NAMES, *ZONE_NAMES, *CLOUD_NAMES, *SLO_METRIC_NAMES))


def test_every_module_uses_the_one_vocabulary():
    assert TIERS == SCENARIO_TIERS == PLACEMENT_TIERS == TIER_NAMES == ("reserved", "on_demand", "spot")
    assert GEOS == ZONES == ZONE_NAMES and CLOUDS == CLOUD_NAMES
    assert SLO_METRICS == SLO_METRIC_NAMES == ("ttft", "tpot", "e2e")
    assert SLO_LABELS == {"ttft": "TTFT", "tpot": "TPOT", "e2e": "end to end"}


def test_a_loaded_scenario_holds_plain_strings_not_enum_members(tmp_path):
    from placement_helpers import two_region_case

    scenario = two_region_case().scenario
    zones = [r.zone for r in scenario.regions.serving] + [z for o in scenario.regions.origins for z in o.residency]
    assert zones and all(type(z) is str for z in zones)
    assert all(type(t) is str for t in scenario.capacity.tiers)


@pytest.mark.parametrize(("level", "column"), [(0.5, "q50"), (0.05, "q5"), (0.975, "q97.5"), (0.29, "q29"),
                                               (0.999, "q99.9")])
def test_quantile_column_names_parse_back_to_their_level(level, column):
    assert quantile_column(level) == column
    assert quantile_level(column) == pytest.approx(100 * level)


def test_quantile_columns_are_found_and_ordered_by_level():
    assert quantile_columns(["ts", "q99", "mean", "q5", "q97.5", "q50", "qx", "q"]) == ["q5", "q50", "q97.5", "q99"]
    assert quantile_level("mean") is None and quantile_level("q1e3") is None

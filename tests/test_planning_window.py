"""The planning window: a calendar month in hours, and placement folding exactly the window's hours.

``planner report`` plans its month whatever the scenario's horizon says; ``planner plan``
keeps the horizon (the path without a window).
"""

from __future__ import annotations

import pandas as pd
import pytest
from placement_helpers import START, two_region_case

from planner.errors import InputError
from planner.loop.pipeline import forecast_hours_to
from planner.placement.periods import demand_from_forecast, parse_periods
from planner.placement.place import place_plan
from planner.placement.window import PlanningWindow
from planner.report.period import (
    check_as_of,
    check_history_fresh,
    check_month,
    history_gap_days,
    month_window,
    previous_month_window,
)

INTERACTIVE = ("us-east", "llama-3.1-8b", "interactive")
BATCH = ("us-east", "llama-3.1-8b", "batch")


@pytest.mark.parametrize(("month", "hours", "last"), [
    ("2026-10", 31 * 24, "2026-10-31T23:00:00Z"),  # the October DST change does not exist in UTC
    ("2026-11", 30 * 24, "2026-11-30T23:00:00Z"),
    ("2027-02", 28 * 24, "2027-02-28T23:00:00Z"),
    ("2028-02", 29 * 24, "2028-02-29T23:00:00Z"),
    ("2026-12", 31 * 24, "2026-12-31T23:00:00Z"),
])
def test_a_month_is_every_hour_from_its_first_instant_to_the_next_months(month, hours, last):
    window = month_window(month)
    assert window.start == pd.Timestamp(f"{month}-01T00:00:00Z")
    assert window.hours == hours == len(window.hour_starts())
    assert window.describe().endswith(f"to {last} ({hours} hours)")
    assert window.end == window.last_hour + pd.Timedelta(hours=1)


def test_the_previous_month_crosses_a_year():
    assert previous_month_window("2027-01") == month_window("2026-12")


@pytest.mark.parametrize("text", ["2026-11\n", "2026-11 ", " 2026-11", "2026-13", "2026-00", "2026-1", "26-11",
                                  "2026-11-01", "2026/11", ""])
def test_a_month_is_matched_whole(text):
    with pytest.raises(InputError) as info:
        check_month(text)
    assert info.value.where == "--month" and "YYYY-MM" in info.value.message


def test_as_of_may_be_before_the_month_but_not_after_its_first_instant():
    window = month_window("2026-11")
    assert check_as_of(pd.Timestamp("2026-10-25T00:00:00Z"), window) == pd.Timestamp("2026-10-25T00:00:00Z")
    assert check_as_of(window.start, window) == window.start
    with pytest.raises(InputError, match="after the first instant of the month") as info:
        check_as_of(pd.Timestamp("2026-11-01T01:00:00Z"), window)
    assert info.value.where == "--as-of"


def test_history_gap_and_the_seven_day_rule():
    window = month_window("2027-01")
    last = pd.Timestamp("2026-10-31T23:00:00Z")
    assert history_gap_days(pd.Timestamp("2026-12-31T23:00:00Z"), window) == 0.0
    assert history_gap_days(pd.Timestamp("2026-12-24T23:00:00Z"), window) == 7.0  # exactly 7: still fresh enough
    assert check_history_fresh(pd.Timestamp("2026-12-24T23:00:00Z"), window, "2027-01", allow_stale=False) == 7.0
    with pytest.raises(InputError) as info:
        check_history_fresh(last, window, "2027-01", allow_stale=False, where="h.parquet")
    message = str(info.value)
    assert "2026-10-31T23:00:00Z" in message and "2027-01-01T00:00:00Z" in message and "h.parquet" in message
    assert "--allow-stale-history" in info.value.fix
    assert check_history_fresh(last, window, "2027-01", allow_stale=True) == 61.0


def test_the_forecast_runs_from_the_history_to_the_end_of_the_window():
    window = month_window("2026-11")
    assert forecast_hours_to(window, pd.Timestamp("2026-10-31T23:00:00Z")) == 720
    assert forecast_hours_to(window, pd.Timestamp("2026-10-24T23:00:00Z")) == 720 + 7 * 24  # the gap, then the month
    with pytest.raises(InputError, match="inside or after the planning window"):
        forecast_hours_to(window, pd.Timestamp("2026-11-01T00:00:00Z"))
    with pytest.raises(InputError, match="more than the forecast"):
        forecast_hours_to(window, pd.Timestamp("2026-06-30T23:00:00Z"))


def _hours(n: int) -> dict[tuple[str, str, str], list[float]]:
    return {INTERACTIVE: [1.0 + h for h in range(n)], BATCH: [0.5] * n}


def test_placement_folds_exactly_the_windows_hours_whatever_the_horizon():
    case = two_region_case(_hours(96))
    scenario = case.scenario.model_copy(update={"horizon": "24h"})
    window = PlanningWindow(START + pd.Timedelta(hours=24), START + pd.Timedelta(hours=72))
    demand = demand_from_forecast(case.forecast, scenario, 0.95, parse_periods("hourly"), window=window)
    assert (demand.forecast_hours_used, demand.forecast_hours_given) == (48, 96)
    assert (demand.periods.first_ts[0], demand.periods.first_ts[-1]) == ("2026-11-03T00:00:00Z", "2026-11-04T23:00:00Z")
    assert demand.rps[0, 0, 0].tolist() == pytest.approx([1.0 + h for h in range(24, 72)])
    without = demand_from_forecast(case.forecast, scenario, 0.95, parse_periods("hourly"))
    assert without.forecast_hours_used == 24 and without.periods.first_ts[0] == "2026-11-02T00:00:00Z"


def test_a_forecast_that_misses_an_hour_of_the_window_is_refused():
    case = two_region_case(_hours(48))
    window = PlanningWindow(START + pd.Timedelta(hours=24), START + pd.Timedelta(hours=72))
    with pytest.raises(InputError, match="covers 24 of the 48 hours the plan needs from 2026-11-03") as info:
        demand_from_forecast(case.forecast, case.scenario, 0.95, parse_periods("hourly"), window=window)
    assert "2026-11-04T00:00:00Z" in info.value.message


def test_a_plan_placed_for_a_window_covers_its_hours():
    case = two_region_case(_hours(96))
    assert case.scenario.horizon_hours == 96  # without the window, all 96 forecast hours would be planned
    window = PlanningWindow(START + pd.Timedelta(hours=24), START + pd.Timedelta(hours=72))
    result = place_plan(case.scenario, case.forecast, case.catalog, case.profiles, capacity=case.capacity,
                        baselines=False, gap=0.0, periods="hourly", window=window)
    assert result.meta["demand"]["forecast_hours_used"] == 48 and result.meta["demand"]["hours"] == 48.0
    assert result.periods["first_ts"].iloc[0] == "2026-11-03T00:00:00Z" and len(result.periods) == 48


def test_a_window_is_whole_utc_hours():
    with pytest.raises(ValueError, match="on the hour"):
        PlanningWindow(pd.Timestamp("2026-11-01T00:30:00Z"), pd.Timestamp("2026-11-02T00:00:00Z"))
    with pytest.raises(ValueError, match="tz-aware"):
        PlanningWindow(pd.Timestamp("2026-11-01"), pd.Timestamp("2026-11-02"))
    with pytest.raises(ValueError, match="at or before"):
        PlanningWindow(pd.Timestamp("2026-11-02T00:00:00Z"), pd.Timestamp("2026-11-01T00:00:00Z"))

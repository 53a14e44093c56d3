"""The one duration parser accepts and rejects what the three option-specific parsers did.

The expected values are what the old parsers returned (a regex and a unit table each):
``--duration``/``--sim-duration`` (seconds), ``--horizon`` (hours, 1..2208) and a
scenario's ``horizon`` (hours). None means rejected.
"""

from __future__ import annotations

import pytest

from planner.cli.app import parse_duration_s
from planner.contracts import (
    HORIZON_OPTION,
    SCENARIO_HORIZON,
    SIMULATED_WINDOW,
    DurationError,
    duration_hours,
    duration_seconds,
    parse_duration,
)
from planner.errors import InputError
from planner.forecast.run import parse_horizon
from planner.scenario.fields import horizon_to_hours

WINDOWS = [
    ("30min", 1800.0), ("1h", 3600.0), ("900s", 900.0), ("30m", 1800.0), ("1.5h", 5400.0), ("0.5min", 30.0),
    (" 30 min ", 1800.0), ("10 s", 10.0), ("2.25h", 8100.0), ("1.15min", 69.0), ("0.7h", 2520.0), ("0.1s", 0.1),
    ("1.1s", 1.1), ("0.3min", 18.0), ("12.345min", 740.7), ("1.23456789s", 1.23456789),
    ("0s", None), ("0.0h", None), ("-1h", None), ("1H", None), ("30 MIN", None), ("1d", None), ("1e3s", None),
    ("abc", None), ("", None), ("1.h", None), (".5h", None), ("30sec", None),
    # beyond what a pandas.Timedelta holds (about 292 years); the old parser returned 3.6e14 s
    ("99999999999h", None),
]

HORIZON_OPTIONS = [
    ("14d", 336), ("36h", 36), ("2w", 336), ("14D", 336), (" 14 d ", 336), ("014d", 336), ("1W", 168),
    ("2208h", 2208), ("92d", 2208), ("1h", 1),
    ("0h", None), ("0d", None), ("2209h", None), ("93d", None), ("1.5d", None), ("-1d", None), ("14", None),
    ("d", None), ("14days", None), ("14m", None), ("99999999999w", None),
]

SCENARIO_HORIZONS = [
    ("14d", 336), ("36h", 36), ("2w", 336), ("2209h", 2209), ("93d", 2232), ("4w", 672), ("1h", 1),
    ("14D", None), (" 14 d ", None), ("014d", None), ("0h", None), ("0d", None), ("1.5d", None), ("-1d", None),
    ("14", None), ("1W", None), ("14m", None), ("14 d", None),
]


@pytest.mark.parametrize(("text", "seconds"), WINDOWS)
def test_simulated_window(text, seconds):
    if seconds is None:
        with pytest.raises(InputError, match="not a positive duration"):
            parse_duration_s(text)
    else:
        assert parse_duration_s(text) == seconds
        assert duration_seconds(parse_duration(text, SIMULATED_WINDOW)) == seconds


@pytest.mark.parametrize(("text", "hours"), HORIZON_OPTIONS)
def test_horizon_option(text, hours):
    if hours is None:
        with pytest.raises(InputError, match="horizon"):
            parse_horizon(text)
    else:
        assert parse_horizon(text) == hours


@pytest.mark.parametrize(("text", "hours"), SCENARIO_HORIZONS)
def test_scenario_horizon(text, hours):
    if hours is None:
        with pytest.raises(DurationError):
            parse_duration(text, SCENARIO_HORIZON)
    else:
        assert duration_hours(parse_duration(text, SCENARIO_HORIZON)) == hours
        assert horizon_to_hours(text) == hours


def test_out_of_range_horizon_is_rejected_with_the_bound():
    with pytest.raises(InputError, match=r"horizon 2209 h is outside 1\.\.2208 h"):
        parse_horizon("2209h")


def test_syntaxes_differ_only_where_the_options_did():
    assert duration_hours(parse_duration("014d", HORIZON_OPTION)) == 336
    with pytest.raises(DurationError):
        parse_duration("014d", SCENARIO_HORIZON)
    with pytest.raises(DurationError):
        parse_duration("1.5h", HORIZON_OPTION)

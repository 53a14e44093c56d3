"""The time-left estimate of long runs (``planner.pace``), on a clock the test moves."""

from __future__ import annotations

import pytest

from planner.pace import Remaining, duration_text


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_pace_is_measured_from_the_first_report_so_cached_items_do_not_count():
    clock = Clock()
    remaining = Remaining(clock)
    assert remaining.seconds_left(3, 10) is None  # three units answered from the cache, reported at once
    clock.now += 20.0  # the first simulated unit takes 20 s
    assert remaining.seconds_left(4, 10) == pytest.approx(20.0 * 6)
    clock.now += 10.0  # 30 s for two units
    assert remaining.seconds_left(5, 10) == pytest.approx(15.0 * 5)
    assert remaining.text(10, 10, "units") == "10 of 10 units"


def test_two_units_finishing_together_on_two_workers_keep_the_pace():
    clock = Clock()
    remaining = Remaining(clock)
    clock.now += 60.0
    assert remaining.text(1, 6, "units") == "1 of 6 units"  # nothing timed yet
    clock.now += 60.0
    remaining.seconds_left(2, 6)
    clock.now += 0.01
    assert remaining.seconds_left(3, 6) == pytest.approx(60.01 / 2 * 3)
    assert remaining.text(3, 6, "units") == "3 of 6 units, about 2 min left"


@pytest.mark.parametrize(("seconds", "text"), [(0.2, "1 s"), (40, "40 s"), (59.4, "59 s"), (150, "2 min"),
                                               (3600 + 5 * 60, "1 h 05 min")])
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text

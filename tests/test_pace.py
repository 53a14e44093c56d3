"""The time-left estimate of long runs (``planner.pace``), on a clock the test moves."""

from __future__ import annotations

import pytest

from planner.pace import Remaining, duration_text


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_pace_starts_after_the_opening_burst_of_items_answered_at_once():
    clock = Clock()
    remaining = Remaining(clock)
    for done in (1, 2, 3):  # three cached units, reported together
        assert remaining.seconds_left(done, 10) is None
        clock.now += 0.01
    clock.now += 20.0  # the first simulated unit takes 20 s
    assert remaining.seconds_left(4, 10) == pytest.approx(20.01 * 6)
    clock.now += 10.0  # the pace is now 30.01 s for two units
    assert remaining.seconds_left(5, 10) == pytest.approx(30.01 / 2 * 5)
    assert remaining.text(10, 10) == "10 of 10"


def test_two_units_finishing_together_on_two_workers_keep_the_pace():
    clock = Clock()
    remaining = Remaining(clock)
    remaining.seconds_left(0, 6)
    clock.now += 60.0
    remaining.seconds_left(1, 6)
    clock.now += 0.01  # the second worker's unit, a moment later: counted, not a burst
    assert remaining.seconds_left(2, 6) == pytest.approx(60.01 / 2 * 4)
    assert remaining.text(2, 6, "units") == "2 of 6 units, about 2 min left"


@pytest.mark.parametrize(("seconds", "text"), [(0.2, "1 s"), (40, "40 s"), (59.4, "59 s"), (150, "2 min"),
                                               (3600 + 5 * 60, "1 h 05 min")])
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text

"""How long the rest of a run of similar items will take, from the pace of the items done so far.

The pace is measured from the first report: items already done then (answered at once, e.g.
units found in the calibration cache, which a run reports together before any work) say
nothing about how long an item takes. With d items done since the first report, t seconds
ago, the n items left take about n · t / d.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Remaining:
    """``text(done, total, "units")``: "3 of 15 units, about 2 min left" (no estimate before an item is timed)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._first: tuple[float, int] | None = None

    def seconds_left(self, done: int, total: int) -> float | None:
        now = self._clock()
        if self._first is None:
            self._first = (now, done)
        start, done_then = self._first
        if done >= total:
            return 0.0
        if done <= done_then:
            return None
        return (now - start) / (done - done_then) * (total - done)

    def text(self, done: int, total: int, noun: str = "") -> str:
        left = self.seconds_left(done, total)
        count = f"{done} of {total}" + (f" {noun}" if noun else "")
        if left is None or done >= total:
            return count
        return f"{count}, about {duration_text(left)} left"


def duration_text(seconds: float) -> str:
    """A rough duration: "40 s", "3 min", "1 h 05 min"."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"

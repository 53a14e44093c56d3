"""How long the rest of a run of similar items will take, from the pace of the items done so far.

A run that answers some items at once (units already in the calibration cache) reports them
first, in a burst; they say nothing about how long a simulated item takes. So the pace is
measured from the last report of that opening burst: reports that arrive within
:data:`BURST_S` of the previous one, before any item has taken longer, move the baseline
forward instead of counting. With d items done since the baseline in t seconds, the n items
left take about n · t / d.
"""

from __future__ import annotations

import time
from collections.abc import Callable

BURST_S = 0.25


class Remaining:
    """``text(done, total, "units")``: "3 of 15 units, about 2 min left" (no estimate before the first timed item)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._baseline: tuple[float, int] | None = None
        self._last = 0.0
        self._timing = False

    def seconds_left(self, done: int, total: int) -> float | None:
        now = self._clock()
        if self._baseline is None or (not self._timing and now - self._last < BURST_S):
            self._baseline = (now, done)
        else:
            self._timing = True
        self._last = now
        start, done_then = self._baseline
        if done <= done_then or done >= total:
            return None if done < total else 0.0
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

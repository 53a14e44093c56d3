"""The planning window: the hours a plan covers, ``[start, end)`` in whole UTC hours.

``planner plan`` plans the scenario's ``horizon`` from the first hour after the history;
``planner report --month M`` plans exactly month M, from its first instant to the first
instant of the next month (28 to 31 days), whatever the scenario's horizon says. The
window is what placement folds into periods (``periods.demand_from_forecast``) and what
the report's header states.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass

import pandas as pd

HOUR = pd.Timedelta(hours=1)


def iso_hour(stamp: pd.Timestamp) -> str:
    """A UTC timestamp as ``YYYY-MM-DDTHH:MM:SSZ``, the form every planner file uses."""
    return f"{stamp.tz_convert('UTC'):%Y-%m-%dT%H:%M:%SZ}"


@dataclass(frozen=True)
class PlanningWindow:
    """Whole UTC hours from ``start`` (included) to ``end`` (excluded)."""

    start: pd.Timestamp
    end: pd.Timestamp

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            stamp = getattr(self, name)
            if not isinstance(stamp, pd.Timestamp) or stamp.tzinfo is None:
                raise ValueError(f"the window's {name} must be a tz-aware pandas Timestamp, got {stamp!r}")
            if stamp != stamp.floor("h"):
                raise ValueError(f"the window's {name} {stamp} is not on the hour")
            object.__setattr__(self, name, stamp.tz_convert("UTC"))
        if self.end <= self.start:
            raise ValueError(f"the window ends ({self.end}) at or before it starts ({self.start})")

    @classmethod
    def month(cls, year: int, month: int) -> PlanningWindow:
        """Every hour of one calendar month: its first instant to the first instant of the next (UTC)."""
        _, days = calendar.monthrange(year, month)
        start = pd.Timestamp(year=year, month=month, day=1, tz="UTC")
        return cls(start, start + pd.Timedelta(days=days))

    @property
    def hours(self) -> int:
        return int((self.end - self.start) / HOUR)

    @property
    def last_hour(self) -> pd.Timestamp:
        """The start of the window's last hour."""
        return self.end - HOUR

    def hour_starts(self) -> pd.DatetimeIndex:
        return pd.date_range(self.start, self.end, freq="h", inclusive="left")

    def describe(self) -> str:
        """``2026-11-01T00:00:00Z to 2026-11-30T23:00:00Z (720 hours)``: first and last hour."""
        return f"{iso_hour(self.start)} to {iso_hour(self.last_hour)} ({self.hours} hours)"

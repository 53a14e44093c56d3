"""The month a report plans, and whether the demand history is recent enough to plan it from.

``planner report --month M`` plans every hour of M: from its first instant (UTC) to the
first instant of M + 1 (``PlanningWindow.month``). Its "now" (``--as-of``) defaults to
M's first instant and may be earlier (a report prepared ahead), never later: a plan
for the whole month starts from a forecast of its first hour.

The history is *stale* by the time between its end (the end of its last hour) and the
month's first instant. Up to ``STALE_HISTORY_DAYS`` the forecast simply starts earlier
and bridges the gap; beyond it the run stops (exit 3), unless the caller allows it, and
then the report lists the gap as a high risk.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from planner.errors import InputError
from planner.placement.window import HOUR, PlanningWindow, iso_hour

MONTH_PATTERN = re.compile(r"\d{4}-(0[1-9]|1[0-2])")
"""``YYYY-MM``, month 01 to 12; always matched whole (``fullmatch``: no trailing newline or space)."""
YEARS = (1970, 2199)
"""The years a report month may fall in: hourly timestamps (and the month before, which the report compares
with) exist from 1677 to 2262 only, and traffic histories begin after 1970."""
STALE_HISTORY_DAYS = 7.0
DAY = pd.Timedelta(days=1)


def check_month(text: str, where: str = "--month") -> str:
    """``text`` if it is exactly ``YYYY-MM`` with a month 01-12; an input error otherwise."""
    if not isinstance(text, str) or MONTH_PATTERN.fullmatch(text) is None:
        raise InputError(f"{text!r} is not YYYY-MM (a year and a month 01-12)", where=where,
                         fix="pass e.g. --month 2026-11")
    if not YEARS[0] <= int(text[:4]) <= YEARS[1]:
        raise InputError(f"{text!r} is outside the years a report can plan ({YEARS[0]}-{YEARS[1]})", where=where,
                         fix="pass the month of the history's year, e.g. --month 2026-11")
    return text


def month_window(month: str) -> PlanningWindow:
    """Every hour of ``month`` (``YYYY-MM``)."""
    year, number = check_month(month).split("-")
    return PlanningWindow.month(int(year), int(number))


def previous_month_window(month: str) -> PlanningWindow:
    """Every hour of the month before ``month``."""
    start = month_window(month).start - DAY
    return PlanningWindow.month(start.year, start.month)


def check_as_of(as_of: pd.Timestamp, window: PlanningWindow) -> pd.Timestamp:
    """``as_of`` unless it falls after the month's first instant (the plan must start from a forecast of it)."""
    if as_of > window.start:
        raise InputError(f"{as_of.tz_convert('UTC'):%Y-%m-%dT%H:%M:%SZ} is after the first instant of the month "
                         f"({iso_hour(window.start)}): the report plans the whole month from a forecast of its "
                         "first hour", where="--as-of",
                         fix=f"leave --as-of out (it defaults to {iso_hour(window.start)}) or pass an earlier one")
    return as_of


def month_notes(month: str, window: PlanningWindow, newest_hour: pd.Timestamp, today: pd.Timestamp) -> list[str]:
    """What the terminal says about a month that is not the next one: one planned more than a month before the
    history's newest hour (the report then plans from the history as it stood, leaving the later hours out), and
    one that has begun or ended by ``today`` (the clock: a plan for it can no longer be bought in time). The clock is
    read for this notice only, never for the report's figures."""
    notes = []
    ahead = (newest_hour + HOUR - window.start) / DAY
    if ahead > 31:
        notes.append(f"{month} starts {ahead:,.0f} days before the history's newest hour ({iso_hour(newest_hour)}): "
                     "the report plans it from the history as it stood then, and leaves the later hours out")
    if today >= window.start:
        state = "ended" if today >= window.end else "began"
        notes.append(f"{month} {state} before today ({today:%Y-%m-%d}): this is a plan for a month already under way "
                     "or past, useful as a backtest, too late to buy capacity for")
    return notes


def history_gap_days(history_end: pd.Timestamp, window: PlanningWindow) -> float:
    """Days from the end of the history's last hour (``history_end`` is its start) to the window's first instant."""
    return float((window.start - (history_end + HOUR)) / DAY)


def check_history_fresh(history_end: pd.Timestamp, window: PlanningWindow, month: str, *, allow_stale: bool,
                        where: str | Path = "history") -> float:
    """The history's gap in days; an input error when it exceeds ``STALE_HISTORY_DAYS`` and stale is not allowed."""
    gap = history_gap_days(history_end, window)
    if gap > STALE_HISTORY_DAYS and not allow_stale:
        raise InputError(
            f"the demand history ends {gap:.1f} days before the month it should plan: its last hour is "
            f"{iso_hour(history_end)}, and {month} starts {iso_hour(window.start)} (at most "
            f"{STALE_HISTORY_DAYS:g} days are bridged by the forecast)", where=where,
            fix=f"pass a history that reaches within {STALE_HISTORY_DAYS:g} days of the month, or add "
                "--allow-stale-history to plan from it anyway (the report then lists the gap as a high risk)")
    return gap

"""One parser for every duration a user writes (``30min``, ``14d``, ``2w``), on :class:`pandas.Timedelta`.

Options differ in what they accept: a simulated window may be fractional and in seconds,
a horizon is whole hours, days or weeks. A :class:`DurationSyntax` says what one input
accepts; :func:`parse_duration` checks the text against it and lets pandas do the
arithmetic. The caller owns the message, since only it knows the option or field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd


class DurationError(ValueError):
    """The text is not a duration in the syntax asked for (or is too long to represent)."""


@dataclass(frozen=True)
class DurationSyntax:
    """What one input accepts.

    ``units`` maps each suffix as written to its :class:`pandas.Timedelta` unit;
    ``fractions`` allows ``1.5h``; ``spaces`` allows blanks around the number and unit;
    ``any_case`` allows ``14D``; ``leading_zero`` allows ``0`` and ``014d``.
    """

    units: Mapping[str, str]
    fractions: bool = False
    spaces: bool = False
    any_case: bool = False
    leading_zero: bool = True
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        first = r"\d" if self.leading_zero else "[1-9]"
        number = first + r"\d*" + (r"(?:\.\d+)?" if self.fractions else "")
        # longest suffix first, so 'min' is not read as 'm' followed by 'in'
        units = "|".join(re.escape(u) for u in sorted(self.units, key=len, reverse=True))
        blank = r"\s*" if self.spaces else ""
        object.__setattr__(self, "pattern", re.compile(f"{blank}({number}){blank}({units}){blank}"))


SIMULATED_WINDOW = DurationSyntax(units={"s": "s", "m": "min", "min": "min", "h": "h"}, fractions=True, spaces=True)
"""A simulated window on the command line: ``900s``, ``30min`` (or ``30m``), ``1.5h``."""
HORIZON_OPTION = DurationSyntax(units={"h": "h", "d": "D", "w": "W"}, spaces=True, any_case=True)
"""A forecast horizon on the command line: ``36h``, ``14d``, ``2w`` (blanks and upper case allowed)."""
SCENARIO_HORIZON = DurationSyntax(units={"h": "h", "d": "D", "w": "W"}, leading_zero=False)
"""A scenario's horizon, written exactly: ``14d``, ``4w``, ``336h``."""


def parse_duration(text: str, syntax: DurationSyntax) -> pd.Timedelta:
    """The duration ``text`` writes in ``syntax``, or :class:`DurationError`."""
    written = str(text).lower() if syntax.any_case else str(text)
    match = syntax.pattern.fullmatch(written)
    if match is None:
        raise DurationError(f"not a duration: {text!r}")
    number, suffix = match.group(1), match.group(2)
    try:
        amount: float | int = float(number) if syntax.fractions else int(number)
        return pd.Timedelta(amount, unit=syntax.units[suffix])
    except (OverflowError, ValueError) as exc:  # beyond what a Timedelta holds (about 292 years)
        raise DurationError(f"duration too long: {text!r}") from exc


def duration_hours(duration: pd.Timedelta) -> int:
    """Whole hours of a duration (``14d`` -> 336)."""
    return int(duration // pd.Timedelta(hours=1))


def duration_seconds(duration: pd.Timedelta) -> float:
    """Seconds of a duration, as the quotient of two nanosecond counts (no float noise: 1.23456789s)."""
    return float(duration / pd.Timedelta(seconds=1))

"""Forecast quantile columns: one name per quantile level, and the level back from a name.

A forecast file has one column per quantile level it provisions for. Every module that
reads or writes those columns goes through these two functions, so ``0.975`` is ``q97.5``
everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_QUANTILE_COLUMN = re.compile(r"^q(\d+(?:\.\d+)?)$")

FORECAST_QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)
"""The levels a forecast writes by default, and the ones a scenario may provision for."""

DEFAULT_MAX_GROWTH = 2.0
"""No forecast value above this multiple of its series' largest observed hour unless ``--max-growth`` allows it
(:mod:`planner.forecast.growth`): about a doubling of traffic within a forecast's horizon (at most 92 days), which a
history that does not show it cannot support."""


def quantile_column(level: float) -> str:
    """The forecast column of a quantile level: 0.5 -> ``q50``, 0.05 -> ``q5``, 0.975 -> ``q97.5``.

    The percentage is rounded to 6 decimals first, so that float noise (0.29 * 100 =
    28.999999999999996) names the level the user wrote.
    """
    pct = round(100.0 * level, 6)
    return f"q{int(pct)}" if float(pct).is_integer() else f"q{pct:g}"


def quantile_level(column: object) -> float | None:
    """The percentage a quantile column names (``q97.5`` -> 97.5), or None for any other column."""
    match = _QUANTILE_COLUMN.match(str(column))
    return float(match.group(1)) if match else None


def quantile_columns(columns: Iterable[object]) -> list[str]:
    """The quantile columns among ``columns``, in increasing level."""
    levels = {str(c): level for c in columns if (level := quantile_level(c)) is not None}
    return sorted(levels, key=levels.__getitem__)

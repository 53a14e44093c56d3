"""Names shared by the files planner reads and writes, defined once.

A forecast file has one column per quantile level it provisions for, named by
:func:`quantile_column`; every module that reads or writes those columns uses it, so
``0.975`` is ``q97.5`` everywhere.
"""

from __future__ import annotations


def quantile_column(level: float) -> str:
    """The forecast column of a quantile level: 0.5 -> ``q50``, 0.05 -> ``q5``, 0.975 -> ``q97.5``.

    The percentage is rounded to 6 decimals first, so that float noise (0.29 * 100 =
    28.999999999999996) names the level the user wrote.
    """
    pct = round(100.0 * level, 6)
    return f"q{int(pct)}" if float(pct).is_integer() else f"q{pct:g}"

"""The named windows of a demand series: its trough, the one definition every caller shares.

``planner simulate --window trough`` (on flows or on a forecast) and the plan loop's trough
window (:mod:`planner.loop.windows`) must pick the same period, so the rule lives here once:
the trough is the period with the least total demand *above zero*. A period with no demand
at all has nothing to check (no pool serves it), so it is never the trough.
"""

from __future__ import annotations

import pandas as pd

PEAK = "peak"
TROUGH = "trough"
WINDOW_CHOICES = f"'{PEAK}', '{TROUGH}' or an ISO-8601 hour such as 2026-11-02T18:00:00Z"
"""What ``--window`` accepts, for help texts and error fixes."""


def trough_period(totals: pd.Series) -> str | None:
    """The label of the least total above zero (the first of equal minima, in ``totals``' order); None if none.

    ``totals`` is the total demand per period (or hour), indexed by its label.
    """
    busy = [(float(total), index, str(label)) for index, (label, total) in enumerate(totals.items()) if total > 0]
    return min(busy)[2] if busy else None

"""Physical ceilings on demand figures: a value above one is a data error, not traffic.

A request log or a demand history can carry a number no fleet could ever see (an hour of
1e30 requests, a prompt of 1e12 tokens): a unit mix-up, an overflow or a corrupt file.
Taking it as real would make every later step plan for it. These ceilings are far above
anything real, so a value above one is refused as an input error naming its row; a large
but possible value (a launch spike) passes and is reported as a data-quality finding by
the forecaster instead (``planner.forecast.quality``).
"""

from __future__ import annotations

MAX_REQUESTS_PER_HOUR = 1e9
"""Per (region, model, traffic class) series: about 280,000 requests per second for one model in
one region and class, some hundred times the largest public LLM API loads reported per region."""

MAX_TOKENS_PER_REQUEST = 10_000_000
"""The longest context window any served model offers (10M tokens); a prompt or an output
above it cannot have been served."""

MAX_TOKENS_PER_HOUR = MAX_REQUESTS_PER_HOUR * MAX_TOKENS_PER_REQUEST
"""Token sums per series and hour: the two ceilings above together."""


def ceiling_for(measure: str) -> float:
    """The largest believable value per series and hour of a demand-history measure."""
    return MAX_REQUESTS_PER_HOUR if measure == "requests" else MAX_TOKENS_PER_HOUR

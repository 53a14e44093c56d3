"""One schema per file format the planner reads, each reporting every problem at once.

* :mod:`.catalog`: ``skus.csv`` and ``offers.csv``;
* :mod:`.capacity`: the capacity table placement reads;
* :mod:`.histogram`: the token-length histogram;
* :mod:`.profiles`: the model profile and model tables;
* :mod:`.tables`: the demand history, the forecast, the plan and routed demand.

Imported on its own (``planner.contracts.schemas``), not by ``planner.contracts``; ``pandera``
itself loads when the first schema is built, so a command that checks no file does not pay for it.
"""

from __future__ import annotations

from planner.contracts.schemas.base import (
    MAX_PROBLEMS_SHOWN,
    FileSchema,
    Problem,
    cell_check,
    raise_problems,
    row_check,
)
from planner.contracts.schemas.capacity import capacity_schema
from planner.contracts.schemas.catalog import SKU_UNITS, offer_schema, parse_count, parse_number, sku_schema
from planner.contracts.schemas.histogram import HISTOGRAM_FIX, histogram_schema
from planner.contracts.schemas.tables import (
    FORECAST_FIX,
    FORECAST_TS_FIX,
    HISTORY_TS_FIX,
    ORDER_TOLERANCE,
    PARSED_TS,
    count_check,
    forecast_schema,
    history_schema,
    number_schema,
    plan_schema,
    show,
)

__all__ = [
    "FORECAST_FIX", "FORECAST_TS_FIX", "HISTOGRAM_FIX", "HISTORY_TS_FIX", "MAX_PROBLEMS_SHOWN", "ORDER_TOLERANCE",
    "PARSED_TS", "SKU_UNITS", "FileSchema", "Problem", "capacity_schema", "cell_check", "count_check",
    "forecast_schema", "histogram_schema", "history_schema", "number_schema", "offer_schema", "parse_count",
    "parse_number", "plan_schema", "raise_problems", "row_check", "show", "sku_schema",
]

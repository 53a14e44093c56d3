"""One schema per file format the planner reads, each reporting every problem at once.

Imported on its own (``planner.contracts.schemas``), not by ``planner.contracts``, so
that code needing only names does not load ``pandera``.
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
from planner.contracts.schemas.catalog import SKU_UNITS, offer_schema, parse_count, parse_number, sku_schema

__all__ = [
    "MAX_PROBLEMS_SHOWN", "SKU_UNITS", "FileSchema", "Problem", "cell_check", "offer_schema", "parse_count",
    "parse_number", "raise_problems", "row_check", "sku_schema",
]

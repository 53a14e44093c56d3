"""The report model: sections of paragraphs, bullets, tables and charts, independent of format.

The builder produces a :class:`ReportModel` from the inputs (pure); the renderers
turn one model into Markdown, HTML and JSON, and the writer puts every table behind
a chart into ``tables/<name>.csv``. A chart never holds data of its own: it names the
table it draws, so the CSV is exactly what the chart shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

SECTION_KEYS = ("summary", "forecast", "accuracy", "plan", "cost", "slo", "policies", "changes", "risks")
STATUS_OK, STATUS_NO_DATA, STATUS_PARTIAL = "ok", "no_data", "partial"


@dataclass(frozen=True)
class Table:
    """A table with units in its column names; written to ``tables/<name>.csv``."""

    name: str
    title: str
    frame: pd.DataFrame
    caption: str = ""
    show: bool = True  # False: chart data only, written as CSV and JSON but not printed in Markdown/HTML
    display: tuple[str, ...] = ()  # columns printed in Markdown/HTML when not all of them (CSV/JSON have all)


@dataclass(frozen=True)
class Chart:
    """A chart of one table: ``kind`` selects the drawing in ``charts.py``; ``options`` name its columns."""

    name: str
    title: str
    kind: str
    table: str
    options: dict[str, Any] = field(default_factory=dict)
    alt: str = ""


@dataclass
class Section:
    key: str
    title: str
    status: str = STATUS_OK
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def no_data(self, reason: str) -> Section:
        """Mark the section empty with an honest reason (shown as "No data yet: <reason>")."""
        self.status = STATUS_NO_DATA
        self.paragraphs.append(f"No data yet: {reason}")
        return self

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)


@dataclass
class ReportModel:
    """One report. ``period``: the hours the plan covers, ``{first_hour, last_hour, hours}`` (None: not known);
    ``what_if``: the run's changes to its inputs (``--set``, ``--demand-scale``), empty for the inputs as they are."""

    month: str
    as_of: str
    scenario_name: str
    title: str
    sections: list[Section]
    facts: dict[str, Any] = field(default_factory=dict)
    period: dict[str, Any] | None = None
    what_if: list[str] = field(default_factory=list)

    def section(self, key: str) -> Section:
        return next(s for s in self.sections if s.key == key)

    def tables(self) -> list[Table]:
        return [t for s in self.sections for t in s.tables]

    def charts(self) -> list[Chart]:
        return [c for s in self.sections for c in s.charts]

    def find_table(self, name: str) -> Table:
        return next(t for t in self.tables() if t.name == name)


def plain(value: Any) -> Any:
    """A JSON-safe value: numpy scalars to Python, NaN/inf to None, containers recursively."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts with JSON-safe values, in the frame's order."""
    columns = [str(c) for c in frame.columns]
    return [dict(zip(columns, (plain(v) for v in row), strict=True)) for row in frame.itertuples(index=False)]

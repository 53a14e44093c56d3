"""Render a report model as Markdown, one self-contained HTML file, and JSON.

The three carry the same facts. Markdown links each chart as ``charts/<name>.png``;
the HTML embeds the same PNGs as ``data:image/png;base64`` URIs and has no other
external reference (styles inline, no scripts, no fonts to fetch), so it can be mailed
or archived as one file; JSON has every shown table in full, for machines (a table that
only feeds a chart, such as the hourly forecast chart data, is named with its CSV path
and row count, and its rows are left to the CSV).

Markdown and HTML come from the Jinja templates in ``planner/report/templates``; this
module prepares what they show (:class:`TableView`: the rows and columns printed, each
cell formatted) and holds the escaping rules.

Each output differs between two runs on the same inputs in exactly one line: the
"generated at" line (``generated_at`` in JSON). Tables in Markdown and HTML show at most
``MAX_ROWS`` rows and say where the full table is; the CSV and the JSON are complete.
"""

from __future__ import annotations

import base64
import html
import json
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from planner import __version__
from planner.report.model import STATUS_NO_DATA, STATUS_OK, ReportModel, Table, frame_records, plain

MAX_ROWS = 40
WRAP_CHARS = 40  # text columns longer than this may break anywhere; shorter ones (keys) break at spaces only
WIDE_COLUMNS = 12  # a table with more columns is set smaller, so that it fits a 1,280 px page
JSON_SCHEMA_VERSION = 1
TEMPLATE_PACKAGE = "planner.report"
MARKDOWN_TEMPLATE = "report.md.j2"
HTML_TEMPLATE = "report.html.j2"


def generated_line(generated_at: str) -> str:
    return f"Generated at {generated_at} by planner {__version__}."


def meta_line(model: ReportModel) -> str:
    """The header line under the title: the month, the hours planned (first and last), as-of and scenario."""
    period = model.period
    planned = (f"plans {period['first_hour']} to {period['last_hour']} ({period['hours']} hours)" if period
               else "hours planned not reported")
    changed = f"; what-if: {', '.join(model.what_if)}" if model.what_if else ""
    return f"Month {model.month}; {planned}; as of {model.as_of}; scenario {model.scenario_name}{changed}."


def format_cell(column: str, value: Any) -> str:
    """A table cell as text, thousands separated: ``_pct``/``_ms`` 1 decimal; USD whole dollars from $1,000, else
    cents; other numbers whole from 1,000, else up to 3 decimals."""
    value = plain(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if column.endswith(("_pct", "_ms")):
            return f"{value:,.1f}"
        if "usd" in column:
            return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.2f}"
        if value.is_integer() or abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return str(value)


def status_badge(status: str) -> str:
    """The label shown beside a section's title; empty for a section with data."""
    if status == STATUS_OK:
        return ""
    return "no data yet" if status == STATUS_NO_DATA else "partial"


@dataclass(frozen=True)
class TableView:
    """A table as Markdown and HTML print it: at most ``MAX_ROWS`` rows, the display columns, cells as text.

    ``more`` says what was left out and where to find it (empty when nothing was); ``numeric``
    marks right-aligned columns and ``wraps`` the text columns long enough to wrap.
    """

    name: str
    title: str
    caption: str
    more: str
    columns: tuple[str, ...]
    numeric: tuple[bool, ...]
    wraps: tuple[bool, ...]
    rows: tuple[tuple[str, ...], ...]


def _is_number(frame: pd.DataFrame, column: str) -> bool:
    return bool(pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(frame[column]))


def _wraps(frame: pd.DataFrame, column: str) -> bool:
    return bool(len(frame) and frame[column].astype(str).str.len().max() > WRAP_CHARS)


def table_view(table: Table) -> TableView:
    """What Markdown and HTML print of ``table``: its display columns, its first ``MAX_ROWS`` rows, cells as text."""
    frame = table.frame
    notes = []
    if table.display:
        frame = frame[[c for c in table.display if c in frame.columns]]
        notes.append(f"More columns in tables/{table.name}.csv.")
    if len(frame) > MAX_ROWS:
        frame = frame.head(MAX_ROWS)
        notes.append(f"Showing {MAX_ROWS} of {len(table.frame)} rows; every row is in tables/{table.name}.csv.")
    columns = tuple(str(c) for c in frame.columns)
    numeric = tuple(_is_number(frame, c) for c in columns)
    rows = tuple(tuple(format_cell(c, v) for c, v in zip(columns, row, strict=True))
                 for row in frame.itertuples(index=False))
    return TableView(name=table.name, title=table.title, caption=table.caption, more=" ".join(notes),
                     columns=columns, numeric=numeric,
                     wraps=tuple(not n and _wraps(frame, c) for c, n in zip(columns, numeric, strict=True)),
                     rows=rows)


def _shown_tables(model: ReportModel) -> dict[str, list[TableView]]:
    """Per section key, the views of the tables printed in Markdown and HTML (chart-only tables are not)."""
    return {s.key: [table_view(t) for t in s.tables if t.show] for s in model.sections}


# ---------------------------------------------------------------------------------- templates
def markdown_escape(text: str) -> str:
    """Text safe inside a Markdown table cell: pipes escaped, line breaks as spaces."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_alignment(numeric: bool) -> str:
    return "---:" if numeric else "---"


def html_escape(value: Any) -> Markup:
    """Escape a value for HTML unless it is markup already.

    The report has always escaped with :func:`html.escape`, which spells quotes as ``&quot;`` and
    ``&#x27;``; markupsafe's own escaping spells them ``&#34;`` and ``&#39;``. Escaping here, as the
    environment's ``finalize``, keeps every output byte as it was, while autoescape still guarantees
    that nothing reaches the page unescaped.
    """
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value)))


def break_at_underscores(column: str) -> Markup:
    """A column name that may break after each underscore (``<wbr>``), so long names wrap in narrow headers."""
    return Markup(html.escape(column).replace("_", "_<wbr>"))


def _environment(autoescape: bool) -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader(TEMPLATE_PACKAGE, "templates"),
        autoescape=autoescape, finalize=html_escape if autoescape else None,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    environment.filters.update(markdown_cell=markdown_escape, markdown_alignment=markdown_alignment,
                               break_at_underscores=break_at_underscores)
    environment.globals.update(status_badge=status_badge, wide_columns=WIDE_COLUMNS)
    return environment


@cache
def markdown_environment() -> jinja2.Environment:
    return _environment(autoescape=False)


@cache
def html_environment() -> jinja2.Environment:
    return _environment(autoescape=True)


# ---------------------------------------------------------------------------------- Markdown and HTML
def render_markdown(model: ReportModel, generated_at: str) -> str:
    """The report as Markdown, ending in exactly one newline."""
    text = markdown_environment().get_template(MARKDOWN_TEMPLATE).render(
        model=model, generated=generated_line(generated_at), meta=meta_line(model), tables=_shown_tables(model))
    return text.rstrip("\n") + "\n"


def render_html(model: ReportModel, generated_at: str, pngs: dict[str, bytes]) -> str:
    """One self-contained HTML page; ``pngs`` maps chart name to its PNG bytes."""
    images = {c.name: base64.b64encode(pngs[c.name]).decode("ascii") for c in model.charts()}
    return html_environment().get_template(HTML_TEMPLATE).render(
        model=model, generated=generated_line(generated_at), meta=meta_line(model), tables=_shown_tables(model),
        images=images)


# ---------------------------------------------------------------------------------- JSON
def report_payload(model: ReportModel, generated_at: str) -> dict[str, Any]:
    sections = []
    for section in model.sections:
        sections.append({
            "key": section.key, "title": section.title, "status": section.status,
            "paragraphs": list(section.paragraphs), "bullets": list(section.bullets), "facts": plain(section.facts),
            "tables": [{"name": t.name, "title": t.title, "caption": t.caption, "csv": f"tables/{t.name}.csv",
                        "columns": [str(c) for c in t.frame.columns], "n_rows": len(t.frame),
                        "rows": frame_records(t.frame) if t.show else None}
                       for t in section.tables],
            "charts": [{"name": c.name, "title": c.title, "kind": c.kind, "table": c.table,
                        "png": f"charts/{c.name}.png", "options": plain(c.options)} for c in section.charts],
        })
    return {"report": "planner monthly capacity report", "schema_version": JSON_SCHEMA_VERSION,
            "generated_at": generated_at, "planner_version": __version__, "month": model.month,
            "as_of": model.as_of, "period": plain(model.period), "scenario": model.scenario_name, "title": model.title,
            "what_if": list(model.what_if), "facts": plain(model.facts), "sections": sections}


def render_json(model: ReportModel, generated_at: str) -> str:
    return json.dumps(report_payload(model, generated_at), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

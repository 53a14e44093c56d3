"""Render a report model as Markdown, one self-contained HTML file, and JSON.

The three carry the same facts. Markdown links each chart as ``charts/<name>.png``;
the HTML embeds the same PNGs as ``data:image/png;base64`` URIs and has no other
external reference (styles inline, no scripts, no fonts to fetch), so it can be mailed
or archived as one file; JSON has every shown table in full, for machines (a table that
only feeds a chart, such as the hourly forecast chart data, is named with its CSV path
and row count, and its rows are left to the CSV).

Each output differs between two runs on the same inputs in exactly one line: the
"generated at" line (``generated_at`` in JSON). Tables in Markdown and HTML show at most
``MAX_ROWS`` rows and say where the full table is; the CSV and the JSON are complete.
"""

from __future__ import annotations

import base64
import html
import json
import math
from typing import Any

import pandas as pd

from planner import __version__
from planner.report.model import STATUS_NO_DATA, ReportModel, Section, Table, frame_records, plain

MAX_ROWS = 40
NUM_CLASS = ' class="num"'
WRAP_CLASS = ' class="wrap"'
WRAP_CHARS = 40  # text columns longer than this wrap; shorter ones (keys) never break
JSON_SCHEMA_VERSION = 1
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;margin:0;color:#1d2330;
background:#f6f7f9;line-height:1.45}
main{max-width:1100px;margin:0 auto;padding:24px 32px 48px;background:#fff}
h1{font-size:1.6rem;margin:0 0 4px}h2{font-size:1.25rem;margin:36px 0 8px;padding-top:8px;border-top:2px solid #e3e6eb}
h3{font-size:1rem;margin:18px 0 6px;color:#333}
.generated,.meta{color:#5b6472;font-size:.85rem;margin:2px 0}
nav ol{columns:2;font-size:.9rem;padding-left:20px}nav a{color:#1f5fae;text-decoration:none}
.status{display:inline-block;font-size:.75rem;font-weight:600;padding:1px 8px;border-radius:9px;margin-left:8px;
vertical-align:middle}.status.no_data{background:#fff3cd;color:#7a5b00}.status.partial{background:#e7f0ff;color:#1f5fae}
.table-wrap{overflow-x:auto;margin:6px 0 4px}
table{border-collapse:collapse;font-size:.8rem;min-width:50%}
th,td{padding:3px 7px;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
td{white-space:nowrap}td.wrap{white-space:normal;min-width:260px}
th{background:#f0f2f5;font-weight:600;white-space:normal;vertical-align:bottom}
tr:nth-child(even) td{background:#fafbfc}td.num{text-align:right;white-space:nowrap;
font-variant-numeric:tabular-nums}
.caption,.more{color:#5b6472;font-size:.8rem;margin:2px 0 10px}
figure{margin:12px 0}figure img{max-width:100%;height:auto;border:1px solid #e3e6eb}
figcaption{color:#5b6472;font-size:.8rem}
ul.bullets li{margin:2px 0}
"""


def generated_line(generated_at: str) -> str:
    return f"Generated at {generated_at} by planner {__version__}."


def meta_line(model: ReportModel) -> str:
    """The header line under the title: the month, the hours planned (first and last), as-of and scenario."""
    period = model.period
    planned = (f"plans {period['first_hour']} to {period['last_hour']} ({period['hours']} hours)" if period
               else "hours planned not reported")
    return f"Month {model.month}; {planned}; as of {model.as_of}; scenario {model.scenario_name}."


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


def _is_number(frame: pd.DataFrame, column: str) -> bool:
    return pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(frame[column])


def _shown(table: Table) -> tuple[pd.DataFrame, str]:
    frame = table.frame
    notes = []
    if table.display:
        frame = frame[[c for c in table.display if c in frame.columns]]
        notes.append(f"More columns in tables/{table.name}.csv.")
    if len(frame) > MAX_ROWS:
        frame = frame.head(MAX_ROWS)
        notes.append(f"Showing {MAX_ROWS} of {len(table.frame)} rows; every row is in tables/{table.name}.csv.")
    return frame, " ".join(notes)


# ---------------------------------------------------------------------------------- Markdown
def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> list[str]:
    frame, more = _shown(table)
    columns = [str(c) for c in frame.columns]
    lines = [f"**{table.title}** (`tables/{table.name}.csv`)", ""]
    lines.append("| " + " | ".join(_md_escape(c) for c in columns) + " |")
    lines.append("|" + "|".join("---:" if _is_number(frame, c) else "---" for c in columns) + "|")
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_md_escape(format_cell(c, v)) for c, v in zip(columns, row, strict=True))
                     + " |")
    if not columns:
        lines = lines[:2]
    extra = " ".join(t for t in (table.caption, more) if t)
    return [*lines, *([""] + [f"_{extra}_"] if extra else []), ""]


def render_markdown(model: ReportModel, generated_at: str) -> str:
    lines = [f"# {model.title}", "", generated_line(generated_at), "", meta_line(model), ""]
    for section in model.sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.paragraphs:
            lines += [paragraph, ""]
        if section.bullets:
            lines += [f"- {b}" for b in section.bullets] + [""]
        for chart in section.charts:
            lines += [f"![{chart.alt or chart.title}](charts/{chart.name}.png)", "",
                      f"_Chart data: `tables/{chart.table}.csv`._", ""]
        for table in section.tables:
            lines += _md_table(table) if table.show else []
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------- HTML
def _html_table(table: Table) -> str:
    frame, more = _shown(table)
    columns = [str(c) for c in frame.columns]
    numeric = {c: _is_number(frame, c) for c in columns}
    wrap = {c: not numeric[c] and frame[c].astype(str).str.len().max() > WRAP_CHARS for c in columns} if len(
        frame) else {}
    head = "".join(f"<th>{html.escape(c).replace('_', '_<wbr>')}</th>" for c in columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = "".join(f"<td{NUM_CLASS if numeric[c] else WRAP_CLASS if wrap[c] else ''}>"
                        f"{html.escape(format_cell(c, v))}</td>"
                        for c, v in zip(columns, row, strict=True))
        body.append(f"<tr>{cells}</tr>")
    parts = [f"<h3>{html.escape(table.title)}</h3>",
             f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>',
             *body, "</tbody></table></div>"]
    note = " ".join(t for t in (table.caption, more, f"Data: tables/{table.name}.csv.") if t)
    parts.append(f'<p class="caption">{html.escape(note)}</p>')
    return "\n".join(parts)


def _html_section(section: Section, pngs: dict[str, bytes]) -> str:
    badge = "" if section.status == "ok" else (
        f' <span class="status {section.status}">{"no data yet" if section.status == STATUS_NO_DATA else "partial"}'
        "</span>")
    parts = [f'<section id="{section.key}">', f"<h2>{html.escape(section.title)}{badge}</h2>"]
    parts += [f"<p>{html.escape(p)}</p>" for p in section.paragraphs]
    if section.bullets:
        parts.append('<ul class="bullets">' + "".join(f"<li>{html.escape(b)}</li>" for b in section.bullets) + "</ul>")
    for chart in section.charts:
        data = base64.b64encode(pngs[chart.name]).decode("ascii")
        parts.append(f'<figure><img alt="{html.escape(chart.alt or chart.title)}" '
                     f'src="data:image/png;base64,{data}"><figcaption>{html.escape(chart.title)}. Data: '
                     f"tables/{html.escape(chart.table)}.csv.</figcaption></figure>")
    parts += [_html_table(t) for t in section.tables if t.show]
    parts.append("</section>")
    return "\n".join(parts)


def render_html(model: ReportModel, generated_at: str, pngs: dict[str, bytes]) -> str:
    """One self-contained HTML page; ``pngs`` maps chart name to its PNG bytes."""
    nav = "".join(f'<li><a href="#{s.key}">{html.escape(s.title)}</a></li>' for s in model.sections)
    body = "\n".join(_html_section(s, pngs) for s in model.sections)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(model.title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        f"<h1>{html.escape(model.title)}</h1>",
        f'<p class="generated">{html.escape(generated_line(generated_at))}</p>',
        f'<p class="meta">{html.escape(meta_line(model))}</p>',
        f"<nav><ol>{nav}</ol></nav>",
        body,
        "</main>",
        "</body>",
        "</html>",
    ]) + "\n"


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
            "facts": plain(model.facts), "sections": sections}


def render_json(model: ReportModel, generated_at: str) -> str:
    return json.dumps(report_payload(model, generated_at), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

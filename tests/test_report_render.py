"""Rendering the report model as Markdown and HTML from the packaged templates.

Golden files: tests/golden/report_small.md and report_small.html are the Markdown and HTML of
``small_inputs()`` (charts stood in for by a few fixed bytes). Regenerate them on purpose (after a
deliberate change to the report) with

    PLANNER_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_report_render.py -k golden

and review the diff before committing it.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
from report_fixtures import small_inputs

from planner.report import build_report
from planner.report.model import Chart, ReportModel, Section, Table
from planner.report.render import (
    HTML_TEMPLATE,
    MARKDOWN_TEMPLATE,
    MAX_ROWS,
    html_environment,
    markdown_environment,
    render_html,
    render_markdown,
)

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def fake_pngs(model: ReportModel) -> dict[str, bytes]:
    return {c.name: PNG_SIGNATURE + c.name.encode() for c in model.charts()}


@pytest.mark.parametrize("name", ["report_small.md", "report_small.html"])
def test_markdown_and_html_match_the_golden_files(name):
    model = build_report(small_inputs())
    text = render_markdown(model, "GOLDEN") if name.endswith(".md") else render_html(model, "GOLDEN",
                                                                                      fake_pngs(model))
    path = GOLDEN / name
    if os.environ.get("PLANNER_REGEN_GOLDEN") == "1":
        path.write_bytes(text.encode())
    assert path.exists(), "golden file missing: run with PLANNER_REGEN_GOLDEN=1 once and review it"
    assert text.encode() == path.read_bytes()


def awkward_model() -> ReportModel:
    """Text that needs escaping everywhere it can appear, and a table too long and too wide to print whole."""
    rows = MAX_ROWS + 5
    frame = pd.DataFrame({"region_name": [f"eu|west\n<{i}>" for i in range(rows)], "gpus": range(rows),
                          "note": ["Tom's \"fast\" <b>bold</b> & more" + " padding" * 6] * rows,
                          "hidden": [0.5] * rows})
    section = Section("summary", "Tom's <summary>", status="partial", paragraphs=["a <p> & 'b'"],
                      bullets=['say "hi"'],
                      tables=[Table("awkward", "It's <awkward>", frame, "cap & 'c'",
                                    display=("region_name", "gpus", "note"))],
                      charts=[Chart("chart", "A 'chart'", "bars", "awkward", alt='alt "x" <y>')])
    return ReportModel(month="2026-11", as_of="2026-11-01T00:00:00Z", scenario_name="s<1>", title="R & 'D'",
                       sections=[section, Section("plan", "Plan").no_data("nothing <yet>")])


def test_html_escapes_every_text_as_html_escape_spells_it():
    model = awkward_model()
    page = render_html(model, "G", fake_pngs(model))
    assert "<title>R &amp; &#x27;D&#x27;</title>" in page
    assert "<h2>Tom&#x27;s &lt;summary&gt; <span class=\"status partial\">partial</span></h2>" in page
    assert "<h2>Plan <span class=\"status no_data\">no data yet</span></h2>" in page
    assert "<p>a &lt;p&gt; &amp; &#x27;b&#x27;</p>" in page and "<li>say &quot;hi&quot;</li>" in page
    assert 'alt="alt &quot;x&quot; &lt;y&gt;"' in page
    assert "<th>region_<wbr>name</th>" in page
    assert '<td class="wrap">Tom&#x27;s &quot;fast&quot; &lt;b&gt;bold&lt;/b&gt; &amp; more' in page
    assert '<td class="num">39</td>' in page
    assert "<b>" not in page and "&#39;" not in page and "&#34;" not in page


def test_a_long_wide_table_prints_the_display_columns_and_the_first_rows_and_says_so():
    model = awkward_model()
    page = render_html(model, "G", fake_pngs(model))
    text = render_markdown(model, "G")
    assert "hidden" not in page and "hidden" not in text
    assert page.count("<tr>") == MAX_ROWS + 1 and "<td class=\"num\">40</td>" not in page
    note = (f"More columns in tables/awkward.csv. Showing {MAX_ROWS} of {MAX_ROWS + 5} rows; every row is in "
            "tables/awkward.csv.")
    assert f"_cap & 'c' {note}_" in text
    assert f"cap &amp; &#x27;c&#x27; {note} Data: tables/awkward.csv." in page


def test_markdown_cells_escape_pipes_and_line_breaks():
    text = render_markdown(awkward_model(), "G")
    assert "| region_name | gpus | note |\n|---|---:|---|\n| eu\\|west <0> | 0 | Tom's" in text
    assert "## Plan\n\nNo data yet: nothing <yet>\n" in text and text.endswith("\n") and not text.endswith("\n\n")


def test_the_templates_ship_as_package_data():
    """Each template file is matched by pyproject's package-data, so an installed (not only an editable) planner
    finds it; and the package loader finds each template through the installed package."""
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = package_data["planner.report"]
    files = [f.name for f in (resources.files("planner.report") / "templates").iterdir() if f.is_file()]
    assert {MARKDOWN_TEMPLATE, HTML_TEMPLATE, "report.css"} <= set(files)
    for name in files:
        assert any(fnmatch.fnmatch(f"templates/{name}", p) for p in patterns), name
    assert markdown_environment().get_template(MARKDOWN_TEMPLATE).filename is not None
    assert set(html_environment().list_templates()) == set(files)

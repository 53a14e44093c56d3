"""Does the HTML report fit a 1,280 px wide window? A headless-browser screenshot and the page's width.

Takes a report's ``report.html``, or its ``report.json`` (rendered to HTML here, charts as
blank placeholders, so only the tables and text are measured). With chromium on the path it

* writes a screenshot of the page at 1,280 x 2,000 px (``--png``), and
* prints the page's ``scrollWidth`` against 1,280 and, per table, whether its wrapper has to
  scroll sideways (a table wider than the page column).

The page fits when ``scrollWidth`` is at most 1,280. Without chromium it says so and stops;
the test suite checks the page's structure instead (``tests/test_report_explains.py``).

Usage: ``python benchmarks/report_width.py REPORT.html|report.json [--png /tmp/report.png]``.
It prints figures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from planner.report.model import Chart, ReportModel, Section, Table
from planner.report.render import render_html

WIDTH_PX = 1280
# A 1 x 1 transparent PNG: the charts are images scaled to the column, so they never widen the page.
BLANK_PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAAS"
                             "UVORK5CYII=")
MEASURE = """<script>
document.body.setAttribute("data-scroll-width", document.documentElement.scrollWidth);
document.body.setAttribute("data-scrolling-tables", Array.from(document.querySelectorAll(".table-wrap"))
  .filter(w => w.scrollWidth > w.clientWidth + 1).map(w => w.previousElementSibling.textContent + " ("
  + w.scrollWidth + " px in " + w.clientWidth + ")").join(" | "));
</script>"""


def model_from_json(payload: dict[str, Any]) -> ReportModel:
    """The report model a report.json was written from (tables that only feed a chart come back empty)."""
    sections = []
    for s in payload["sections"]:
        tables = [Table(t["name"], t["title"], pd.DataFrame(t["rows"] or [], columns=t["columns"]), t["caption"],
                        show=t["rows"] is not None) for t in s["tables"]]
        charts = [Chart(c["name"], c["title"], c["kind"], c["table"], c["options"]) for c in s["charts"]]
        sections.append(Section(s["key"], s["title"], s["status"], s["paragraphs"], s["bullets"], tables, charts,
                                s["facts"]))
    return ReportModel(payload["month"], payload["as_of"], payload["scenario"], payload["title"], sections,
                       payload["facts"], payload["period"])


def page(path: Path) -> str:
    if path.suffix == ".json":
        model = model_from_json(json.loads(path.read_text()))
        return render_html(model, "-", {c.name: BLANK_PNG for c in model.charts()})
    return path.read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--png", type=Path, default=Path(tempfile.gettempdir()) / "report_1280.png")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        print("no chromium on the path: nothing measured (install it, e.g. apt-get install chromium)")
        return 0
    html = page(args.report)
    with tempfile.TemporaryDirectory() as folder:
        measured = Path(folder) / "report.html"
        measured.write_text(html.replace("</body>", MEASURE + "\n</body>"))
        common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                  f"--window-size={WIDTH_PX},2000"]
        subprocess.run([*common, f"--screenshot={args.png}", measured.as_uri()], check=True, capture_output=True)
        dom = subprocess.run([*common, "--dump-dom", measured.as_uri()], check=True, capture_output=True,
                             text=True).stdout
    width = int(re.search(r'data-scroll-width="(\d+)"', dom).group(1))  # type: ignore[union-attr]
    scrolling = re.search(r'data-scrolling-tables="([^"]*)"', dom).group(1)  # type: ignore[union-attr]
    print(f"screenshot: {args.png}")
    print(f"page scrollWidth {width} px against a {WIDTH_PX} px window: {'fits' if width <= WIDTH_PX else 'TOO WIDE'}")
    print("tables that scroll inside their wrapper: " + (scrolling or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

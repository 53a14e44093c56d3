"""Writing reports/YYYY-MM/: every format, idempotence, atomic replacement, the lock, self-contained HTML.

Golden file: tests/golden/report_small.json is the report JSON of ``small_inputs()``.
Regenerate it on purpose (after a deliberate change to the report) with

    PLANNER_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_report_write.py -k golden

and review the diff before committing it.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_fixtures import small_inputs

from planner.errors import ExitCode, InputError
from planner.report import build_report
from planner.report.model import SECTION_KEYS
from planner.report.render import render_json
from planner.workflows import report_files as write_module
from planner.workflows.report_files import recover, write_report
from planner.workflows.report_lock import HOLDER_NAME, ReportLockedError

GOLDEN = Path(__file__).parent / "golden" / "report_small.json"
CHROMIUM = Path("/usr/bin/chromium")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def model():
    return build_report(small_inputs())


@pytest.fixture(scope="module")
def written(model, tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    return write_report(model, root, generated_at="2026-11-01T03:00:00Z")


def tree_digest(directory: Path) -> dict[str, str]:
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


class Structure(HTMLParser):
    """Collects what the structure tests check: headings, tables, images, every URL-bearing attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.h1, self.h2 = [], []
        self.images: list[dict[str, str]] = []
        self.urls: list[str] = []
        self._heading: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag in ("h1", "h2"):
            self._heading, self._text = tag, []
        if tag == "img":
            self.images.append(attrs)
        self.urls += [v for k, v in attrs.items() if k in ("src", "href", "action", "srcset", "poster") and v]

    def handle_data(self, data):
        if self._heading:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == self._heading:
            getattr(self, tag).append("".join(self._text).strip())
            self._heading = None


def check_structure(page: str, model) -> Structure:
    parser = Structure()
    parser.feed(page)
    titles = [s.title for s in model.sections]
    assert parser.h1 == [model.title]
    assert len(parser.h2) == len(titles) and all(h.startswith(t) for h, t in zip(parser.h2, titles, strict=True))
    assert parser.tags.count("table") >= len([t for t in model.tables() if t.show])
    assert len(parser.images) == len(model.charts())
    for image in parser.images:
        prefix = "data:image/png;base64,"
        assert image["src"].startswith(prefix) and image.get("alt")
        assert base64.b64decode(image["src"][len(prefix):]).startswith(PNG_SIGNATURE)
    assert all(url.startswith(("data:", "#")) for url in parser.urls), [u[:40] for u in parser.urls]
    assert not {"script", "link", "iframe", "object", "embed"} & set(parser.tags)
    return parser


def test_every_file_and_every_section_in_every_format(written, model):
    directory = written.directory
    assert directory.name == "2026-11" and directory.stat().st_mode & 0o777 != 0o700
    names = {p.relative_to(directory).as_posix() for p in written.files}
    assert {"report.md", "report.html", "report.json"} <= names
    assert {f"tables/{t.name}.csv" for t in model.tables()} <= names
    assert {f"charts/{c.name}.png" for c in model.charts()} <= names
    markdown = (directory / "report.md").read_text()
    assert [line[3:] for line in markdown.splitlines() if line.startswith("## ")] == [s.title for s in model.sections]
    payload = json.loads((directory / "report.json").read_text())
    assert [s["key"] for s in payload["sections"]] == list(SECTION_KEYS)
    for section in payload["sections"]:
        for table in section["tables"]:
            assert (directory / table["csv"]).exists()
    check_structure((directory / "report.html").read_text(), model)
    assert not [p for p in directory.parent.iterdir() if p.name.startswith(".2026-11")]


def test_same_inputs_give_the_same_report_apart_from_the_generated_at_line(model, tmp_path):
    first = write_report(model, tmp_path / "a", generated_at="2026-11-01T03:00:00Z").directory
    second = write_report(build_report(small_inputs()), tmp_path / "b", generated_at="2026-12-24T18:30:00Z").directory
    a, b = tree_digest(first), tree_digest(second)
    assert a.keys() == b.keys()
    for name in a:
        if name.endswith((".csv", ".png")):
            assert a[name] == b[name], name
            continue
        lines_a, lines_b = (d.joinpath(name).read_text().splitlines() for d in (first, second))
        differing = [(x, y) for x, y in zip(lines_a, lines_b, strict=True) if x != y]
        assert len(differing) == 1, name
        assert "2026-11-01T03:00:00Z" in differing[0][0] and "2026-12-24T18:30:00Z" in differing[0][1]


def test_a_crash_mid_write_leaves_the_previous_report_byte_identical(model, tmp_path, monkeypatch):
    previous = write_report(model, tmp_path, generated_at="2026-10-01T03:00:00Z").directory
    before = tree_digest(previous)

    def crash(*args, **kwargs):
        raise RuntimeError("renderer crashed after the tables, charts, JSON and Markdown were written")

    monkeypatch.setattr(write_module, "render_html", crash)
    with pytest.raises(RuntimeError, match="renderer crashed"):
        write_report(model, tmp_path, generated_at="2026-11-01T03:00:00Z")
    assert tree_digest(previous) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "2026-11"]  # no half-written folder left


def test_rewriting_a_month_replaces_it_whole(model, tmp_path):
    write_report(model, tmp_path, generated_at="2026-11-01T03:00:00Z")
    stale = tmp_path / "2026-11" / "tables" / "from_an_older_version.csv"
    stale.write_text("x\n")
    write_report(model, tmp_path, generated_at="2026-11-01T04:00:00Z")
    assert not stale.exists() and "04:00:00Z" in (tmp_path / "2026-11" / "report.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "2026-11"]


def test_recovery_restores_a_report_left_between_the_two_renames(tmp_path):
    aside = tmp_path / ".2026-10.old-1a2b3c4d"
    aside.mkdir()
    (aside / "report.md").write_text("October\n")
    unfinished = tmp_path / ".2026-11.tmp-zz"
    unfinished.mkdir()
    done = recover(tmp_path)
    assert (tmp_path / "2026-10" / "report.md").read_text() == "October\n"
    assert not unfinished.exists() and len(done) == 2


def test_the_lock_refuses_a_second_writer_at_once_and_nothing_is_written(model, tmp_path):
    holder = {"pid": 4242, "started_at": "2026-12-01T02:00:00Z", "host": socket.gethostname(),
              "command": "planner report --month 2026-11"}
    tmp_path.joinpath(HOLDER_NAME).write_text(json.dumps(holder))
    with open(tmp_path / ".lock", "a") as other:  # a second open file description: flock treats it as another run
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        started = time.monotonic()
        with pytest.raises(ReportLockedError) as info:
            write_report(model, tmp_path)
        assert time.monotonic() - started < 1.0, "a held lock is refused at once, not waited for"
    message = str(info.value)
    assert "another planner report run holds the lock" in message and "process 4242" in message
    assert "2026-12-01T02:00:00Z" in message and str(tmp_path / ".lock") in message
    assert info.value.exit_code == ExitCode.INVALID_INPUT
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", HOLDER_NAME]  # nothing written
    # The holder released its flock without clearing its holder file, as a killed run does: the next writer
    # takes the lock over and says whose it was.
    written = write_report(model, tmp_path, generated_at="2026-11-01T03:00:00Z")
    assert any("took over the stale lock" in n and "process 4242" in n for n in written.notices), written.notices
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "2026-11"]


_KILLED_WRITER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[2])
    from pathlib import Path
    from report_fixtures import small_inputs
    from planner.report import build_report
    from planner.workflows import report_files as w
    from planner.workflows.report_files import write_report

    def stall(*args, **kwargs):
        print("writing", flush=True)
        time.sleep(60)

    w.render_html = stall
    write_report(build_report(small_inputs()), Path(sys.argv[1]), generated_at="2026-11-01T09:00:00Z")
""")


@pytest.mark.slow
def test_a_killed_run_leaves_the_previous_report_and_the_next_run_cleans_up(model, tmp_path):
    previous = write_report(model, tmp_path, generated_at="2026-10-01T03:00:00Z").directory
    before = tree_digest(previous)
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(tmp_path), str(Path(__file__).parent)],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1])
    try:
        assert writer.stdout.readline().strip() == "writing"
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.wait(timeout=30)
    assert tree_digest(previous) == before
    assert any(p.name.startswith(".2026-11.tmp-") for p in tmp_path.iterdir())  # the killed run's leftovers
    written = write_report(model, tmp_path, generated_at="2026-11-01T03:00:00Z")  # the kernel freed its lock
    assert any(f"process {writer.pid}" in n and "is gone" in n for n in written.notices), written.notices
    assert any(n.startswith("deleted the unfinished .2026-11.tmp-") for n in written.notices), written.notices
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "2026-11"]


@pytest.mark.slow
def test_html_renders_in_chromium_or_is_checked_structurally(written, model, tmp_path):
    """With Debian's chromium installed the page is rendered headless (DOM and screenshot); without it the
    static structure is checked alone. Both branches assert."""
    page = written.directory / "report.html"
    check_structure(page.read_text(), model)
    if not CHROMIUM.exists():
        return
    flags = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    profile = tempfile.mkdtemp(dir=tmp_path)
    dom = subprocess.run([*flags, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    rendered = check_structure(dom, model)
    assert len(rendered.h2) == len(SECTION_KEYS)
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1280,2000",
                    page.as_uri()], capture_output=True, timeout=120, check=True)
    from PIL import Image

    image = Image.open(shot).convert("L")
    assert image.size == (1280, 2000)
    assert image.getextrema()[0] < 60  # dark text was drawn, not a blank page
    shutil.rmtree(profile, ignore_errors=True)


def test_report_json_matches_the_golden_file(model):
    text = render_json(model, "GOLDEN")
    if os.environ.get("PLANNER_REGEN_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), "golden file missing: run with PLANNER_REGEN_GOLDEN=1 once and review it"
    assert json.loads(text) == json.loads(GOLDEN.read_text())


def test_an_unusable_reports_folder_is_an_input_error(model, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x\n")
    with pytest.raises(InputError, match="cannot use the reports folder") as info:
        write_report(model, blocker / "reports")
    assert info.value.exit_code == ExitCode.INVALID_INPUT
    assert "--reports" in info.value.fix and "--out" not in info.value.fix, "the hint names the option report has"

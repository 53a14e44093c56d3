"""Write ``<reports>/YYYY-MM/`` as a whole, safely under cron.

Layout of one month's folder::

    report.md  report.html  report.json  tables/<name>.csv  charts/<name>.png

Atomic as a whole: everything is written (and fsynced) into a hidden sibling
``.YYYY-MM.tmp-XXXX`` first; then the old folder, if any, is renamed aside to
``.YYYY-MM.old-XXXX``, the new one is renamed in, and the old one is deleted. Each
rename is atomic on POSIX. A crash before the first rename leaves the previous report
untouched (and a stale temporary folder that the next run deletes); a crash between
the two renames leaves the previous report under ``.YYYY-MM.old-XXXX``, and the next
run puts it back before it starts. An exception while writing deletes the temporary
folder and re-raises, so the previous report stays byte-identical.

One writer at a time: everything above happens under the reports folder's lock
(``planner.workflows.report_lock``). ``planner report`` takes it when it starts, before any work,
and hands it to :func:`write_report`; called on its own, ``write_report`` takes it for
the write. Either way a second writer stops at once with ``ReportLockedError`` (exit 3,
nothing written).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from planner.report.charts import render_chart
from planner.report.model import ReportModel
from planner.report.period import check_month
from planner.report.render import render_html, render_json, render_markdown
from planner.workflows.report_lock import ReportLock, report_lock

LEFTOVER = re.compile(r"^\.\d{4}-\d{2}\.(tmp|old)-")


@dataclass(frozen=True)
class WrittenReport:
    directory: Path
    files: tuple[Path, ...]
    notices: tuple[str, ...] = ()  # what recovery and the lock did before the write (e.g. a stale lock taken over)


def recover(reports_dir: Path) -> list[str]:
    """Finish or undo what an interrupted run left behind; return what was done. Call under the lock."""
    done = []
    for entry in sorted(reports_dir.iterdir()):
        name = entry.name
        if not (LEFTOVER.match(name) and entry.is_dir()):
            continue
        if ".tmp-" in name:
            shutil.rmtree(entry, ignore_errors=True)
            done.append(f"deleted the unfinished {name}")
        elif ".old-" in name:
            month = name[1:name.index(".old-")]
            target = reports_dir / month
            if target.exists():
                shutil.rmtree(entry, ignore_errors=True)
                done.append(f"deleted the replaced {name}")
            else:
                os.rename(entry, target)
                done.append(f"restored {month} from {name}")
    return done


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_files(model: ReportModel, directory: Path, generated_at: str) -> list[Path]:
    """Write every file of the report into ``directory`` (not atomic by itself); return them in write order."""
    written = []
    for table in model.tables():
        path = directory / "tables" / f"{table.name}.csv"
        _write(path, table.frame.to_csv(index=False, lineterminator="\n").encode("utf-8"))
        written.append(path)
    pngs = {}
    for chart in model.charts():
        pngs[chart.name] = render_chart(chart, model.find_table(chart.table).frame)
        path = directory / "charts" / f"{chart.name}.png"
        _write(path, pngs[chart.name])
        written.append(path)
    for name, text in (("report.json", render_json(model, generated_at)),
                       ("report.md", render_markdown(model, generated_at)),
                       ("report.html", render_html(model, generated_at, pngs))):
        _write(directory / name, text.encode("utf-8"))
        written.append(directory / name)
    for sub in ("tables", "charts"):
        if (directory / sub).exists():
            _fsync_dir(directory / sub)
    _fsync_dir(directory)
    return written


@contextlib.contextmanager
def _held(out_dir: Path, lock: ReportLock | None) -> Iterator[ReportLock]:
    """``lock`` when the caller holds it for ``out_dir``; else the lock, taken here for the write."""
    if lock is None:
        with report_lock(out_dir) as taken:
            yield taken
        return
    if lock.reports_dir.resolve() != out_dir.resolve():
        raise ValueError(f"the lock held is for {lock.reports_dir}, not for {out_dir}")
    yield lock


def write_report(model: ReportModel, out_dir: Path, *, generated_at: str | None = None,
                 lock: ReportLock | None = None) -> WrittenReport:
    """Write ``out_dir/<model.month>/`` atomically as a whole, under the reports lock (module docstring).

    ``generated_at`` (ISO UTC) is the one line that differs between runs; it defaults to now.
    ``lock``: the reports lock when the caller already holds it (``report_lock(out_dir)``).
    Returns the month's folder, its files (final paths, sorted) and notices.
    """
    check_month(model.month)
    out_dir = Path(out_dir)
    stamp = generated_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with _held(out_dir, lock) as held:
        notice = held.takeover_notice() if lock is None else None  # a caller holding the lock reports its own
        notices = ([notice] if notice else []) + recover(out_dir)
        final = out_dir / model.month
        staging = Path(tempfile.mkdtemp(prefix=f".{model.month}.tmp-", dir=out_dir))
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; a report folder is as readable as any
        old: Path | None = None
        try:
            written = write_files(model, staging, stamp)
            if final.exists():
                old = out_dir / f".{model.month}.old-{os.urandom(4).hex()}"
                os.rename(final, old)
            os.rename(staging, final)
            _fsync_dir(out_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if old is not None and old.exists() and not final.exists():
                os.rename(old, final)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    files = tuple(sorted(final / p.relative_to(staging) for p in written))
    return WrittenReport(directory=final, files=files, notices=tuple(notices))

"""The reports folder's lock: one holder, named to whoever is refused; stale locks taken over; never deleted.

The holder in the first test is a real second process, so the refusal is the kernel's
``flock`` between two processes, not a lock object refusing itself.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

import psutil
import pytest
from process_helpers import dead_pid

from planner.errors import ExitCode, InputError
from planner.workflows.report_lock import HOLDER_NAME, LOCK_NAME, ReportLockedError, read_holder, report_lock

_HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from planner.workflows.report_lock import report_lock

    with report_lock(Path(sys.argv[1]), command="planner report --month 2026-11"):
        print("held", flush=True)
        sys.stdin.read()  # hold the lock until the test closes our stdin
""")


def test_a_second_process_is_refused_at_once_with_the_holder_named(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        inode = (tmp_path / LOCK_NAME).stat().st_ino
        started = time.monotonic()
        with pytest.raises(ReportLockedError) as info:
            with report_lock(tmp_path):
                pytest.fail("the lock was taken while another process holds it")
        assert time.monotonic() - started < 1.0, "the lock is tried once, not waited for"
        message = str(info.value)
        process_start = datetime.fromtimestamp(psutil.Process(holder.pid).create_time(), UTC)
        assert f"process {holder.pid}" in message
        assert process_start.strftime("%Y-%m-%dT%H:%M:%SZ") in message, "the holder's start time, ISO UTC"
        assert str(tmp_path / LOCK_NAME) in message and "planner report --month 2026-11" in message
        assert info.value.exit_code == ExitCode.INVALID_INPUT
        assert read_holder(tmp_path).pid == holder.pid, "the refused run leaves the holder's record alone"
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    assert not (tmp_path / HOLDER_NAME).exists(), "a holder that finishes clears its record"
    # The lock file outlives every release (filelock is told to keep it): deleting a pathname that another run
    # has open and locked would let a third run lock a fresh file of the same name while the second still writes.
    assert (tmp_path / LOCK_NAME).exists() and (tmp_path / LOCK_NAME).stat().st_ino == inode
    with report_lock(tmp_path) as lock:
        assert lock.took_over is None and lock.takeover_notice() is None
        assert read_holder(tmp_path).pid == os.getpid()
    assert (tmp_path / LOCK_NAME).exists()


def test_a_stale_lock_is_taken_over_and_its_dead_holder_named(tmp_path):
    pid = dead_pid()
    record = {"pid": pid, "started_at": "2026-12-01T02:00:05Z", "host": socket.gethostname(),
              "command": "planner report --month 2026-11"}
    (tmp_path / HOLDER_NAME).write_text(json.dumps(record))
    (tmp_path / f"{HOLDER_NAME}.tmp-{pid}").write_text("{")  # it was killed while rewriting its record, too
    with report_lock(tmp_path) as lock:
        assert lock.took_over is not None and lock.took_over.pid == pid
        notice = lock.takeover_notice()
        assert f"process {pid}" in notice and "2026-12-01T02:00:05Z" in notice and "is gone" in notice
        assert read_holder(tmp_path).pid == os.getpid(), "the new holder records itself"
        assert not list(tmp_path.glob(f"{HOLDER_NAME}.tmp-*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def test_an_unreadable_holder_record_still_counts_as_a_stale_lock(tmp_path):
    (tmp_path / HOLDER_NAME).write_text("not json")
    with report_lock(tmp_path) as lock:
        assert "took over the stale lock" in lock.takeover_notice()
        assert "unreadable" in lock.takeover_notice()


def test_a_folder_that_cannot_be_made_names_the_reports_option(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x\n")
    with pytest.raises(InputError) as info:
        with report_lock(blocker / "reports"):
            pass
    assert info.value.exit_code == ExitCode.INVALID_INPUT and "--reports" in info.value.fix

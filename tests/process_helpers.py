"""Processes for tests of what cron meets: a pid that no process has."""

from __future__ import annotations

import subprocess
import sys

import psutil


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped): no process has it now."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not psutil.pid_exists(child.pid)
    return child.pid

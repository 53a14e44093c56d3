"""Tasks the engine tests run on workers: report the pid, kill the worker, fail and count attempts.

They live in their own module, not in a test module, so workers import them by name like
any planner task (``tests/`` is on the workers' ``sys.path``, inherited from the process
that starts them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def worker_pid(_: Any) -> int:
    return os.getpid()


def exit_first_time(marker: str) -> int:
    """Kill this worker process the first time (no marker yet); return the pid on a retry."""
    path = Path(marker)
    if not path.exists():
        path.write_text("died once\n")
        os._exit(1)
    return os.getpid()


def always_exit(_: Any) -> None:
    os._exit(1)


def count_then_raise(spec: tuple[str, str]) -> None:
    """Append one line per attempt to ``spec[0]``, then raise the error named by ``spec[1]``."""
    from planner.errors import InputError

    path, kind = spec
    with open(path, "a") as fh:
        fh.write("attempt\n")
    if kind == "input":
        raise InputError("bad row in a task", where="task", fix="fix the row")
    raise OSError("transient failure")


def sleep_then_pid(seconds: float) -> int:
    """Sleep ``seconds`` (in C, as a long solver call would), then report the pid."""
    import time

    time.sleep(seconds)
    return os.getpid()


def sleep_then_finish(spec: tuple[str, float]) -> tuple[str, float]:
    """Sleep ``spec[1]`` seconds, then report ``spec[0]`` and when it finished (``time.monotonic``, which every
    process on the machine shares)."""
    import time

    time.sleep(spec[1])
    return spec[0], time.monotonic()


def follow_ups(index: int, result: tuple[str, float]) -> list[tuple[str, float]]:
    """Two quick tasks after each first task ("a", "b"), none after a follow-up."""
    name = result[0]
    return [] if "." in name else [(f"{name}.0", 0.0), (f"{name}.1", 0.0)]

"""One task in a worker process beside the caller (``planner.engine.processes.in_background``): its result when
asked, and a worker stopped at once when the caller leaves by an exception."""

from __future__ import annotations

import math
import time

import psutil
import pytest

from planner.engine.processes import in_background


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def test_the_result_of_the_task_run_beside():
    with in_background(math.factorial, 10) as pending:
        assert pending.result() == 3_628_800


def test_leaving_by_an_exception_stops_the_worker_at_once():
    before = _children()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt), in_background(time.sleep, 60.0) as pending:
        time.sleep(0.5)
        assert pending.running() or not pending.done()
        raise KeyboardInterrupt
    assert time.monotonic() - began < 20.0  # not the 60 s the task would take
    assert not (_children() - before)

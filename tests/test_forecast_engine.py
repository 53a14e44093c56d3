"""planner.engine.run_tasks: order, progress, errors, engine resolution."""

from __future__ import annotations

import math

import pytest

from planner.engine import resolve_engine, run_tasks
from planner.errors import InputError


def test_local_engine_keeps_order_and_reports_progress():
    calls = []
    out = run_tasks(math.sqrt, [9.0, 4.0, 1.0], engine="local", progress=lambda d, t: calls.append((d, t)))
    assert out == [3.0, 2.0, 1.0]
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_process_engine_keeps_order_and_reports_progress():
    tasks = [float(i * i) for i in range(40)]
    calls = []
    out = run_tasks(math.sqrt, tasks, engine="processes", workers=2, progress=lambda d, t: calls.append(d))
    assert out == [float(i) for i in range(40)]
    assert sorted(calls) == list(range(1, 41))


def test_process_engine_reraises_task_errors():
    with pytest.raises(ValueError, match="math domain error"):
        run_tasks(math.sqrt, [1.0, -1.0, 4.0], engine="processes", workers=2)


def test_no_tasks_gives_no_results():
    assert run_tasks(math.sqrt, [], engine="processes") == []


def test_resolve_engine():
    assert resolve_engine("local", 10, None)[0] == "local"
    assert resolve_engine("processes", 10, 3) == ("processes", 3)
    assert resolve_engine("processes", 2, 8) == ("processes", 2)  # never more workers than tasks
    assert resolve_engine("auto", 1, None)[0] == "local"
    with pytest.raises(InputError, match="unknown engine"):
        resolve_engine("ray", 1, None)
    with pytest.raises(InputError, match="at least 1"):
        resolve_engine("processes", 1, 0)

"""planner.engine: option checks, engine resolution, follow-up tasks, a dying worker in the process pool, and its
deadline.

Order, progress and task errors of ``local`` and ``processes`` are in
``test_forecast_engine.py``; the ``dask`` engine is in ``test_engine_dask.py``.
"""

from __future__ import annotations

import math
import os
import time

import pytest
from engine_tasks import always_exit, follow_ups, sleep_then_finish, sleep_then_pid

from planner.engine import (
    ENGINES,
    SCHEDULER_ENV,
    WorkerLostError,
    check_engine,
    resolve_engine,
    run_tasks,
)
from planner.engine.processes import run_processes
from planner.errors import ExitCode, InputError


def test_engines_and_their_resolution():
    assert ENGINES == ("local", "processes", "dask", "auto")
    assert resolve_engine("dask", 10, 3) == ("dask", 3)
    assert resolve_engine("dask", 2, 8) == ("dask", 2)
    assert resolve_engine("auto", 1, None) == ("local", 1)


@pytest.mark.parametrize("address", ["tcp://scheduler:8786", "tls://10.0.0.5:8786", "scheduler.dask.svc:8786",
                                     "tcp://[::1]:8786", "tcp://simple-scheduler.default.svc.cluster.local:8786"])
def test_good_scheduler_addresses(address):
    check_engine("dask", address)


@pytest.mark.parametrize(("engine", "scheduler", "workers", "message", "where"), [
    ("ray", None, None, "unknown engine 'ray'", "--engine"),
    ("processes", "tcp://scheduler:8786", None, "--scheduler needs --engine dask", "--scheduler"),
    ("auto", "tcp://scheduler:8786", None, "--scheduler needs --engine dask", "--scheduler"),
    ("dask", "scheduler", None, "not a Dask scheduler address", "--scheduler"),
    ("dask", "http://scheduler:8786", None, "not a Dask scheduler address", "--scheduler"),
    ("dask", "tcp://scheduler:99999", None, "not a Dask scheduler address", "--scheduler"),
    ("dask", None, 0, "at least 1", "--workers"),
])
def test_bad_engine_options_are_input_errors(engine, scheduler, workers, message, where):
    with pytest.raises(InputError, match=message) as err:
        check_engine(engine, scheduler, workers)
    assert err.value.where == where and err.value.fix and err.value.exit_code == ExitCode.INVALID_INPUT


def test_run_tasks_checks_the_options_before_any_work():
    with pytest.raises(InputError, match="--scheduler needs --engine dask"):
        run_tasks(math.sqrt, [1.0], engine="local", scheduler="tcp://scheduler:8786")


def test_environment_address_is_checked_for_dask_only(monkeypatch):
    monkeypatch.setenv(SCHEDULER_ENV, "not an address")
    with pytest.raises(InputError) as err:
        check_engine("dask")
    assert err.value.where == SCHEDULER_ENV
    check_engine("processes")
    assert run_tasks(math.sqrt, [4.0], engine="local") == [2.0]


def test_a_dying_process_worker_is_a_clear_error():
    with pytest.raises(WorkerLostError) as err:
        run_tasks(always_exit, [0, 1, 2], engine="processes", workers=2)
    assert "(always_exit)" in str(err.value) and "no result was kept" in str(err.value)
    assert err.value.exit_code == ExitCode.UNEXPECTED and "memory" in err.value.fix


def test_tasks_unfinished_at_the_deadline_are_stopped_and_have_no_result():
    began = time.monotonic()
    results = run_processes(sleep_then_pid, [0.0, 120.0, 0.0], 2, None, deadline=began + 10.0)
    waited = time.monotonic() - began
    assert results[1] is None  # stopped at the deadline, not after its 120 s
    assert all(isinstance(pid, int) and pid != os.getpid() for pid in (results[0], results[2]))
    assert 10.0 <= waited < 50.0  # the 10 s leave room for starting the workers on a loaded machine


@pytest.mark.parametrize("engine", ["local", "processes"])
def test_follow_ups_start_as_results_arrive_and_come_back_in_a_fixed_order(engine):
    """The slow first task finishes last, so its follow-ups are added last; the results still list the first
    tasks, then the follow-ups by parent and position. With two workers the quick task's follow-ups finish
    while the slow task is still running: the next stage does not wait for the slowest task of this one."""
    seen = []
    results = run_tasks(sleep_then_finish, [("a", 3.0), ("b", 0.0)], engine=engine, workers=2,
                        follow=follow_ups, progress=lambda done, total: seen.append((done, total)))
    assert [name for name, _ in results] == ["a", "b", "a.0", "a.1", "b.0", "b.1"]
    assert seen[-1] == (6, 6) and [done for done, _ in seen] == list(range(1, 7))
    finished = dict(results)
    if engine == "processes":
        assert max(finished["b.0"], finished["b.1"]) < finished["a"]
    else:
        assert finished["a"] < finished["b"] < finished["a.0"]  # in order, one at a time

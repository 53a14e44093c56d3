"""SIGTERM stops a run like Ctrl-C, worker processes never outlive their parent, and a closed pipe is no error.

The signal tests start ``planner calibrate`` on the demo scenario with the ``processes``
engine and two workers, wait until the workers run tasks, then signal the parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from bad_inputs_harness import planner_command
from conftest import REPO_ROOT

from planner.runs import RunHistory

START_TIMEOUT_S = 180.0  # a cold start imports numba and the simulator on a busy 2-core machine
GONE_WITHIN_S = 5.0
STOPPED_WITHIN_S = 15.0


def _start(folder: Path) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "PLANNER_HISTORY": str(folder / "state" / "history.duckdb"),
           "PLANNER_CACHE_DIR": str(folder / "state" / "cache"), "NO_COLOR": "1"}
    log = folder / "state" / "stderr.txt"
    log.parent.mkdir(parents=True)
    run = folder / "run"
    run.mkdir()
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [*planner_command(), "calibrate", "--scenario", str(REPO_ROOT / "scenarios" / "demo.toml"),
             "--out", "capacity.csv", "--engine", "processes", "--workers", "2", "--no-cache"],
            cwd=run, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    return proc, log


BUSY_CPU_S = 6.0
"""CPU a worker has used once it is past its imports and inside a task (importing takes 2-3 s)."""


def _cpu_s(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return times.user + times.system


def _workers(proc: subprocess.Popen, log: Path) -> list[psutil.Process]:
    """The parent's two pool workers, once both are running tasks."""
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"planner ended early ({proc.returncode}): {log.read_text()}"
        workers = []
        for child in parent.children(recursive=True):
            try:
                if any("spawn_main" in part for part in child.cmdline()):
                    workers.append(child)
            except psutil.NoSuchProcess:
                continue
        if len(workers) >= 2 and all(_cpu_s(w) >= BUSY_CPU_S for w in workers):
            return workers
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"the workers never started: {log.read_text()}")


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _still_alive_after(processes: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [p for p in processes if _alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in processes if _alive(p)]


@pytest.fixture
def started(tmp_path):
    """A running ``planner calibrate`` and its workers; whatever the test leaves alive is killed at the end."""
    proc, log = _start(tmp_path)
    family: list[psutil.Process] = []
    try:
        workers = _workers(proc, log)
        family.extend(psutil.Process(proc.pid).children(recursive=True))  # workers and the resource tracker
        yield proc, log, workers, family
    finally:
        for process in [*family, psutil.Process(proc.pid) if proc.poll() is None else None]:
            if process is not None and _alive(process):
                process.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_sigterm_stops_the_run_like_ctrl_c_and_leaves_no_workers(started, tmp_path):
    proc, log, workers, family = started
    proc.send_signal(signal.SIGTERM)
    # Promptly: not once the running tasks end (one pair's bisection takes a minute or more).
    code = proc.wait(timeout=STOPPED_WITHIN_S)
    said = " ".join(log.read_text().split())
    assert code == 143, said
    assert "interrupted by SIGTERM; no output was written" in said
    assert "Traceback" not in said
    assert _still_alive_after(workers + family, GONE_WITHIN_S) == []
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == []  # no output, no temporary file
    runs = RunHistory(tmp_path / "state" / "history.duckdb").runs(command="calibrate")
    assert [run["exit_code"] for run in runs] == [143]


@pytest.mark.slow
def test_workers_die_with_a_parent_killed_outright(started, tmp_path):
    proc, log, workers, family = started
    proc.send_signal(signal.SIGKILL)  # nothing in the parent runs: the workers must end on their own
    proc.wait(timeout=30)
    assert _still_alive_after(workers, GONE_WITHIN_S) == []
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == []


def test_a_closed_pipe_ends_with_exit_0_and_is_recorded_so(tmp_path):
    """`planner catalog --json | head -1`: the reader goes away; the run ends 0 and the history says 0."""
    history = tmp_path / "history.duckdb"
    env = {**os.environ, "PLANNER_HISTORY": str(history)}
    proc = subprocess.Popen([*planner_command(), "catalog", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # before the first byte is written: every write meets a closed pipe
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"Exception ignored" not in err and b"BrokenPipe" not in err
    runs = RunHistory(history).runs(command="catalog")
    assert [run["exit_code"] for run in runs] == [0]


def test_exit_code_of_a_sigterm_is_143():
    from planner.errors import Terminated
    from planner.runs.recording import exit_code_of

    assert exit_code_of(Terminated()) == 143 and exit_code_of(KeyboardInterrupt()) == 130

"""What every engine shares: the core count, one BLAS thread per task, and the worker-loss error.

**One BLAS thread.** Every task runs with BLAS/OpenMP limited to one thread, whatever
the engine. That avoids oversubscription (n workers x n BLAS threads on n cores) and
makes floating-point results independent of the engine: a threaded BLAS may split a
reduction differently, so the same task could give different bits in a worker with
four threads than in one with one. A worker process limits itself once, before its
first task: environment variables for libraries it has not loaded yet, then
``threadpoolctl`` for those already loaded.

**Domain errors are values on the way back.** A task that raises a
:class:`~planner.errors.PlannerError` (bad input found inside the task) returns it
wrapped in :class:`TaskRaised` from a cluster worker, so the cluster does not retry a
deterministic failure; the parent re-raises it unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.errors import ExitCode, PlannerError

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_limited = False


class WorkerLostError(PlannerError):
    """A worker process died while running a task (and, on Dask, again on every retry).

    Exit code 1 (unexpected): the inputs were valid, the machine or cluster failed.
    The message names the task; the fix hint says what usually kills workers.
    """

    exit_code = ExitCode.UNEXPECTED


def available_cores() -> int:
    """CPUs this process may run on (the affinity mask on Linux, else the CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def limit_threads() -> None:
    """Limit BLAS/OpenMP to one thread for the rest of this process's life (idempotent)."""
    global _limited
    if _limited:
        return
    for name in THREAD_VARS:
        os.environ[name] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    _limited = True


@dataclass(frozen=True)
class TaskRaised:
    """A PlannerError raised by a task, carried back as a value (see the module docstring)."""

    error: PlannerError


def call_single_threaded(fn: Callable[[Any], Any], task: Any) -> Any:
    """Run ``fn(task)`` in a worker after limiting threads; a PlannerError comes back as TaskRaised."""
    limit_threads()
    try:
        return fn(task)
    except PlannerError as exc:
        return TaskRaised(exc)


def task_label(fn: Callable[..., Any], index: int, total: int) -> str:
    """'task 3 of 40 (run_series)': how errors name a task."""
    return f"task {index + 1} of {total} ({getattr(fn, '__qualname__', type(fn).__name__)})"


@dataclass
class FollowUps:
    """The tasks of one run, growing as results arrive: the tasks beyond the first ones came from
    ``follow(parent, result)``. The engines run ``tasks`` by index and call :meth:`arrived` with each result, in
    the calling process; :meth:`ordered` puts the results back in an order that does not depend on which task
    finished first."""

    tasks: list[Any]
    follow: Callable[[int, Any], Sequence[Any]] | None = None
    paths: list[tuple[int, ...]] = field(init=False)
    """Per task, where it comes from: ``(i,)`` for the i-th first task, the parent's path and the task's position
    among the parent's follow-ups for one that ``follow`` added."""

    def __post_init__(self) -> None:
        self.paths = [(i,) for i in range(len(self.tasks))]

    def arrived(self, index: int, result: Any) -> int:
        """Record task ``index``'s result; returns how many follow-up tasks it added to ``tasks``."""
        if self.follow is None:
            return 0
        more = list(self.follow(index, result))
        self.paths.extend((*self.paths[index], k) for k in range(len(more)))
        self.tasks.extend(more)
        return len(more)

    def ordered(self, results: list[Any]) -> list[Any]:
        """``results`` (by task index) ordered by generation, then by path: the first tasks in their order, then
        their follow-ups by parent and position, and so on."""
        order = sorted(range(len(results)), key=lambda i: (len(self.paths[i]), self.paths[i]))
        return [results[i] for i in order]

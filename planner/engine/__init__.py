"""Where independent work runs: in this process, in local worker processes, or on a Dask cluster.

The core fans out embarrassingly parallel work (one forecast fit per series, one
simulation replication per seed, one calibration per capacity point) through
:func:`run_tasks`. Results come back in task order whatever the completion order, and
every task runs with BLAS limited to one thread in every engine, so the engine never
changes an output: the same tasks give the same bits locally, in a process pool or on
a cluster. Randomness is never drawn from shared state: a task carries its own seed
(a child of the run's ``SeedSequence``), so where or when it runs does not matter.

- ``local``: a plain loop in this process (debugging, tiny inputs, tests).
- ``processes``: a pool of local worker processes (:mod:`.processes`).
- ``dask``: a Dask cluster (:mod:`.cluster`): the scheduler at ``scheduler`` or
  ``$DASK_SCHEDULER_ADDRESS``, else an embedded LocalCluster of ``workers`` processes.
  Tasks whose worker dies are retried.
- ``auto``: ``processes`` when more than one core and more than one task, else ``local``.

Progress: ``progress(done, total)`` is called in the calling process after each task,
whatever the engine.

Follow-up work: ``follow(i, result)``, called in the calling process as each task's result
arrives, may return tasks that need that result (a calibrated unit's larger pools need its
lone rate). They start at once, beside the tasks still running, so no core waits for the
slowest task of a stage before the next stage begins. Their results follow the first
tasks', by parent and then by position in what ``follow`` returned, whatever the completion
order, so the outputs are the same as running the stages one after the other.

A worker that dies never yields a partial result: the run either completes or raises
:class:`WorkerLostError` (exit code 1) naming the task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from planner.engine.cluster import SCHEDULER_ENV, parse_scheduler, scheduler_address
from planner.engine.common import FollowUps, WorkerLostError, available_cores
from planner.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "processes", "dask", "auto")

__all__ = ["ENGINES", "SCHEDULER_ENV", "WorkerLostError", "available_cores", "check_engine", "resolve_engine",
           "run_tasks", "scheduler_address"]


def check_engine(engine: str, scheduler: str | None = None, workers: int | None = None) -> None:
    """Validate the engine options before any work starts (the CLI calls this first).

    Raises InputError for an unknown engine, ``--scheduler`` without ``--engine dask``,
    a malformed scheduler address (also in ``$DASK_SCHEDULER_ADDRESS`` when the engine
    is ``dask``), or fewer than one worker.
    """
    _check_name_and_workers(engine, workers)
    if scheduler is not None and str(scheduler).strip():
        if engine != "dask":
            raise InputError(f"--scheduler needs --engine dask (the engine is '{engine}')", where="--scheduler",
                             fix="add --engine dask, or drop --scheduler")
        parse_scheduler(scheduler)
    elif engine == "dask":
        scheduler_address(None)


def _check_name_and_workers(engine: str, workers: int | None) -> None:
    if engine not in ENGINES:
        raise InputError(f"unknown engine '{engine}'", where="--engine", fix=f"use one of {', '.join(ENGINES)}")
    if workers is not None and workers < 1:
        raise InputError(f"workers must be at least 1, got {workers}", where="--workers",
                         fix="pass a positive integer")


def resolve_engine(engine: str, n_tasks: int, workers: int | None) -> tuple[str, int]:
    """The concrete engine and worker count for ``n_tasks`` tasks.

    The count is ``workers`` (default: one per core), never more than the tasks; for
    ``dask`` it sizes the embedded LocalCluster (an existing cluster keeps its own workers).
    """
    _check_name_and_workers(engine, workers)
    cores = available_cores()
    if engine == "auto":
        engine = "processes" if cores > 1 and n_tasks > 1 else "local"
    n_workers = max(1, min(workers or cores, max(n_tasks, 1)))
    return engine, n_workers


def _run_local(fn: Callable[[Any], Any], queue: FollowUps, progress: Callable[[int, int], None] | None) -> list[Any]:
    from threadpoolctl import threadpool_limits

    results: list[Any] = []
    with threadpool_limits(limits=1):
        i = 0
        while i < len(queue.tasks):
            results.append(fn(queue.tasks[i]))
            queue.arrived(i, results[-1])
            if progress:
                progress(i + 1, len(queue.tasks))
            i += 1
    return results


Follow = Callable[[int, Any], Sequence[Any]]
"""``follow(i, result)``: the tasks that task i's result calls for (module docstring)."""


def run_tasks(fn: Callable[[T], R], tasks: Sequence[T], engine: str = "auto", workers: int | None = None,
              progress: Callable[[int, int], None] | None = None, scheduler: str | None = None,
              follow: Follow | None = None) -> list[R]:
    """Apply ``fn`` to every task; return results in task order.

    ``fn`` must be a top-level function and tasks must pickle (except with ``local``).
    ``workers``: worker processes for ``processes`` and the embedded Dask cluster
    (default: one per core). ``scheduler``: a Dask scheduler address (``dask`` only;
    default ``$DASK_SCHEDULER_ADDRESS``, else an embedded cluster).
    ``progress(done, total)`` is called in this process after each completed task.
    A task's exception is re-raised here; a worker death is a WorkerLostError.
    ``follow`` adds follow-up tasks as results arrive (module docstring); ``total`` then counts the tasks known so
    far. The worker count is sized for the first tasks, at least two when ``follow`` may add more.
    """
    queue = FollowUps(list(tasks), follow)
    check_engine(engine, scheduler, workers)
    engine, n_workers = resolve_engine(engine, len(queue.tasks) + (follow is not None), workers)
    if engine == "local" or not queue.tasks:
        return queue.ordered(_run_local(fn, queue, progress))
    if engine == "processes":
        from planner.engine.processes import run_processes

        return queue.ordered(run_processes(fn, queue, n_workers, progress))
    from planner.engine.cluster import run_dask

    return queue.ordered(run_dask(fn, queue, n_workers, progress, scheduler))

"""Where independent work runs: in this process, or in a pool of local processes.

The core fans out embarrassingly parallel work (one forecast fit per series, later
one simulation replication per seed) through ``run_tasks``. Results come back in
task order whatever the completion order, so the engine never changes an output.

- ``local``: a plain loop in this process (debugging, tiny inputs, tests).
- ``processes``: ``concurrent.futures.ProcessPoolExecutor`` with the ``spawn``
  start method (safe with threads in the parent, the same on every OS). ``fn`` must
  be a top-level function and tasks must pickle.
- ``auto``: ``processes`` when more than one core and more than one task, else
  ``local``.

Every task runs with BLAS limited to one thread, in both engines. That avoids
oversubscription (n processes x n BLAS threads on n cores) and makes floating-point
results independent of the engine: the same task gives the same bits locally and
in a worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any, TypeVar

from planner.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "processes", "auto")
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_engine(engine: str, n_tasks: int, workers: int | None) -> tuple[str, int]:
    """The concrete engine and worker count for ``n_tasks`` tasks."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine '{engine}'", where="engine", fix=f"use one of {', '.join(ENGINES)}")
    if workers is not None and workers < 1:
        raise InputError(f"workers must be at least 1, got {workers}", where="workers", fix="pass a positive integer")
    cores = available_cores()
    if engine == "auto":
        engine = "processes" if cores > 1 and n_tasks > 1 else "local"
    n_workers = max(1, min(workers or cores, max(n_tasks, 1)))
    return engine, n_workers


def _init_worker() -> None:
    """Limit BLAS to one thread for the worker's lifetime (env for libraries not yet loaded)."""
    for name in _THREAD_VARS:
        os.environ[name] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def run_tasks(fn: Callable[[T], R], tasks: Sequence[T], engine: str = "auto", workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> list[R]:
    """Apply ``fn`` to every task; return results in task order.

    ``progress(done, total)`` is called in this process after each completed task.
    The first exception raised by a task is re-raised here after the pool shuts down.
    """
    tasks = list(tasks)
    total = len(tasks)
    engine, n_workers = resolve_engine(engine, total, workers)
    results: list[Any] = [None] * total
    if engine == "local" or total == 0:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            for i, task in enumerate(tasks):
                results[i] = fn(task)
                if progress:
                    progress(i + 1, total)
        return results
    done = 0
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=get_context("spawn"),
                             initializer=_init_worker) as pool:
        pending: dict[Future[Any], int] = {pool.submit(fn, t): i for i, t in enumerate(tasks)}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: pending[f]):
                    index = pending.pop(fut)
                    results[index] = fut.result()
                    done += 1
                    if progress:
                        progress(done, total)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    return results

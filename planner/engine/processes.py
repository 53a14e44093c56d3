"""The ``processes`` engine: a pool of local worker processes.

``concurrent.futures.ProcessPoolExecutor`` with the ``spawn`` start method (safe with
threads in the parent, the same on every OS), so ``fn`` must be a top-level function and
tasks must pickle. Each worker limits BLAS to one thread before its first task
(:func:`planner.engine.common.limit_threads`).

A task's exception is re-raised in the parent after the pool shuts down. A worker that
dies (killed, out of memory, a crash in compiled code) breaks the pool; that becomes a
:class:`~planner.engine.common.WorkerLostError` naming the tasks that were running,
never a partial result. This engine does not retry; the ``dask`` engine does.

**Workers never outlive the run.** When the parent stops early (an exception, Ctrl-C,
SIGTERM) it terminates its workers before it re-raises, instead of waiting for their
running tasks. When the parent is killed outright (SIGKILL, the OOM killer) nothing in
it runs, so each worker arranges its own end when it starts: on Linux the kernel sends
it SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``), which works even while
the worker is deep in compiled code; elsewhere a watch thread in the worker exits it
within a second of its parent process changing. The death signal is tied to the thread
that started the worker, which is the thread that submits the tasks and waits in
:func:`run_processes` until the pool is shut down. Workers ignore SIGINT: Ctrl-C reaches
the whole process group, and only the parent decides what to do with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any

from planner.engine.common import FollowUps, WorkerLostError, limit_threads, task_label

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_S = 0.5
STOP_WAIT_S = 5.0
"""How long stopped workers get to exit after SIGTERM before they are killed."""


def _die_with_parent(parent_pid: int) -> None:
    """End this worker when ``parent_pid`` dies (module docstring)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent_pid:  # the parent died before the death signal was armed
                os._exit(1)
            return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="planner-parent-watch", daemon=True).start()


def start_worker(parent_pid: int) -> None:
    """Every worker's initializer: die with the parent, leave SIGINT to it, one BLAS thread."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_threads()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's workers now (not after their running tasks) and wait until they are gone."""
    # The executor offers no public way to stop running workers before Python 3.14
    # (``terminate_workers``); its ``_processes`` map is the same in 3.11 to 3.13.
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    deadline = time.monotonic() + STOP_WAIT_S
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()


def run_processes(fn: Callable[[Any], Any], tasks: Sequence[Any] | FollowUps, n_workers: int,
                  progress: Callable[[int, int], None] | None, deadline: float | None = None) -> list[Any]:
    """Apply ``fn`` to every task in ``n_workers`` processes; results by task index.

    ``tasks`` may be a :class:`~planner.engine.common.FollowUps`, whose follow-up tasks are submitted as the
    results that call for them arrive. ``deadline`` (a ``time.monotonic()`` value): once it passes, the workers
    are stopped and every task not finished by then has the result None. A task deep in compiled code that does
    not check the clock is stopped all the same.
    """
    queue = tasks if isinstance(tasks, FollowUps) else FollowUps(list(tasks))
    results: list[Any] = [None] * len(queue.tasks)
    done = 0
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=get_context("spawn"),
                             initializer=start_worker, initargs=(os.getpid(),)) as pool:
        pending: dict[Future[Any], int] = {pool.submit(fn, t): i for i, t in enumerate(queue.tasks)}
        try:
            while pending:
                timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                finished, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
                if not finished:  # the deadline passed with tasks still running
                    _stop_workers(pool)
                    break
                for fut in sorted(finished, key=lambda f: pending[f]):
                    index = pending[fut]
                    try:
                        results[index] = fut.result()
                    except BrokenProcessPool as exc:
                        running = sorted(i for f, i in pending.items() if f.running() or f is fut)
                        names = ", ".join(task_label(fn, i, len(queue.tasks)) for i in running[:3])
                        raise WorkerLostError(
                            f"a worker process died while running {names}; no result was kept",
                            where="engine processes",
                            fix="a worker usually dies from running out of memory: use fewer --workers, "
                                "or --engine dask, which retries a task whose worker died, or --engine local "
                                "to see the failure in this process") from exc
                    del pending[fut]
                    known = len(queue.tasks)
                    for i in range(known, known + queue.arrived(index, results[index])):
                        results.append(None)
                        pending[pool.submit(fn, queue.tasks[i])] = i
                    done += 1
                    if progress:
                        progress(done, len(queue.tasks))
        except BaseException:
            for fut in pending:
                fut.cancel()
            _stop_workers(pool)
            raise
    return results


@contextlib.contextmanager
def in_background(fn: Callable[[Any], Any], task: Any) -> Iterator[Future[Any]]:
    """``fn(task)`` in one worker process while the caller goes on; ``result()`` of the future it yields waits for
    it. Leaving the block by an exception (an error, Ctrl-C, SIGTERM) stops the worker at once, as
    :func:`run_processes` does; leaving it normally waits for the worker to end."""
    pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"), initializer=start_worker,
                               initargs=(os.getpid(),))
    try:
        future = pool.submit(fn, task)
        yield future
    except BaseException:
        future.cancel()
        _stop_workers(pool)
        raise
    pool.shutdown(wait=True)

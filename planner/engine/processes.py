"""The ``processes`` engine: a pool of local worker processes.

``concurrent.futures.ProcessPoolExecutor`` with the ``spawn`` start method (safe with
threads in the parent, the same on every OS), so ``fn`` must be a top-level function and
tasks must pickle. Each worker limits BLAS to one thread before its first task
(:func:`planner.engine.common.limit_threads`).

A task's exception is re-raised in the parent after the pool shuts down. A worker that
dies (killed, out of memory, a crash in compiled code) breaks the pool; that becomes a
:class:`~planner.engine.common.WorkerLostError` naming the tasks that were running,
never a partial result. This engine does not retry; the ``dask`` engine does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any

from planner.engine.common import WorkerLostError, limit_threads, task_label


def run_processes(fn: Callable[[Any], Any], tasks: Sequence[Any], n_workers: int,
                  progress: Callable[[int, int], None] | None) -> list[Any]:
    """Apply ``fn`` to every task in ``n_workers`` processes; results in task order."""
    total = len(tasks)
    results: list[Any] = [None] * total
    done = 0
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=get_context("spawn"),
                             initializer=limit_threads) as pool:
        pending: dict[Future[Any], int] = {pool.submit(fn, t): i for i, t in enumerate(tasks)}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: pending[f]):
                    index = pending[fut]
                    try:
                        results[index] = fut.result()
                    except BrokenProcessPool as exc:
                        running = sorted(i for f, i in pending.items() if f.running() or f is fut)
                        names = ", ".join(task_label(fn, i, total) for i in running[:3])
                        raise WorkerLostError(
                            f"a worker process died while running {names}; no result was kept",
                            where="engine processes",
                            fix="a worker usually dies from running out of memory: use fewer --workers, "
                                "or --engine dask, which retries a task whose worker died, or --engine local "
                                "to see the failure in this process") from exc
                    del pending[fut]
                    done += 1
                    if progress:
                        progress(done, total)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    return results

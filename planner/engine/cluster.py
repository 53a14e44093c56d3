"""The ``dask`` engine: tasks on a Dask cluster, an existing one or an embedded LocalCluster.

**Which cluster.** ``scheduler`` (the CLI's ``--scheduler``), else the environment
variable ``DASK_SCHEDULER_ADDRESS``, names an existing scheduler, e.g.
``tcp://scheduler:8786`` (a Kubernetes ``DaskCluster``'s scheduler service). Without
either, an embedded ``LocalCluster`` runs ``workers`` worker processes with one thread
each, no dashboard and quiet logs. The engine closes what it opens (client, embedded
cluster), also on an error or Ctrl-C; it never shuts down an existing cluster.

**What travels.** Each task goes to the scheduler as one pickled ``bytes`` object
(``cloudpickle`` of ``(fn, task)``), so Dask never walks its fields (it descends into
lists, tuples and dicts looking for futures, which costs time on a long tuple) and its
size is exactly what the caller built. At most ``max(64, 4 x worker threads)`` tasks are
in flight; when half of them have finished, the next half-window goes in batches of up to
4 MiB (one message to the scheduler per batch costs less per task than one message each),
so the scheduler holds a bounded window of inputs, not all of them. Keys are ``planner-<fn>-<run id>-<task index>``: the
index names the task in errors, the random run id keeps two runs on one shared cluster
apart. Results come back in task order; ``progress(done, total)`` is called here, in the
parent, as each task finishes.

**Failures.** A task that raises an ordinary exception is retried ``RETRIES`` times
(Dask's ``retries=``) and then re-raised here; a PlannerError is not retried (it is
deterministic) and is re-raised as it is. A task whose worker dies is re-run on another
worker by the scheduler, up to ``RETRIES`` more times on the embedded cluster (the
scheduler's ``allowed_failures``; an existing cluster keeps its own setting, 3 by
default); past that it fails the run with a :class:`WorkerLostError` naming the task.
A run never returns a partial result: the first failure cancels every other task.

**Same bits.** Workers run :func:`planner.engine.common.call_single_threaded`, which
limits BLAS to one thread exactly as the other engines do, so a task's result does not
depend on where it ran. Workers need the same planner version installed as the client;
the engine checks the version on every worker when it connects.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from planner.engine.common import FollowUps, TaskRaised, WorkerLostError, call_single_threaded, task_label
from planner.errors import InputError

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
RETRIES = 2
"""Extra attempts per task: for an exception raised by the task, and (embedded cluster) for worker deaths."""
CONNECT_TIMEOUT_S = 20
MIN_IN_FLIGHT = 64
MAX_BATCH_BYTES = 4 * 2**20
"""Largest batch of task inputs sent to the scheduler in one message (Dask warns from 10 MB)."""
_ADDRESS = re.compile(r"^(?:(tcp|tls|ucx|ws|wss)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def parse_scheduler(address: str, where: str = "--scheduler") -> str:
    """A Dask scheduler address as given (``tcp://host:8786``, ``tls://...``, ``host:8786``), checked."""
    text = str(address).strip()
    match = _ADDRESS.match(text)
    if not match or not 0 < int(match.group(3)) < 65536:
        raise InputError(f"'{address}' is not a Dask scheduler address", where=where,
                         fix="give protocol, host and port, e.g. tcp://scheduler:8786 "
                             "(the scheduler prints it at start-up; 8786 is Dask's default port)")
    return text


def scheduler_address(scheduler: str | None) -> str | None:
    """The scheduler to use: ``scheduler``, else ``$DASK_SCHEDULER_ADDRESS``, else None (embedded cluster)."""
    if scheduler is not None and str(scheduler).strip():
        return parse_scheduler(scheduler)
    env = os.environ.get(SCHEDULER_ENV, "").strip()
    return parse_scheduler(env, where=SCHEDULER_ENV) if env else None


@contextmanager
def local_cluster(n_workers: int) -> Iterator[Any]:
    """An embedded LocalCluster of ``n_workers`` one-thread worker processes, closed on exit.

    Workers are separate processes under a nanny (a worker that dies is restarted), the
    scheduler allows ``RETRIES`` worker deaths per task, and only critical log lines show.
    Worker saturation 1.0: a worker holds only the task it runs, none queued behind it,
    so a worker's death counts against that task alone (Dask's default, 1.1, lets a
    second, innocent task on the dying worker use up one of its attempts). No dashboard;
    the scheduler's health endpoint takes a free local port.

    Workers start without Dask's ``MALLOC_TRIM_THRESHOLD_=65536``: with it, glibc hands
    freed heap back to the OS at once and the forecaster's arrays (76 KB per 13-month
    series) fault their pages in again: measured at about 11,000 minor page faults and
    20 ms of system CPU per forecast task (about 18 % more CPU), against about 900 and
    5 ms in a worker without it. BLAS stays at one thread (Dask's own
    ``OMP/MKL/OPENBLAS_NUM_THREADS=1``).
    The nannies write those variables into this process's environment; it is restored
    on exit.
    """
    import dask
    from distributed import LocalCluster

    environ = dict(os.environ)  # each nanny writes its workers' variables into this process's environment
    settings = {"distributed.scheduler.worker-saturation": 1.0,
                "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}
    with dask.config.set(settings):
        cluster = LocalCluster(  # type: ignore[no-untyped-call]  # distributed leaves it unannotated
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
            silence_logs=logging.CRITICAL,
            scheduler_kwargs={"allowed_failures": RETRIES, "dashboard_address": "127.0.0.1:0"})
    try:
        yield cluster
    finally:
        cluster.close()
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        os.environ.update(environ)


def planner_version() -> str:
    """The planner version of the process that runs it (called on every worker)."""
    from planner import __version__

    return __version__


def _connect(stack: ExitStack, target: Any, address: str | None, where: str) -> Any:
    """A client of ``target`` (an address or a LocalCluster), closed by ``stack``; checks an existing cluster."""
    from distributed import Client

    from planner import __version__

    try:
        client = Client(  # type: ignore[no-untyped-call]  # distributed leaves it unannotated
            target, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address}: {exc}", where=where,
                         fix="check the address and that the scheduler is running and reachable from here "
                             f"(a Kubernetes DaskCluster: its '<name>-scheduler' service, port 8786); or unset "
                             f"{SCHEDULER_ENV} and drop --scheduler to use a local cluster") from exc
    stack.callback(client.close)
    if address is not None:
        try:
            versions = client.run(planner_version)
        except Exception as exc:  # a worker without planner cannot even unpickle the call
            raise InputError(f"the workers of {address} cannot run planner: {type(exc).__name__}: {exc}",
                             where=where, fix=f"install planner {__version__} in the workers' image") from exc
        wrong = sorted({v for v in versions.values() if v != __version__})
        if wrong:
            raise InputError(f"workers of {address} run planner {', '.join(wrong)}, this is {__version__}",
                             where=where, fix=f"install planner {__version__} on every worker")
    return client


def _run_payload(payload: bytes) -> Any:
    """Worker side: unpickle ``(fn, task)`` and run it single-threaded."""
    import cloudpickle

    fn, task = cloudpickle.loads(payload)
    return call_single_threaded(fn, task)


def run_dask(fn: Callable[[Any], Any], tasks: Sequence[Any] | FollowUps, n_workers: int,
             progress: Callable[[int, int], None] | None, scheduler: str | None = None) -> list[Any]:
    """Apply ``fn`` to every task on a Dask cluster (module docstring); results by task index, follow-ups of a
    :class:`~planner.engine.common.FollowUps` submitted as the results that call for them arrive."""
    address = scheduler_address(scheduler)
    where = "--scheduler" if scheduler else SCHEDULER_ENV
    with ExitStack() as stack:
        target = address if address is not None else stack.enter_context(local_cluster(n_workers))
        client = _connect(stack, target, address, where)
        return _gather(client, fn, tasks if isinstance(tasks, FollowUps) else FollowUps(list(tasks)), progress)


def _gather(client: Any, fn: Callable[[Any], Any], work: FollowUps,
            progress: Callable[[int, int], None] | None) -> list[Any]:
    from concurrent.futures import CancelledError

    import cloudpickle
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    tasks = work.tasks  # grows as results call for follow-ups
    results: list[Any] = [None] * len(tasks)
    name = re.sub(r"[^A-Za-z0-9_.]", "_", getattr(fn, "__qualname__", type(fn).__name__))
    run_id = uuid.uuid4().hex[:12]
    window = max(MIN_IN_FLIGHT, 4 * sum(client.nthreads().values()))
    index_of: dict[str, int] = {}
    live: dict[str, Any] = {}
    queue = as_completed(loop=client.loop)  # type: ignore[no-untyped-call]  # unannotated in distributed
    submitted = 0

    def refill() -> None:
        """Top the in-flight tasks up to ``window``, in batches of at most ``MAX_BATCH_BYTES``."""
        nonlocal submitted
        while submitted < len(tasks) and len(live) < window:
            first, size = submitted, 0
            payloads: list[bytes] = []
            while submitted < len(tasks) and len(live) + len(payloads) < window and size < MAX_BATCH_BYTES:
                payloads.append(cloudpickle.dumps((fn, tasks[submitted]), protocol=5))
                size += len(payloads[-1])
                submitted += 1
            keys = [f"planner-{name}-{run_id}-{i:07d}" for i in range(first, submitted)]
            futures = client.map(_run_payload, payloads, key=keys, pure=False, retries=RETRIES)
            for i, fut in enumerate(futures, start=first):
                index_of[fut.key] = i
                live[fut.key] = fut
                queue.add(fut)  # type: ignore[no-untyped-call]  # unannotated in distributed

    try:
        refill()
        for done, fut in enumerate(queue, start=1):
            i = index_of[fut.key]
            label = task_label(fn, i, len(tasks))
            try:
                value = fut.result()
            except KilledWorker as exc:
                raise WorkerLostError(
                    f"{label} was tried on {exc.allowed_failures + 1} Dask workers and each died while "
                    f"running it (last: {exc.last_worker.address}); no result was kept",
                    where=f"dask task {fut.key}",
                    fix="a worker usually dies from running out of memory: give the workers more memory "
                        "(dask worker --memory-limit, or the DaskCluster's worker resources) and check the "
                        "worker logs; --engine local runs the same task in this process") from exc
            except CancelledError as exc:
                raise WorkerLostError(
                    f"the Dask scheduler cancelled {label} ({getattr(exc, 'reason', exc)}); no result was kept",
                    where=f"dask task {fut.key}",
                    fix="check the scheduler is still running and reachable from here, then rerun") from exc
            if isinstance(value, TaskRaised):
                raise value.error
            results[i] = value
            live.pop(fut.key).release()
            work.arrived(i, value)
            results.extend([None] * (len(tasks) - len(results)))
            if progress:
                progress(done, len(tasks))
            if submitted < len(tasks) and len(live) <= window // 2:
                refill()
    except BaseException:
        if live:
            client.cancel(list(live.values()), force=True)
        raise
    return results

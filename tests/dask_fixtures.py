"""A 2-worker Dask LocalCluster shared by a test module, and the cross-engine equality check.

A test module that declares ``pytest_plugins = ("dask_fixtures",)`` gets two fixtures:
``dask_cluster``, one cluster for all the tests of that module, and
``same_on_every_engine``, which runs a workflow on ``local``, ``processes`` (2 workers)
and ``dask`` (that cluster, reached through ``DASK_SCHEDULER_ADDRESS``, so the workflow
needs no ``scheduler`` argument) and asserts the three outputs are equal. For any
fanned-out step::

    pytest_plugins = ("dask_fixtures",)

    def test_same_bits(same_on_every_engine):
        same_on_every_engine(lambda **engine: write_bytes(run_step(inputs, **engine)))

The functions the engine tests run on workers are in ``engine_tasks.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from planner.engine import SCHEDULER_ENV
from planner.engine.cluster import local_cluster

WORKERS = 2


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[Any]:
    """One embedded 2-worker LocalCluster (the engine's own settings) for the whole module."""
    with local_cluster(WORKERS) as cluster:
        yield cluster


@pytest.fixture
def same_on_every_engine(dask_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[..., Any]], Any]:
    """``check(call)``: ``call(engine=..., workers=...)`` on every engine must give equal results; returns one."""

    def check(call: Callable[..., Any]) -> Any:
        local = call(engine="local")
        processes = call(engine="processes", workers=WORKERS)
        with monkeypatch.context() as env:
            env.setenv(SCHEDULER_ENV, dask_cluster.scheduler_address)
            on_dask = call(engine="dask", workers=WORKERS)
        assert processes == local, "processes engine differs from local"
        assert on_dask == local, "dask engine differs from local"
        return local

    return check

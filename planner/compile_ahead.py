"""Compiling the simulator ahead of its first use, once per build.

:func:`compile_engine` compiles the replica engine (everything
``planner simulate`` and ``planner calibrate`` run) on a tiny pool and then writes a
marker file; :func:`is_warm` checks for it. :func:`prepare` is what a command calls
before it simulates: on a cold cache it announces the compile through a callback (only
the CLI talks to the terminal) and compiles here, once, so that worker processes find
the cache warm instead of each compiling on its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from planner.compiled_cache import cache_dir

COLD_COMPILE_S = 15
"""The replica engine's cold compile, in seconds, as announced: the median first call of
``benchmarks/compile_time.py`` on a shared 2-core machine was 15.2 s of wall time with the
prefix cache (two clean repeats, 15.0 and 15.4 s; 11.9 s without it in the same session, and
9.6 s to 15 s earlier as the other load on the machine varied)."""
MARKER = "replica-engine.compiled"


def is_warm() -> bool:
    """Whether the replica engine's compiled code for this build is in the cache."""
    return (cache_dir() / MARKER).is_file()


def compile_engine() -> None:
    """Compile (or load from the cache) the replica engine in this process, then mark the cache warm.

    Runs one replication of a tiny pool: the engine has one signature whatever the pool,
    policy or router (its state arrays have fixed types, and the policy and router are
    integer codes read at run time), so this compiles exactly what any simulation runs; then the loops that
    build the block lists of declared prefix reuse, on two blocks.
    """
    import numpy as np

    from planner.profiles.step_model import StepModel
    from planner.sim.policies import get_policy
    from planner.sim.replica.block_lists import gathered, ranks_by_table, shared_prefix_ids, stream_ids
    from planner.sim.replica.pool import ClassSpec, PoolConfig, ReplicaSpec, run_replication
    from planner.sim.workload import default_workload
    from planner.slo import ClassSlo

    replica = ReplicaSpec("compile", 1, StepModel.linear(10.0, 1e-4, 0.05), kv_capacity_tokens=50_000, max_batch=8)
    klass = ClassSpec("interactive", 1.0, 1.0, 0.0, 1024.0, 1e4, ClassSlo(ttft_p99_ms=1e4, e2e_p99_ms=1e5),
                      default_workload("interactive", "llama-3.1-8b"))
    run_replication(PoolConfig((replica,), (klass,), get_policy("fcfs"), duration_s=10.0, warmup_s=1.0),
                    np.random.SeedSequence(0))
    ptr, ids = np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int64)  # the block lists of declared reuse
    stream_ids(ptr, ids[:1])
    shared_prefix_ids(ptr, ids, ids[:1], 1, 1)
    gathered(ids, ids[:1], ids[1:])
    ranks_by_table(ids, 0, 2)
    folder = cache_dir()
    staged = folder / f".{MARKER}.{os.getpid()}"
    try:
        staged.write_text("compiled\n")
        os.replace(staged, folder / MARKER)
    except OSError:  # numba fell back to another folder it can write; the next run compiles nothing but says so
        pass


def prepare(announce: Callable[[float], None] | None = None) -> bool:
    """Compile the replica engine now if its cache is cold, first calling ``announce(expected_s)``.

    Returns whether it compiled. On a warm cache it does nothing: each process loads the
    engine when it first simulates.
    """
    if is_warm():
        return False
    if announce is not None:
        announce(COLD_COMPILE_S)
    compile_engine()
    return True

"""Run a :class:`QueueModel`: draw the jobs, call the compiled loop, keep per-job records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.sim.policies import get_policy
from planner.sim.queue.engine import T_DRR, T_FIFO, T_PREEMPTIVE, T_REMAINING, run_queue_loop
from planner.sim.queue.model import ROUTING_CODES, QueueModel
from planner.sim.queue.sampling import JobSample, draw_jobs


@dataclass(frozen=True)
class QueueRun:
    """Per-job records of one run (arrival order) plus busy time per server."""

    model: QueueModel
    seed: int
    arrival: np.ndarray
    cls: np.ndarray
    size: np.ndarray
    tokens: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    server: np.ndarray
    busy: np.ndarray
    preemptions: int

    @property
    def wait(self) -> np.ndarray:
        """Time from arrival to first entering service."""
        return np.asarray(self.start - self.arrival)

    @property
    def sojourn(self) -> np.ndarray:
        """Time from arrival to completion (T)."""
        return np.asarray(self.finish - self.arrival)

    @property
    def kept(self) -> slice:
        """Jobs after the warm-up."""
        return slice(self.model.warmup, None)


def loop_arguments(model: QueueModel, sample: JobSample) -> tuple[Any, ...]:
    """The positional arguments of :func:`run_queue_loop` for a model and its jobs."""
    spec = get_policy(model.policy)
    use_drr = spec.drr if model.class_arbiter is None else model.class_arbiter
    traits = np.zeros(4, dtype=np.int64)
    traits[[T_FIFO, T_PREEMPTIVE, T_REMAINING, T_DRR]] = (spec.fifo_within_class, spec.preemptive,
                                                          spec.uses_remaining_size, use_drr)
    weight = np.array([c.weight for c in model.classes], dtype=np.float64)
    jump = np.array([c.priority_jump for c in model.classes], dtype=np.float64)
    quanta = np.array([c.quantum_tokens for c in model.classes], dtype=np.float64)
    return (
        sample.arrival,
        sample.cls,
        sample.size,
        sample.predicted,
        sample.tokens,
        sample.route_u,
        weight,
        model.class_mu.astype(np.float64),
        jump,
        quanta,
        spec.encoding(dict(model.policy_params)).key.packed(),
        traits,
        np.asarray(model.speeds, dtype=np.float64),
        int(ROUTING_CODES[model.routing]),
        int(model.power_d),
    )


def simulate_queue(model: QueueModel, seed: int = 0, sample: JobSample | None = None) -> QueueRun:
    """Simulate ``model`` with the jobs drawn from ``seed`` (or the given ``sample``)."""
    jobs = sample if sample is not None else draw_jobs(model, seed)
    start, finish, server, busy, preemptions = run_queue_loop(*loop_arguments(model, jobs))
    return QueueRun(
        model=model,
        seed=seed,
        arrival=jobs.arrival,
        cls=jobs.cls,
        size=jobs.size,
        tokens=jobs.tokens,
        start=start,
        finish=finish,
        server=server,
        busy=busy,
        preemptions=int(preemptions),
    )

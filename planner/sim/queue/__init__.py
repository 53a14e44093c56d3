"""Multiclass queue engine: the model, its random draws, the compiled loop and its summary.

Used for the analytic checks (P-K, Cobham, Erlang C, Little) and the reference
experiments E1–E4; the LLM replica model lives in :mod:`planner.sim.replica`.
"""

from planner.sim.queue.model import (
    ROUTING_CODES,
    ArrivalProcess,
    QueueClass,
    QueueModel,
    ServiceDist,
    rate_for_load,
)
from planner.sim.queue.run import QueueRun, simulate_queue
from planner.sim.queue.sampling import JobSample, draw_jobs
from planner.sim.queue.summary import QueueSummary, summarize

__all__ = [
    "ROUTING_CODES",
    "ArrivalProcess",
    "JobSample",
    "QueueClass",
    "QueueModel",
    "QueueRun",
    "QueueSummary",
    "ServiceDist",
    "draw_jobs",
    "rate_for_load",
    "simulate_queue",
    "summarize",
]

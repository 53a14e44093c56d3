"""Closing the loop: capacity from the simulator, plans re-solved until every class meets its SLO."""

from planner.loop.compare import PolicyOutcome, compare_policies, comparison_table, parse_policies
from planner.loop.derate import Miss, derate, find_misses
from planner.loop.run import LoopResult, LoopSettings, peak_gpus, run_loop

__all__ = ["LoopResult", "LoopSettings", "Miss", "PolicyOutcome", "compare_policies", "comparison_table", "derate",
           "find_misses", "parse_policies", "peak_gpus", "run_loop"]

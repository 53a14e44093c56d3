"""The fast loop: a multiclass queue for theory checks and reference experiments, and an LLM
replica model for planning, sharing one registry of scheduling policies."""

from planner.compiled_cache import use_cache_dir

use_cache_dir()  # before any subpackage defines a compiled function: numba fixes its cache folder then

"""Fast-loop calibration: capacity coefficients per (model, SKU, class) found by simulation.

For each (model, SKU) the scenario allows, under one policy and one class mix: the highest
request rate per replica at which every p99 SLO each class sets for the model (TTFT, TPOT,
end to end) holds with a stated confidence, found by bisection over simulated rates with
common random numbers, in process. The answer becomes per-class coefficients in the capacity table that
``planner place --capacity`` reads. Each pair's answer is cached under a hash of its inputs,
so an unchanged pair is never simulated again.

Modules: ``inputs`` (settings, class mix, one task per pair), ``probe`` (simulate one rate;
the predicate and common random numbers), ``search`` (the bisection and why it is monotone
in the SLO), ``pair`` (one pair's search as a task), ``cache``, ``table`` (per-class
coefficients, the table and its writer) and ``run`` (:func:`calibrate`).
"""

from planner.calibrate.cache import CALIBRATION_VERSION, default_cache_dir
from planner.calibrate.run import DEFAULT_DURATION_S, DEFAULT_REPLICATIONS, calibrate
from planner.calibrate.table import CalibrationResult, write_calibration

__all__ = [
    "CALIBRATION_VERSION",
    "DEFAULT_DURATION_S",
    "DEFAULT_REPLICATIONS",
    "CalibrationResult",
    "calibrate",
    "default_cache_dir",
    "write_calibration",
]

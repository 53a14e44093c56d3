"""Fast-loop calibration: capacity coefficients per (model, SKU, TP, class) found by simulation.

For each (model, SKU, tensor-parallel degree) the scenario may deploy, under one policy and
one class mix: the engine setting (batch cap, token budget) and the highest request rate per
replica at which every p99 SLO each class sets for the model (TTFT, TPOT, end to end) holds
with a stated confidence, found by bisection over simulated rates with common random
numbers, in process. The answer becomes per-class coefficients in the capacity table that
``planner place --capacity`` reads. Each unit's answer is cached under a hash of its inputs,
so an unchanged unit is never simulated again.

Modules: ``inputs`` (settings, class mix, the engine-setting grid, one task per unit),
``probe`` (simulate one rate; the predicate and common random numbers), ``search`` (the
bisection and why it is monotone in the SLO), ``unit`` (one unit's search over its engine
settings, with pruning, as a task), ``pools`` (the unit again at larger pool sizes, and the
law that makes their rates non-decreasing), ``cache`` (keys and the store protocol), ``table``
(per-class coefficients, the table and its files) and ``run`` (:func:`calibrate`).
"""

from planner.calibrate.cache import CalibrationStore
from planner.calibrate.fingerprint import CALIBRATION_VERSION
from planner.calibrate.run import (
    DEFAULT_DURATION_S,
    DEFAULT_REPLICATIONS,
    CalibrationPlan,
    calibrate,
    calibrate_together,
    plan_calibration,
)
from planner.calibrate.table import CalibrationResult, calibration_files

__all__ = [
    "CALIBRATION_VERSION",
    "DEFAULT_DURATION_S",
    "DEFAULT_REPLICATIONS",
    "CalibrationPlan",
    "CalibrationResult",
    "CalibrationStore",
    "calibrate",
    "calibrate_together",
    "calibration_files",
    "plan_calibration",
]

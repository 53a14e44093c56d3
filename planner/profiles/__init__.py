"""Model profiles: per (model, SKU, TP, engine), the replica's GPUs, KV capacity and step-time model.

``load_profiles`` reads and validates the bundled table (and a scenario's own files);
``profile_for`` looks one up. The table is built by ``build.build_profiles`` from measured kernel
tables (``measured.py``) and a calibrated roofline (``roofline.py``); see ``data/README.md``.
"""

from __future__ import annotations

from planner.profiles.loader import (
    PROFILE_COLUMNS,
    SOURCES,
    load_models,
    load_profiles,
    profile_for,
    profiles_of,
    step_model_of,
    validate_profiles,
)
from planner.profiles.step_model import StepModel

__all__ = ["PROFILE_COLUMNS", "SOURCES", "StepModel", "load_models", "load_profiles", "profile_for",
           "profiles_of", "step_model_of", "validate_profiles"]

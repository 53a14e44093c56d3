"""Model profiles: per (model, SKU), the replica size, KV capacity and step-time coefficients.

``load_profiles`` reads and validates the bundled table; ``profile_for`` looks one up.
The table is built by ``build.build_profiles`` from measured runs (``fit.py``) and a
calibrated roofline (``roofline.py``); see ``data/README.md`` for every column.
"""

from __future__ import annotations

from planner.profiles.loader import PROFILE_COLUMNS, SOURCES, load_profiles, profile_for, validate_profiles

__all__ = ["PROFILE_COLUMNS", "SOURCES", "load_profiles", "profile_for", "validate_profiles"]

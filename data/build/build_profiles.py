"""Build ``data/profiles/``: the model geometry, the profile table and the roofline's check.

Inputs: the Hugging Face configs and measured kernel tables that ship with
``aiconfigurator-core`` (a dependency, Apache-2.0), and the catalog's ``skus.csv``. Outputs,
each written atomically and byte-identical for identical inputs:

* ``models.csv``: one row per served model (``planner/profiles/geometry.py``);
* ``profiles.csv``: one row per (model, SKU, TP, engine) with its step model and its error;
* ``roofline_check.csv``: the roofline's error on each measured SKU, left out of its fit;
* ``roofline_efficiency.csv``: the roofline's fitted constants per engine.

    python data/build/build_profiles.py [--skus CSV] [--out-dir DIR]

It takes a few minutes: every measured profile is fitted and checked on its whole grid.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from planner.errors import PlannerError
from planner.paths import catalog_dir, profiles_dir
from planner.profiles.build import build_profiles
from planner.profiles.loader import MODELS_FILE, PROFILES_FILE, validate_models, validate_profiles
from planner.profiles.measured import hf_geometries
from planner.profiles.specs import read_sku_specs
from planner.storage import write_table_atomic

ROOFLINE_CHECK_FILE = "roofline_check.csv"
ROOFLINE_EFFICIENCY_FILE = "roofline_efficiency.csv"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skus", type=Path, default=catalog_dir() / "skus.csv", help="catalog SKU table")
    parser.add_argument("--out-dir", type=Path, default=profiles_dir(), help="where to write the tables")
    args = parser.parse_args(argv)
    try:
        geometries = hf_geometries()
        models = pd.DataFrame([g.to_row() for g in geometries.values()])
        build = build_profiles(geometries, read_sku_specs(args.skus), progress=lambda m: print(m, flush=True))
        validate_models(models, args.out_dir / MODELS_FILE)
        validate_profiles(build.profiles, args.out_dir / PROFILES_FILE)
        write_table_atomic(args.out_dir / MODELS_FILE, models)
        write_table_atomic(args.out_dir / ROOFLINE_CHECK_FILE, build.roofline_check)
        write_table_atomic(args.out_dir / ROOFLINE_EFFICIENCY_FILE, build.efficiency)
        write_table_atomic(args.out_dir / PROFILES_FILE, build.profiles)
    except PlannerError as error:
        print(error, file=sys.stderr)
        return error.exit_code
    print(f"wrote {len(models)} models and {len(build.profiles)} profiles to {args.out_dir}")
    print(build.roofline_check.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build ``data/profiles/profiles.csv`` and ``data/profiles/fit_report.csv``.

Inputs: the measured runs (Splitwise ``perf_model.csv``, vendored as
``data/profiles/splitwise_perf_model.csv``, MIT) and the catalog's ``skus.csv``. Both outputs
are written atomically and are byte-identical for identical inputs.

    python data/build/build_profiles.py [--perf CSV] [--skus CSV] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from planner.errors import PlannerError
from planner.paths import catalog_dir, profiles_dir
from planner.profiles.build import build_profiles
from planner.profiles.fit import read_perf_model
from planner.profiles.loader import PROFILES_FILE, validate_profiles
from planner.profiles.specs import read_sku_specs
from planner.storage import write_table_atomic

FIT_REPORT_FILE = "fit_report.csv"
PERF_FILE = "splitwise_perf_model.csv"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--perf", type=Path, default=profiles_dir() / PERF_FILE, help="measured runs CSV")
    parser.add_argument("--skus", type=Path, default=catalog_dir() / "skus.csv", help="catalog SKU table")
    parser.add_argument("--out-dir", type=Path, default=profiles_dir(), help="where to write the two tables")
    args = parser.parse_args(argv)
    try:
        build = build_profiles(read_perf_model(args.perf), read_sku_specs(args.skus))
        validate_profiles(build.profiles, args.out_dir / PROFILES_FILE)
        write_table_atomic(args.out_dir / FIT_REPORT_FILE, build.fit_report)
        write_table_atomic(args.out_dir / PROFILES_FILE, build.profiles)
    except PlannerError as error:
        print(error, file=sys.stderr)
        return error.exit_code
    e = build.efficiency
    print(
        f"wrote {len(build.profiles)} profiles and {len(build.fit_report)} fit rows to {args.out_dir}; "
        f"roofline eff_bw_weights={e.eff_bw_weights:.3f} eff_bw_attention={e.eff_bw_attention:.3f} "
        f"eff_flops={e.eff_flops:.3f} overhead={e.overhead_ms_per_layer:.4f} ms/layer"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

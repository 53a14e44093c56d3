"""Where each command puts the files that go beside the output path it is given.

One place for these names, so that the command that writes a file, the command that
reads it back (``simulate`` finds a plan's flows beside it) and the checks made before
any work (:mod:`planner.cli.paths`) agree. Kept free of heavy imports: the CLI checks
these paths before it loads the forecasting, placement or simulation code.
"""

from __future__ import annotations

from pathlib import Path


def _stem(path: Path) -> str:
    return path.name.removesuffix(path.suffix)


def forecast_metadata_path(out: str | Path) -> Path:
    """``forecast.csv`` -> ``forecast.meta.json``."""
    out = Path(out)
    return out.with_name(f"{_stem(out)}.meta.json")


def plan_flows_path(plan: str | Path) -> Path:
    """``plan.csv`` -> ``plan.flows.csv``: the routed demand written beside a plan."""
    plan = Path(plan)
    return plan.with_name(f"{_stem(plan)}.flows.csv")


def plan_output_paths(out: str | Path) -> list[Path]:
    """[plan, ``<stem>.flows.csv``, ``<stem>.json``]: what ``planner place --out`` writes."""
    out = Path(out)
    return [out, plan_flows_path(out), out.with_name(f"{_stem(out)}.json")]


def table_json_path(out: str | Path) -> Path:
    """``slo.csv`` -> ``slo.json``: the JSON beside a simulation result or a capacity table."""
    return Path(out).with_suffix(".json")


def experiment_paths(name: str, out_dir: str | Path) -> tuple[Path, Path]:
    """(``<name>.csv``, ``<name>.png``) in ``out_dir``: what ``planner experiment`` writes."""
    out = Path(out_dir)
    return out / f"{name}.csv", out / f"{name}.png"

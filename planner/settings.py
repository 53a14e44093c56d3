"""The run's settings, resolved once at the front door into one frozen value.

Options, environment variables and the scenario's defaults are read here and nowhere
else: the CLI resolves a :class:`Settings` before any work, the workflows pass its fields
on as plain values, and the core never looks anything up itself. What a run used is then
what it records: the seed in the run history is the one the run drew from, whether or not
``--seed`` was given.

=================  ==========================================================================
field              resolved from
=================  ==========================================================================
seed               ``--seed``, else the scenario's ``seeds.base`` (else the command's default)
quantile           ``--quantile``, else the scenario's ``capacity.forecast_quantile`` (None
                   when the command has neither: the core then reads the scenario's)
engine, workers    ``--engine``, ``--workers`` (checked here, before any work)
scheduler          ``--scheduler``, else ``$DASK_SCHEDULER_ADDRESS`` (``--engine dask`` only)
cache_dir          ``--cache-dir``, else ``$PLANNER_CACHE_DIR/calibration``, else
                   ``~/.cache/planner/calibration``; None with ``--no-cache``
=================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from planner.engine import SCHEDULER_ENV, check_engine
from planner.engine.cluster import parse_scheduler

CACHE_DIR_ENV = "PLANNER_CACHE_DIR"
"""The root of planner's caches; the calibration cache is its ``calibration`` sub-folder."""


@dataclass(frozen=True)
class Settings:
    """What a run uses, resolved once (module docstring)."""

    seed: int
    quantile: float | None = None
    engine: str = "auto"
    workers: int | None = None
    scheduler: str | None = None
    cache_dir: Path | None = None


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    """``$PLANNER_CACHE_DIR/calibration`` if that variable is set, else ``~/.cache/planner/calibration``."""
    root = environ.get(CACHE_DIR_ENV)
    return (Path(root) if root else Path.home() / ".cache" / "planner") / "calibration"


def resolve_scheduler(engine: str, scheduler: str | None, workers: int | None,
                      environ: Mapping[str, str]) -> str | None:
    """The Dask scheduler address the run uses: ``--scheduler``, else the environment's (``dask`` only)."""
    check_engine(engine, scheduler, workers)
    if scheduler is not None and scheduler.strip():
        return parse_scheduler(scheduler)
    if engine != "dask":
        return None
    address = environ.get(SCHEDULER_ENV, "").strip()
    return parse_scheduler(address, where=SCHEDULER_ENV) if address else None


def resolve_settings(environ: Mapping[str, str], *, seed: int | None, default_seed: int,
                     quantile: float | None = None, default_quantile: float | None = None,
                     engine: str = "auto", workers: int | None = None, scheduler: str | None = None,
                     cache_dir: Path | None = None, use_cache: bool = False) -> Settings:
    """One :class:`Settings` from the options (None: not given), the defaults and the environment.

    ``default_seed`` and ``default_quantile`` are the scenario's (or the command's own).
    The cache folder is resolved only for a command that uses the cache (``use_cache``).
    """
    folder = (cache_dir if cache_dir is not None else default_cache_dir(environ)) if use_cache else None
    return Settings(
        seed=default_seed if seed is None else seed,
        quantile=default_quantile if quantile is None else quantile,
        engine=engine, workers=workers,
        scheduler=resolve_scheduler(engine, scheduler, workers, environ),
        cache_dir=folder,
    )

"""What every workflow shares: loading a scenario with its profiles, hashing inputs, recording a run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from planner.sources import named
from planner.storage import file_sha256, read_table

if TYPE_CHECKING:
    from planner.runs import RunContext
    from planner.scenario import Scenario
    from planner.settings import Settings

Announce = Callable[[float], None]
"""Called with the expected seconds before the simulator's one-time compile (the CLI prints a line)."""


def load_scenario_inputs(scenario_file: Path) -> tuple[Scenario, pd.DataFrame]:
    """The scenario and the profile table it plans with: the bundled one, with the scenario's own files over it."""
    from planner.profiles import load_profiles
    from planner.scenario import load_scenario

    scenario = load_scenario(scenario_file)
    return scenario, load_profiles(extra=scenario.profile_paths(scenario_file))


def scenario_hashes(scenario_file: Path, scenario: Scenario) -> dict[str, str]:
    """SHA-256 of the scenario file and of each of its own profile files, for the inputs a plan records."""
    return {"scenario": file_sha256(scenario_file),
            **{f"profile {path}": file_sha256(path) for path in scenario.profile_paths(scenario_file)}}


def read_named(path: Path) -> pd.DataFrame:
    """The table at ``path``, carrying its path so that core checks name the file."""
    return named(read_table(path), path)


def read_optional(path: Path | None) -> pd.DataFrame | None:
    """The table at ``path``, or None when no path was given."""
    return read_named(path) if path is not None else None


def record_settings(run: RunContext | None, settings: Settings) -> None:
    """Keep the seed the run used in the run history, whether or not ``--seed`` was given."""
    if run is not None:
        run.add_seeds(seed=settings.seed)


def prepare_simulator(announce: Announce | None) -> None:
    """Compile the simulator before the work starts when its cache is cold (:mod:`planner.compile_ahead`).

    The compile runs in this process, so the worker processes that follow load it instead of each compiling.
    """
    from planner.compile_ahead import prepare

    prepare(announce)

"""What every workflow shares: loading a scenario with its profiles, hashing inputs, recording a run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from planner.contracts.columns import HISTOGRAM_COLUMNS
from planner.sources import named
from planner.storage import file_sha256, read_table

if TYPE_CHECKING:
    from planner.forecast.scaling import DemandScale
    from planner.runs import RunContext
    from planner.scenario import Scenario
    from planner.scenario.overrides import Override
    from planner.settings import Settings

Announce = Callable[[float], None]
"""Called with the expected seconds before the simulator's one-time compile (the CLI prints a line)."""


@dataclass(frozen=True)
class WhatIf:
    """A run's changes to its inputs given on the command line: ``--set`` on the scenario, ``--demand-scale``
    on the forecast."""

    overrides: tuple[Override, ...] = ()
    demand: tuple[DemandScale, ...] = ()

    @classmethod
    def parse(cls, overrides: list[str] | None = None, demand: list[str] | None = None) -> WhatIf:
        """The changes as given (each checked: a malformed one is an InputError before any work)."""
        from planner.forecast.scaling import parse_demand_scales
        from planner.scenario.overrides import parse_overrides

        return cls(parse_overrides(overrides or ()), parse_demand_scales(demand or ()))

    def describe(self) -> list[str]:
        """Each change as the option that made it, in the order given: for the run history and the report."""
        return [f"--set {o.text}" for o in self.overrides] + [f"--demand-scale {d.text}" for d in self.demand]

    def record(self, run: RunContext | None) -> None:
        if run is not None and (self.overrides or self.demand):
            run.add_figures(what_if=self.describe())


NO_CHANGES = WhatIf()


def load_scenario_inputs(scenario_file: Path, overrides: tuple[Override, ...] = ()) -> tuple[Scenario, pd.DataFrame]:
    """The scenario (with any ``--set`` applied) and the profile table it plans with: the bundled one, with the
    scenario's own files over it."""
    from planner.profiles import load_profiles
    from planner.scenario import load_scenario

    scenario = load_scenario(scenario_file, overrides)
    return scenario, load_profiles(extra=scenario.profile_paths(scenario_file))


def load_planning_inputs(scenario_file: Path, overrides: tuple[Override, ...] = ()
                         ) -> tuple[Scenario, pd.DataFrame]:
    """:func:`load_scenario_inputs` for a command that places replicas: a model without a usable step-time
    profile is the input error ``planner validate`` reports (placement would call it infeasible)."""
    from planner.scenario.data_check import check_fits_data
    from planner.scenario.loading import overridden_source

    scenario, profiles = load_scenario_inputs(scenario_file, overrides)
    check_fits_data(scenario, None, profiles, where=overridden_source(scenario_file, overrides))
    return scenario, profiles


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


def read_histograms(paths: Sequence[Path]) -> pd.DataFrame | None:
    """The token-length histograms at ``paths`` as one table (None when none was given).

    Several files (e.g. two ingested logs, one per model) are stacked; bins that two files give for the same
    (model, class, measure, bin) add their counts, as one histogram of both logs would.
    """
    if not paths:
        return None
    if len(paths) == 1:
        return read_named(paths[0])
    frames = [read_named(p) for p in paths]
    for frame in frames:  # each file's own columns and bins are checked before they mix (planner.workloads)
        if not set(HISTOGRAM_COLUMNS) <= set(frame.columns):
            return frame
    merged = pd.concat([f[list(HISTOGRAM_COLUMNS)] for f in frames], ignore_index=True)
    keys = [c for c in HISTOGRAM_COLUMNS if c != "count"]
    merged = merged.groupby(keys, sort=True, dropna=False, as_index=False)["count"].sum()
    return named(merged[list(HISTOGRAM_COLUMNS)], " + ".join(str(p) for p in paths))


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

"""Reading inputs the core takes as frames: request-log timestamps and Splitwise's measured runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from planner.paths import profiles_dir
from planner.sim.replica.static_batch import SPLITWISE_TABLE
from planner.sim.workload import trace_times_s
from planner.storage import read_table


def read_trace_times(path: str | Path, column: str = "TIMESTAMP") -> np.ndarray:
    """Arrival times in seconds (from the first) of the request log at ``path``
    (:func:`planner.sim.workload.trace_times_s`)."""
    return trace_times_s(read_table(path), column, where=path)


def read_splitwise(directory: Path | None = None) -> pd.DataFrame:
    """Splitwise's measured static-batch runs, as shipped in the profiles folder (or ``directory``)."""
    folder = Path(directory if directory is not None else profiles_dir())
    return read_table(folder / SPLITWISE_TABLE)

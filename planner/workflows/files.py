"""The writers of every command's outputs: each set of files is published all or none.

Every writer stages its files (:func:`planner.storage.staged_outputs`) and renames them into
place only when all are written, so a failure or an interrupt leaves the earlier outputs
byte-identical and no new file behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from planner.errors import InputError
from planner.outputs import experiment_paths, plan_output_paths, table_json_path
from planner.storage import StagedOutputs, atomic_path, check_table_suffix, staged_outputs

if TYPE_CHECKING:  # the writers import what they write when they are called: each command loads only its own
    import pandas as pd
    from matplotlib.figure import Figure

    from planner.calibrate.table import CalibrationResult
    from planner.forecast.run import ForecastResult
    from planner.loop.pipeline import PipelineResult
    from planner.loop.run import LoopSettings
    from planner.placement.instance import PlacementInstance
    from planner.placement.result import PlacementResult
    from planner.sim.experiments.common import ExperimentResult
    from planner.sim.result import SimulationResult

PNG_METADATA = {"Software": None}
"""No matplotlib version in the PNGs: the same figure gives the same bytes on any install."""


def _png_writer(figure: Figure) -> Callable[[Path], None]:
    """Saves ``figure`` as a PNG at the path it is given (the staged file)."""

    def write(path: Path) -> None:
        figure.savefig(path, format="png", metadata=PNG_METADATA)

    return write


def write_plan_outputs(result: PlacementResult, out: Path) -> list[Path]:
    """Write the plan (CSV or Parquet, by ``out``'s suffix), ``<stem>.flows.csv`` and ``<stem>.json``, all or none."""
    from planner.placement.place import plan_json_payload

    out, flows_path, json_path = plan_output_paths(out)
    with staged_outputs() as outputs:
        outputs.write_table(out, result.plan)
        outputs.write_table(flows_path, result.flows)
        outputs.write_json(json_path, plan_json_payload(result, out.name, flows_path.name))
    return [out, flows_path, json_path]


def placement_debug_writer(folder: Path) -> Callable[[PlacementInstance], list[str]]:
    """The ``debug`` callback of :func:`planner.placement.place.place_plan`: the model as LP and MPS files."""
    from planner.placement import highs_backend
    from planner.placement.problem import formulate

    def write(inst: PlacementInstance) -> list[str]:
        milp = formulate(inst)
        written = []
        for name in ("placement.lp", "placement.mps"):
            path = Path(folder) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp:
                staged = tmp.with_name(tmp.name + path.suffix)  # HiGHS picks the format by suffix
                highs = highs_backend.new_highs()
                highs_backend.load(milp, highs, names=True)  # index-built row and column names, for diagnosis
                highs.writeModel(str(staged))
                staged.replace(tmp)
            written.append(str(path))
        return written

    return write


def write_simulation_outputs(result: SimulationResult, out: str | Path) -> list[Path]:
    """Write the per-class table to ``out`` (CSV or Parquet by extension) and the JSON beside it, together.

    Returns [table path, JSON path].
    """
    out = Path(out)
    check_table_suffix(out)
    json_path = table_json_path(out)
    text = json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n"
    with staged_outputs() as outputs:
        outputs.write_table(out, result.per_class)
        outputs.write_text(json_path, text)
    return [out, json_path]


def write_calibration(result: CalibrationResult, out: str | Path) -> list[Path]:
    """Write the table to ``out`` (CSV or Parquet by suffix) and ``<stem>.json`` beside it, together.

    The files leave out how the run got its answers (:func:`planner.calibrate.table.calibration_files`).
    Returns [table path, JSON path].
    """
    from planner.calibrate.table import calibration_files

    out = Path(out)
    check_table_suffix(out)
    json_path = table_json_path(out)
    table, text = calibration_files(result)
    with staged_outputs() as outputs:
        outputs.write_table(out, table)
        outputs.write_text(json_path, text)
    return [out, json_path]


def write_experiment(result: ExperimentResult, out_dir: str | Path) -> list[Path]:
    """Write ``<name>.csv`` and ``<name>.png`` into ``out_dir``, both or neither; return both paths."""
    csv_path, png_path = experiment_paths(result.name, out_dir)
    with staged_outputs() as outputs:
        outputs.write_table(csv_path, result.table)
        outputs.write_with(png_path, _png_writer(result.figure))
    return [csv_path, png_path]


def write_plots(history: pd.DataFrame, result: ForecastResult, directory: str | Path,
                outputs: StagedOutputs | None = None) -> list[Path]:
    """Write one PNG per forecast series into ``directory``; return the paths in series order.

    With ``outputs`` the PNGs join that staging (published with the run's other files);
    without, they are published together when all are drawn.
    """
    from planner.forecast.plots import series_figures  # matplotlib: imported only when plots are asked for

    if outputs is None:
        with staged_outputs() as own:
            return write_plots(history, result, directory, own)
    paths = []
    for name, fig in series_figures(history, result):
        dest = Path(directory) / name
        outputs.write_with(dest, _png_writer(fig))
        paths.append(dest)
    return paths


def check_plan_folder(out_dir: str | Path, option: str = "--out") -> None:
    """Refuse an ``out_dir`` that holds anything but a plan run's files (it is replaced as a whole)."""
    from planner.loop.outputs import PLAN_FILE_NAMES

    check_replaced_folder(out_dir, PLAN_FILE_NAMES, "a plan's", "a plan run", "`planner plan`", option)


def check_replaced_folder(out_dir: str | Path, names: Collection[str], owned: str, run: str, command: str,
                          option: str = "--out") -> None:
    """Refuse an ``out_dir`` holding any file not in ``names``: a run replaces the folder as a whole, so a
    folder of other files would be lost."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return
    foreign = sorted(entry.name for entry in out_dir.iterdir() if entry.name not in names)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise InputError(f"the folder holds files that are not {owned} ({shown}); {run} replaces the "
                         "folder as a whole", where=f"{option} {out_dir}",
                         fix=f"pass a new or empty folder with {option}, or one an earlier {command} wrote")


def write_plan_run(result: PipelineResult, settings: LoopSettings, out_dir: str | Path) -> list[Path]:
    """Write a plan run's files (:mod:`planner.loop.outputs`) as the folder ``out_dir``, replacing it whole.

    The folder is staged beside ``out_dir`` and replaces it only when every file is written,
    so ``out_dir`` always holds one run's complete set of files. Returns their paths.
    """
    from planner.loop.outputs import plan_files

    out_dir = Path(out_dir)
    check_plan_folder(out_dir)
    files = plan_files(result, settings)
    with staged_outputs() as outputs:
        staged = outputs.folder(out_dir)
        for name, data in files.items():
            (staged / name).write_bytes(data)
    return [out_dir / name for name in files]

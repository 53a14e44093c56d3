"""Files through the CLI: inputs and outputs checked before any work, all-or-none outputs, and what cron reads.

The catalogue (``test_bad_inputs.py``) runs bad inputs as real processes; the tests here
drive the CLI in this process, where the work itself can be replaced by a sentinel (so
"before any work" is proved, not assumed) and a permission can be refused whoever runs
the tests (root reads and writes anything).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner import cli
from planner.errors import ExitCode
from planner.storage import StagedOutputs

runner = CliRunner()


class WorkStarted(Exception):
    """Raised in place of a command's work: seeing it means every check before the work passed."""


def _flat(text: str) -> str:
    return " ".join(text.split())


# ----------------------------------------------------------------------------- checked before any work
def _inputs(folder: Path) -> dict[str, Path]:
    """Input files that exist; their content does not matter, as no command gets as far as reading them."""
    files = {name: folder / name for name in ("history.csv", "forecast.csv", "plan.csv", "plan.flows.csv", "log.csv")}
    for path in files.values():
        path.write_text("a\n1\n")
    return files


COMMANDS = {
    # name: (function replaced by the sentinel, argv builder given (inputs, scenario, location), option checked)
    "ingest": ("planner.ingest.ingest_logs",
               lambda f, s, d: ["ingest", str(f["log.csv"]), "--out", str(d / "h.csv")], "--out"),
    "ingest histogram": ("planner.ingest.ingest_logs",
                         lambda f, s, d: ["ingest", str(f["log.csv"]), "--out", str(f["log.csv"].parent / "h.csv"),
                                          "--histogram-out", str(d / "hist.csv")], "--histogram-out"),
    "forecast": ("planner.forecast.run.forecast_history",
                 lambda f, s, d: ["forecast", str(f["history.csv"]), "--out", str(d / "f.csv")], "--out"),
    "forecast plots": ("planner.forecast.run.forecast_history",
                       lambda f, s, d: ["forecast", str(f["history.csv"]),
                                        "--out", str(f["history.csv"].parent / "f.csv"),
                                        "--plots", str(d / "png")], "--plots"),
    "forecast metadata": ("planner.forecast.run.forecast_history",
                          lambda f, s, d: ["forecast", str(f["history.csv"]),
                                           "--out", str(f["history.csv"].parent / "f.csv"),
                                           "--metadata", str(d / "m.json")], "--metadata"),
    "place": ("planner.placement.place.place_plan",
              lambda f, s, d: ["place", "--scenario", s, "--forecast", str(f["forecast.csv"]), "--out",
                               str(d / "p.csv")], "--out"),
    "place debug": ("planner.placement.place.place_plan",
                    lambda f, s, d: ["place", "--scenario", s, "--forecast", str(f["forecast.csv"]), "--out",
                                     str(f["forecast.csv"].parent / "p.csv"), "--debug", str(d / "lp")], "--debug"),
    "simulate": ("planner.sim.plan_input.validated_plan",
                 lambda f, s, d: ["simulate", "--scenario", s, "--plan", str(f["plan.csv"]), "--out",
                                  str(d / "s.csv")], "--out"),
    "calibrate": ("planner.calibrate.calibrate",
                  lambda f, s, d: ["calibrate", "--scenario", s, "--out", str(d / "c.csv")], "--out"),
    "plan": ("planner.loop.pipeline.run_pipeline",
             lambda f, s, d: ["plan", "--scenario", s, "--history", str(f["history.csv"]), "--out",
                              str(d / "plan")], "--out"),
    "report": ("planner.loop.pipeline.history_as_of",
               lambda f, s, d: ["report", "--month", "2026-11", "--scenario", s, "--history", str(f["history.csv"]),
                                "--reports", str(d / "reports")], "--reports"),
    "experiment": ("planner.sim.experiments.run_experiment",
                   lambda f, s, d: ["experiment", "e1", "--out", str(d / "e1")], "--out"),
}


def _replace_work(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    module, name = target.rsplit(".", 1)

    def sentinel(*args, **kwargs):
        raise WorkStarted(target)

    monkeypatch.setattr(f"{module}.{name}", sentinel)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_an_unwritable_output_is_exit_3_before_any_work(name, repo_root, tmp_path, monkeypatch):
    target, argv, option = COMMANDS[name]
    files = _inputs(tmp_path)
    scenario = str(repo_root / "scenarios" / "demo.toml")
    locked = tmp_path / "locked"
    locked.mkdir()
    _replace_work(monkeypatch, target)

    # With a writable location the command gets as far as its work: the command line is otherwise valid.
    reached = runner.invoke(cli.app, argv(files, scenario, locked))
    assert reached.exit_code == ExitCode.UNEXPECTED and "WorkStarted" in reached.output, reached.output

    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
        False if Path(path) == locked and mode & os.W_OK else real_access(path, mode, **kw)))
    result = runner.invoke(cli.app, argv(files, scenario, locked))
    assert result.exit_code == ExitCode.INVALID_INPUT, result.output
    said = _flat(result.output)
    assert option in said and str(locked) in said and "not writable" in said
    assert "WorkStarted" not in said
    assert sorted(p.name for p in locked.iterdir()) == []


@pytest.mark.parametrize("command", [["validate"], ["place", "--forecast", "F", "--out", "p.csv", "--scenario"]])
def test_an_unreadable_scenario_is_exit_3_naming_it(command, repo_root, tmp_path, monkeypatch):
    scenario = tmp_path / "scenario.toml"
    scenario.write_bytes((repo_root / "scenarios" / "demo.toml").read_bytes())
    (tmp_path / "F").write_text("a\n1\n")
    real_open = os.open

    def denied(file, flags, *args, **kwargs):
        if Path(file) == scenario:
            raise PermissionError(13, "Permission denied")
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli.app, [*command, str(scenario)])
    assert result.exit_code == ExitCode.INVALID_INPUT, result.output
    assert str(scenario) in _flat(result.output) and "Permission denied" in result.output


def test_a_scenario_with_a_utf8_byte_order_mark_is_accepted(repo_root, tmp_path):
    scenario = tmp_path / "bom.toml"
    scenario.write_bytes(b"\xef\xbb\xbf" + (repo_root / "scenarios" / "demo.toml").read_bytes())
    result = runner.invoke(cli.app, ["validate", str(scenario), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["valid"] is True


# ----------------------------------------------------------------------------- all or none
def _fail_at_call(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """The n-th file a run stages fails to be written, as a full disk would."""
    real_path = StagedOutputs.path
    calls = []

    def path(self, destination):
        calls.append(destination)
        if len(calls) == n:
            raise OSError(28, "No space left on device")
        return real_path(self, destination)

    monkeypatch.setattr(StagedOutputs, "path", path)


EARLIER = b"an earlier good output\n"


def _plant(*paths: Path) -> None:
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(EARLIER)


def _unchanged(folder: Path, earlier: list[Path]) -> None:
    for path in earlier:
        assert path.read_bytes() == EARLIER, path
    assert sorted(p for p in folder.rglob("*") if p.is_file()) == sorted(earlier)


@pytest.fixture
def small_history(repo_root, tmp_path):
    history = pd.read_parquet(repo_root / "data/history/demo_history.parquet")
    keep = ((history["region"] == "eu-west") & (history["model"] == "llama-3.1-8b")
            & history["traffic_class"].isin(["interactive", "standard"]))
    path = tmp_path / "in" / "history.csv"
    path.parent.mkdir()
    history[keep].groupby("traffic_class").tail(24 * 7 * 3).to_csv(path, index=False)
    return path


def test_forecast_publishes_forecast_metadata_and_plots_together_or_none(small_history, tmp_path, monkeypatch):
    out = tmp_path / "out" / "new" / "forecast.csv"  # missing parent folders are made when the outputs appear
    argv = ["forecast", str(small_history), "--horizon", "24h", "--out", str(out), "--plots",
            str(tmp_path / "out" / "png"), "--engine", "local"]
    ok = runner.invoke(cli.app, argv)
    assert ok.exit_code == 0, ok.output
    written = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written == ["new/forecast.csv", "new/forecast.meta.json", "png/eu-west__llama-3.1-8b__interactive.png",
                       "png/eu-west__llama-3.1-8b__standard.png"]

    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            path.write_bytes(EARLIER)
    earlier = sorted(p for p in (tmp_path / "out").rglob("*") if p.is_file())
    _fail_at_call(monkeypatch, 4)  # forecast, metadata, first plot staged; the last plot fails
    failed = runner.invoke(cli.app, argv)
    assert failed.exit_code == ExitCode.UNEXPECTED and "No space left" in failed.output, failed.output
    _unchanged(tmp_path / "out", earlier)


def test_ingest_publishes_history_and_histogram_together_or_none(tmp_path, monkeypatch):
    log = tmp_path / "log.csv"
    log.write_text("time,in,out\n2026-01-01T00:10:00Z,100,10\n2026-01-01T01:05:00Z,5,1\n")
    out = tmp_path / "out" / "history.csv"
    _plant(out, out.with_suffix(".histogram.csv"))
    _fail_at_call(monkeypatch, 2)
    result = runner.invoke(cli.app, ["ingest", str(log), "--map", "ts=time,prompt_tokens=in,output_tokens=out",
                                     "--region", "r", "--model", "m", "--traffic-class", "c", "--out", str(out)])
    assert result.exit_code == ExitCode.UNEXPECTED and "No space left" in result.output, result.output
    _unchanged(tmp_path / "out", [out, out.with_suffix(".histogram.csv")])


def test_place_writes_plan_flows_and_json_together_or_none(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from planner.outputs import plan_output_paths
    from planner.placement import place
    from planner.workflows import files as workflow

    out = tmp_path / "plan.csv"
    earlier = plan_output_paths(out)
    _plant(*earlier)
    result = SimpleNamespace(plan=pd.DataFrame({"replicas": [1]}), flows=pd.DataFrame({"rps": [1.0]}))
    monkeypatch.setattr(place, "plan_json_payload", lambda *a: {"status": "optimal"})
    _fail_at_call(monkeypatch, 3)
    with pytest.raises(OSError, match="No space left"):
        workflow.write_plan_outputs(result, out)
    _unchanged(tmp_path, earlier)
    monkeypatch.undo()
    monkeypatch.setattr(place, "plan_json_payload", lambda *a: {"status": "optimal"})
    assert workflow.write_plan_outputs(result, out) == earlier
    assert json.loads(earlier[2].read_text()) == {"status": "optimal"}


def test_simulate_writes_table_and_json_together_or_none(tmp_path, monkeypatch):
    from planner.outputs import table_json_path
    from planner.sim.result import SimulationResult
    from planner.workflows.files import write_simulation_outputs

    out = tmp_path / "slo.csv"
    _plant(out, table_json_path(out))
    _fail_at_call(monkeypatch, 2)
    with pytest.raises(OSError, match="No space left"):
        write_simulation_outputs(SimulationResult(pd.DataFrame({"slo_met": [True]})), out)
    _unchanged(tmp_path, [out, table_json_path(out)])


def test_calibrate_writes_table_and_json_together_or_none(tmp_path, monkeypatch):
    from planner.calibrate.table import CalibrationResult
    from planner.outputs import table_json_path
    from planner.workflows.files import write_calibration

    out = tmp_path / "capacity.parquet"
    _plant(out, table_json_path(out))
    _fail_at_call(monkeypatch, 2)
    with pytest.raises(OSError, match="No space left"):
        write_calibration(CalibrationResult(pd.DataFrame({"model": ["m"], "cached": [False]})), out)
    _unchanged(tmp_path, [out, table_json_path(out)])


def test_experiment_writes_csv_and_png_together_or_none(tmp_path, monkeypatch):
    from planner.outputs import experiment_paths
    from planner.sim.experiments.common import ExperimentResult, new_figure
    from planner.workflows.files import write_experiment

    earlier = list(experiment_paths("e1", tmp_path / "e1"))
    _plant(*earlier)
    _fail_at_call(monkeypatch, 2)
    with pytest.raises(OSError, match="No space left"):
        write_experiment(ExperimentResult("e1", pd.DataFrame({"x": [1]}), new_figure(2, 2)), tmp_path / "e1")
    _unchanged(tmp_path, earlier)


def test_plan_replaces_its_folder_whole_or_leaves_the_previous_one(tmp_path, monkeypatch):
    from planner.loop import outputs as plan_folder
    from planner.workflows import files as outputs

    out = tmp_path / "plan"
    earlier = [out / "plan.csv", out / "policies.csv"]
    _plant(*earlier)

    files = {"plan.csv": b"new\n", "rounds.json": b"{}"}
    monkeypatch.setattr(plan_folder, "plan_files", lambda result, settings: files)
    real_write = Path.write_bytes

    def disk_full_at_the_last_file(self, data):
        if self.name == "rounds.json":
            raise OSError(28, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", disk_full_at_the_last_file)
    with pytest.raises(OSError, match="No space left"):
        outputs.write_plan_run(None, None, out)
    _unchanged(tmp_path, earlier)
    monkeypatch.setattr(Path, "write_bytes", real_write)

    assert outputs.write_plan_run(None, None, out) == [out / "plan.csv", out / "rounds.json"]
    assert sorted(p.name for p in out.iterdir()) == ["plan.csv", "rounds.json"]  # policies.csv did not linger
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]


def test_plan_refuses_a_folder_that_holds_other_files(tmp_path):
    from planner.errors import InputError
    from planner.loop.outputs import PLAN_FILE_NAMES
    from planner.workflows.files import check_plan_folder

    (tmp_path / "plan.csv").write_text("")
    check_plan_folder(tmp_path)  # a previous plan run's folder is fine
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="notes.txt"):
        check_plan_folder(tmp_path)
    assert "plan.csv" in PLAN_FILE_NAMES


# ----------------------------------------------------------------------------- what cron and scripts read
def test_history_limit_beyond_what_can_be_listed_is_exit_3():
    result = runner.invoke(cli.app, ["history", "--limit", "99999999999999999999"])
    assert result.exit_code == ExitCode.INVALID_INPUT, result.output
    assert "--limit" in result.output

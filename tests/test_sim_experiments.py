"""Reference experiments E1–E4 at a small scale: shape, determinism, files, errors."""

from __future__ import annotations

import pytest

from planner.errors import InputError
from planner.sim.experiments import EXPERIMENTS, run_experiment
from planner.workflows.files import write_experiment

SCALE = 0.02  # 2,400 requests per configuration


@pytest.fixture(scope="module")
def results():
    return {name: run_experiment(name, seed=1, scale=SCALE) for name in EXPERIMENTS}


def test_tables_have_one_row_per_configuration(results) -> None:
    assert len(results["e1"].table) == 7 * 4
    assert set(results["e1"].table["policy"]) == {"fcfs", "cmu", "wspt", "srpt"}
    assert list(results["e2"].table["prediction_sigma"].dropna()) == [0.0, 0.5, 1.0, 1.5]
    assert set(results["e3"].table["routing"]) == {"random", "JSQ", "power-of-2", "least-work"}
    e4 = results["e4"].table
    assert len(e4) == 2 + 2 * 2 * 6
    assert {f"mean_wait_decile_{d}_ms" for d in range(1, 11)} <= set(e4.columns)
    for res in results.values():
        assert res.summary and res.checks
        assert all({"claim", "holds", "evidence"} <= set(c) for c in res.checks)
    # Little's law on every stable run (edge effects of a 2,400-job run near rho = 0.95 reach a few %);
    # random routing in E3 is unstable beyond rho = 0.6, so its residual is large by design
    stable = results["e3"].table[results["e3"].table["routing"] != "random"]
    for table in (results["e1"].table, results["e2"].table, stable, e4):
        assert (table["little_residual"].abs() < 0.06).all()


def test_work_conservation_shows_in_e1(results) -> None:
    """Same jobs under every policy: utilisation is identical within a load."""
    util = results["e1"].table.groupby("rho")["utilisation"].agg(["min", "max"])
    assert ((util["max"] - util["min"]) < 1e-9).all()


def test_writes_csv_and_png_and_is_deterministic(results, tmp_path) -> None:
    first = write_experiment(results["e2"], tmp_path / "a")
    again = write_experiment(run_experiment("e2", seed=1, scale=SCALE), tmp_path / "b")
    assert [p.name for p in first] == ["e2.csv", "e2.png"]
    for p, q in zip(first, again, strict=True):
        assert p.read_bytes() == q.read_bytes()
    assert not list((tmp_path / "a").glob(".*tmp"))


def test_unknown_experiment_and_bad_scale_are_input_errors() -> None:
    with pytest.raises(InputError, match="e1, e2, e3, e4"):
        run_experiment("e9")
    with pytest.raises(InputError, match="scale"):
        run_experiment("e1", scale=0.0)

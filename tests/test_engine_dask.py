"""The ``dask`` engine: same bits as local and processes, retries after a worker dies, clear errors.

One 2-worker LocalCluster (``dask_fixtures.dask_cluster``) serves the module; tests reach
it by address, through ``run_tasks(scheduler=...)`` or ``DASK_SCHEDULER_ADDRESS``.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import psutil
import pytest
from conftest import REPO_ROOT
from engine_tasks import always_exit, count_then_raise, exit_first_time, follow_ups, sleep_then_finish, worker_pid

from planner.catalog import load_catalog
from planner.engine import SCHEDULER_ENV, WorkerLostError, run_tasks
from planner.engine import cluster as dask_engine
from planner.errors import InputError
from planner.forecast.run import forecast_history
from planner.profiles import load_profiles
from planner.scenario import load_scenario, parse_scenario
from planner.sim.simulate import select_window, simulate_plan
from planner.workflows.files import write_simulation_outputs

pytest_plugins = ("dask_fixtures",)
P = "2026-11-02T18:00:00Z"


def _worker_pids(cluster) -> set[int]:
    from distributed import Client

    with Client(cluster.scheduler_address, set_as_default=False) as client:
        return set(client.run(worker_pid, None).values())


def test_results_in_task_order_with_progress(dask_cluster):
    calls = []
    out = run_tasks(math.sqrt, [float(i * i) for i in range(100)], engine="dask",
                    scheduler=dask_cluster.scheduler_address, progress=lambda d, t: calls.append((d, t)))
    assert out == [float(i) for i in range(100)]
    assert calls == [(i, 100) for i in range(1, 101)]


def test_follow_ups_run_beside_the_slow_task_and_come_back_in_a_fixed_order(dask_cluster):
    out = run_tasks(sleep_then_finish, [("a", 3.0), ("b", 0.0)], engine="dask",
                    scheduler=dask_cluster.scheduler_address, follow=follow_ups)
    assert [name for name, _ in out] == ["a", "b", "a.0", "a.1", "b.0", "b.1"]
    finished = dict(out)
    assert max(finished["b.0"], finished["b.1"]) < finished["a"]


def test_scheduler_address_from_environment(dask_cluster, monkeypatch):
    monkeypatch.setenv(SCHEDULER_ENV, dask_cluster.scheduler_address)
    pids = run_tasks(worker_pid, list(range(8)), engine="dask")
    assert set(pids) <= _worker_pids(dask_cluster)


@pytest.mark.slow
def test_forecast_is_identical_on_every_engine(same_on_every_engine):
    history = pd.read_parquet(REPO_ROOT / "data" / "history" / "demo_history.parquet")
    history = history[(history["ts"] >= "2026-08-01") & (history["region"] == "eu-west")
                      & (history["model"] == "llama-3.1-8b")]

    def run(**engine):
        result = forecast_history(history, horizon_hours=24, quantiles=[0.5, 0.9, 0.99], backtest=True, **engine)
        return result.forecast.to_csv(index=False), json.dumps(result.metadata, sort_keys=True)

    csv, _ = same_on_every_engine(run)
    assert csv.count("\n") == 4 * 24 + 1  # four classes of one (region, model)


@pytest.mark.slow
def test_simulation_is_identical_on_every_engine(same_on_every_engine, tmp_path):
    scenario = load_scenario(REPO_ROOT / "scenarios" / "demo.toml")
    plan = pd.DataFrame([
        {"period": P, "region": "aws:us-east-1", "sku": "H100", "model": "llama-3.1-70b", "tier": "on_demand",
         "replicas": 2, "gpus": 8, "usd": 0.0},
        {"period": P, "region": "gcp:europe-west4", "sku": "L4", "model": "llama-3.1-8b", "tier": "on_demand",
         "replicas": 2, "gpus": 2, "usd": 0.0},
    ])
    flows = pd.DataFrame([{"period": P, "region": r, "model": m, "traffic_class": k, "rps": v}
                          for r, m in (("aws:us-east-1", "llama-3.1-70b"), ("gcp:europe-west4", "llama-3.1-8b"))
                          for k, v in (("interactive", 1.0), ("standard", 0.6), ("batch", 0.3))])
    _, demand = select_window(plan, flows, "peak")
    runs = []

    def run(**engine):
        calls = []
        result = simulate_plan(scenario, plan, demand, load_profiles(), load_catalog(), duration_s=200.0,
                               replications=3, seed=11, progress=lambda d, t: calls.append((d, t)), **engine)
        assert calls[-1] == (6, 6)  # 2 pools x 3 replications
        paths = write_simulation_outputs(result, tmp_path / f"{len(runs)}.csv")
        runs.append(paths)
        return [p.read_bytes() for p in paths]

    same_on_every_engine(run)


@pytest.mark.slow
def test_calibration_is_identical_on_every_engine(same_on_every_engine, tmp_path):
    from planner.workflows.calibrate import calibrate_with_cache as calibrate
    from planner.workflows.files import write_calibration

    scenario = load_scenario(REPO_ROOT / "scenarios" / "demo.toml")
    raw = scenario.model_dump()
    raw["models"][0]["tp"] = [1, 2]  # llama-3.1-8b: two units, each searched over its engine settings
    scenario = parse_scenario(raw)

    def run(**engine):
        # each unit's pools of 2 start as its own answer arrives, beside the other unit's search
        result = calibrate(scenario, load_profiles(), models=["llama-3.1-8b"], skus=["H100"],
                           class_mix={"interactive": 0.5, "standard": 0.5}, duration_s=300.0, replications=3,
                           larger_pools=(2,), use_cache=False, cache_dir=tmp_path, **engine)
        assert result.n_simulated == 2 and result.meta["engine_settings"]["pruned"]
        assert all(unit["pool_cache_key"] for unit in result.meta["units"])  # each unit's pool task ran
        out = tmp_path / f"{engine.get('engine', 'x')}.csv"
        return [path.read_bytes() for path in write_calibration(result, out)]

    same_on_every_engine(run)


def test_a_killed_worker_is_retried_and_the_run_completes(dask_cluster, tmp_path):
    markers = [str(tmp_path / f"marker{i}") for i in range(3)]
    pids = run_tasks(exit_first_time, markers, engine="dask", scheduler=dask_cluster.scheduler_address)
    assert len(pids) == 3 and all(isinstance(p, int) for p in pids)
    assert all((tmp_path / f"marker{i}").exists() for i in range(3))


def test_a_task_that_always_kills_its_worker_fails_clearly(dask_cluster):
    with pytest.raises(WorkerLostError) as err:
        run_tasks(always_exit, [0, 1], engine="dask", scheduler=dask_cluster.scheduler_address)
    text = str(err.value)
    assert "task 1 of 2 (always_exit)" in text or "task 2 of 2 (always_exit)" in text
    assert "each died" in text and "memory" in text and err.value.exit_code == 1
    assert run_tasks(math.sqrt, [4.0], engine="dask", scheduler=dask_cluster.scheduler_address) == [2.0]


def test_ordinary_errors_are_retried_planner_errors_are_not(dask_cluster, tmp_path):
    address = dask_cluster.scheduler_address
    flaky, bad = tmp_path / "flaky.log", tmp_path / "bad.log"
    with pytest.raises(OSError, match="transient failure"):
        run_tasks(count_then_raise, [(str(flaky), "os")], engine="dask", scheduler=address)
    assert flaky.read_text().count("attempt") == 1 + dask_engine.RETRIES
    with pytest.raises(InputError, match="bad row in a task"):
        run_tasks(count_then_raise, [(str(bad), "input")], engine="dask", scheduler=address)
    assert bad.read_text().count("attempt") == 1


def test_embedded_cluster_is_closed_after_the_run(monkeypatch):
    monkeypatch.delenv(SCHEDULER_ENV, raising=False)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    assert run_tasks(math.sqrt, [1.0, 9.0, 16.0], engine="dask", workers=2) == [1.0, 3.0, 4.0]
    left = [p for p in me.children(recursive=True) if p.pid not in before and p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"processes left running: {left}"


def test_unreachable_scheduler_is_an_input_error(monkeypatch):
    monkeypatch.setattr(dask_engine, "CONNECT_TIMEOUT_S", 2)
    with pytest.raises(InputError, match="cannot reach the Dask scheduler") as err:
        run_tasks(math.sqrt, [1.0], engine="dask", scheduler="tcp://127.0.0.1:9")
    assert err.value.where == "--scheduler" and err.value.exit_code == 3


def test_malformed_address_in_environment_is_an_input_error(monkeypatch):
    monkeypatch.setenv(SCHEDULER_ENV, "scheduler")
    with pytest.raises(InputError, match="not a Dask scheduler address") as err:
        run_tasks(math.sqrt, [1.0], engine="dask")
    assert err.value.where == SCHEDULER_ENV

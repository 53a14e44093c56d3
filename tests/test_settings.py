"""Settings are resolved once, at the front door, into one frozen value; nothing travels through the environment."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import cli
from planner.engine import SCHEDULER_ENV
from planner.errors import InputError
from planner.settings import CACHE_DIR_ENV, Settings, default_cache_dir, resolve_settings

runner = CliRunner()


def test_the_seed_is_the_option_else_the_default():
    assert resolve_settings({}, seed=None, default_seed=20240611).seed == 20240611
    assert resolve_settings({}, seed=0, default_seed=20240611).seed == 0


def test_the_quantile_is_the_option_else_the_scenario_s():
    assert resolve_settings({}, seed=1, default_seed=1, default_quantile=0.95).quantile == 0.95
    assert resolve_settings({}, seed=1, default_seed=1, quantile=0.9, default_quantile=0.95).quantile == 0.9


def test_the_cache_folder_is_the_option_else_the_environment_else_home_and_none_without_a_cache(tmp_path):
    environ = {CACHE_DIR_ENV: str(tmp_path)}
    assert resolve_settings(environ, seed=1, default_seed=1, use_cache=True).cache_dir == tmp_path / "calibration"
    assert resolve_settings(environ, seed=1, default_seed=1, cache_dir=Path("c"), use_cache=True).cache_dir == Path("c")
    assert resolve_settings({}, seed=1, default_seed=1, use_cache=True).cache_dir == default_cache_dir({})
    assert resolve_settings(environ, seed=1, default_seed=1, use_cache=False).cache_dir is None


def test_the_scheduler_is_the_option_else_the_environment_for_dask_only():
    environ = {SCHEDULER_ENV: "tcp://scheduler:8786"}
    assert resolve_settings(environ, seed=1, default_seed=1, engine="dask").scheduler == "tcp://scheduler:8786"
    assert resolve_settings(environ, seed=1, default_seed=1, engine="local").scheduler is None
    given = resolve_settings(environ, seed=1, default_seed=1, engine="dask", scheduler="tls://other:8786")
    assert given.scheduler == "tls://other:8786"
    with pytest.raises(InputError, match="--scheduler needs --engine dask"):
        resolve_settings({}, seed=1, default_seed=1, engine="local", scheduler="tcp://scheduler:8786")
    with pytest.raises(InputError) as bad:
        resolve_settings({SCHEDULER_ENV: "not an address"}, seed=1, default_seed=1, engine="dask")
    assert bad.value.where == SCHEDULER_ENV


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings(seed=1).seed = 2  # type: ignore[misc]


def test_scheduler_option_does_not_go_through_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(SCHEDULER_ENV, raising=False)
    history = tmp_path / "history.csv"
    history.write_text("a,b\n1,2\n")
    result = runner.invoke(cli.app, ["forecast", str(history), "--out", str(tmp_path / "f.csv"), "--engine", "dask",
                                     "--scheduler", "tcp://127.0.0.1:8786"])
    assert result.exit_code == 3, result.output  # the history is refused before any cluster is reached
    assert SCHEDULER_ENV not in os.environ

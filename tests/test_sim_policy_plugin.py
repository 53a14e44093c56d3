"""A policy defined here, outside the planner, runs once registered: no other file changes.

The policy is strict priority with a size tie-break inside each class's priority level:
key = priority_jump − share·size (``share`` a parameter), so a class with a larger jump
always goes first when ``share`` is small, and shorter jobs go first inside a class.
docs/adding-a-policy.md describes it under "Testing a new policy".
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pytest
from replica_fixtures import matches_reference, pool

from planner.errors import InputError
from planner.scenario import parse_scenario
from planner.sim.policies import POLICIES, EngineEncoding, KeyForm, Param, PolicySpec, get_policy
from planner.sim.queue import ArrivalProcess, QueueClass, QueueModel, ServiceDist, simulate_queue
from planner.sim.replica.state import DONE, I_STATUS

DEMO = Path(__file__).resolve().parents[1] / "scenarios" / "demo.toml"


def encode(values: Mapping[str, float]) -> EngineEncoding:
    return EngineEncoding(KeyForm(jump=1.0, size=-values["size_share"]))


SPEC = PolicySpec(
    name="priority-short",
    summary="serve the largest priority_jump - size_share x size",
    encode=encode,
    fifo_within_class=False,
    params=(Param("size_share", 1e-3, "priority given up per unit of predicted size"),),
)


@pytest.fixture(scope="module")
def demo_raw() -> dict:
    with open(DEMO, "rb") as handle:
        return tomllib.load(handle)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[PolicySpec]:
    monkeypatch.setitem(POLICIES, SPEC.name, SPEC)  # removed again after the test
    yield SPEC


def test_an_unregistered_policy_is_unknown_everywhere(demo_raw: dict) -> None:
    with pytest.raises(InputError):
        get_policy("priority-short")
    with pytest.raises(Exception, match="unknown policy"):
        parse_scenario({**demo_raw, "policy": {**demo_raw["policy"], "name": "priority-short"}})


def test_a_registered_policy_is_a_valid_scenario_policy(registered: PolicySpec, demo_raw: dict) -> None:
    scenario = parse_scenario({**demo_raw, "policy": {**demo_raw["policy"], "name": "priority-short"}})
    assert scenario.policy.name == "priority-short"
    assert get_policy("priority-short") is registered


def test_a_registered_policy_orders_the_queue_engine(registered: PolicySpec) -> None:
    """Every job present at t = 0 on one server: service goes by class jump, then by size."""
    classes = (QueueClass("low", 1.0, 0.5, ServiceDist("lognormal", 1.0, 1.0)),
               QueueClass("high", 1.0, 0.5, ServiceDist("lognormal", 1.0, 1.0), priority_jump=5.0))
    n = 400
    model = QueueModel(classes, ArrivalProcess("trace", times=tuple([0.0] * n)), policy="priority-short", n_jobs=n)
    run = simulate_queue(model, seed=4)
    order = np.argsort(run.start[1:], kind="stable") + 1  # job 0 starts first, before the others arrive
    cls = run.cls[order]
    assert (cls[: int((cls == 1).sum())] == 1).all()  # every high job before any low one
    for k in (0, 1):
        sizes = run.size[order][cls == k]
        assert (np.diff(sizes) >= 0).all()  # shortest first inside a class (exact sizes: sigma 0)


def test_a_registered_policy_runs_in_the_replica_engine(registered: PolicySpec) -> None:
    """The compiled engine and the pure-Python reference agree on it, and its order is the one it declares."""
    state = matches_reference(pool(25.0, "priority-short"))
    assert (state.req_i[:, I_STATUS] == DONE).sum() > 100


def test_a_parameter_reaches_the_engine(registered: PolicySpec) -> None:
    assert registered.encoding().key.size == -1e-3
    assert registered.encoding({"size_share": 0.5}).key.size == -0.5


def test_a_listed_policy_brings_its_parameters_to_the_scenario_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """``[policy.params]`` is built from the registry: a policy listed there brings its keys and bounds."""
    from pydantic import ValidationError

    from planner.scenario.model import _policy_params_model

    bounded = Param("size_share", 1e-3, "priority given up per unit of predicted size", maximum=0.5)
    monkeypatch.setitem(POLICIES, SPEC.name, PolicySpec(**{**SPEC.__dict__, "params": (bounded,)}))
    params = _policy_params_model()
    assert params().size_share == pytest.approx(1e-3)
    assert params(size_share=0.25).size_share == 0.25
    assert "priority given up per unit of predicted size (priority-short)" in str(params.model_fields["size_share"])
    with pytest.raises(ValidationError, match="less than or equal to 0.5"):
        params(size_share=0.75)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        params(size_shares=0.1)


def test_the_shipped_scenario_schema_checks_the_registered_parameters(demo_raw: dict) -> None:
    from planner.scenario.model import PolicyParams

    declared = {param.name for spec in POLICIES.values() for param in spec.params}
    assert set(PolicyParams.model_fields) == {"prediction_noise_sigma", *declared}
    assert PolicyParams().trail_c == 0.5 and PolicyParams().aging_rate == 0.1
    policy = {**demo_raw["policy"], "params": {**demo_raw["policy"].get("params", {}), "trail_c": 2.0}}
    with pytest.raises(Exception, match=r"policy.params.trail_c: must be <= 1"):
        parse_scenario({**demo_raw, "policy": policy})

"""Policy registry, key functions and the Deficit Round Robin arbiter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import InputError
from planner.sim.policies import POLICIES, get_policy
from planner.sim.policies.drr import drr_cost, drr_select_class, drr_select_class_reference
from planner.sim.policies.keys import precedes, priority_key
from planner.sim.queue import ArrivalProcess, QueueClass, QueueModel, ServiceDist, simulate_queue


def test_registry_has_the_contract_names_and_traits() -> None:
    assert list(POLICIES) == ["fcfs", "cmu", "wspt", "srpt", "priority-aging", "drr-fcfs", "drr-wspt"]
    assert [s.name for s in POLICIES.values() if s.preemptive] == ["srpt"]
    assert [s.name for s in POLICIES.values() if s.uses_remaining_size] == ["srpt"]
    assert [s.name for s in POLICIES.values() if s.fifo_within_class] == ["fcfs", "cmu", "priority-aging", "drr-fcfs"]
    assert {s.name: s.inner for s in POLICIES.values() if s.drr} == {"drr-fcfs": "fcfs", "drr-wspt": "wspt"}
    assert {s.name: [p.name for p in s.params] for s in POLICIES.values() if s.params} == {
        "srpt": ["trail_c"], "priority-aging": ["aging_rate"]}


def test_unknown_policy_lists_the_valid_names() -> None:
    with pytest.raises(InputError) as err:
        get_policy("edf")
    assert "drr-wspt" in str(err.value) and err.value.exit_code == 3
    assert get_policy(" WSPT ").name == "wspt"


def test_parameters_take_their_defaults_and_are_checked() -> None:
    srpt = get_policy("srpt")
    assert srpt.values() == {"trail_c": 0.5}
    assert srpt.values({"trail_c": 0.2, "aging_rate": 9.0}) == {"trail_c": 0.2}  # another policy's value is ignored
    assert srpt.encoding({"trail_c": 0.2}).preempt_until == 0.2
    assert get_policy("priority-aging").encoding({"aging_rate": 0.3}).key.waited == 0.3
    with pytest.raises(InputError, match="trail_c"):
        srpt.values({"trail_c": 1.5})


def _key(policy: str, **kw) -> float:
    args = dict(weight=1.0, mu_class=1.0, size=1.0, arrival=0.0, now=0.0, priority_jump=0.0, tokens=1.0)
    aging = kw.pop("aging_rate", 0.1)
    args.update(kw)
    form = get_policy(policy).encoding({"aging_rate": aging}).key.packed()
    return priority_key(form, *args.values())


def test_keys_follow_each_rule() -> None:
    assert _key("fcfs", arrival=1.0) > _key("fcfs", arrival=2.0)
    assert _key("cmu", weight=8.0, mu_class=1 / 0.3) > _key("cmu", weight=0.5, mu_class=1 / 4.0)
    assert _key("wspt", weight=2.0, size=1.0) == pytest.approx(2.0)
    assert _key("srpt", size=0.5) > _key("srpt", size=3.0)
    # priority-aging: a jump-0 job that waited J / r overtakes a fresh job with jump J
    assert _key("priority-aging", priority_jump=0.0, aging_rate=0.1, arrival=0.0, now=31.0) > _key(
        "priority-aging", priority_jump=3.0, aging_rate=0.1, arrival=31.0, now=31.0)
    # Dynamo fcfs: priority_jump - arrival_offset; Dynamo wspt: (1 + jump) / isl_tokens
    assert _key("drr-fcfs", priority_jump=3.0, arrival=10.0) == pytest.approx(-7.0)
    assert _key("drr-wspt", priority_jump=3.0, tokens=800.0) == pytest.approx(4.0 / 800.0)
    assert _key("drr-wspt", tokens=0.0) == 1.0
    assert drr_cost(0.0) == 1.0 and drr_cost(512.0) == 512.0


def _textbook(policy: str, w: float, mu: float, size: float, a: float, jump: float, tokens: float,
              rate: float) -> float:
    """Each policy's key as its module states it, at now = 0 (as the engines evaluate keys)."""
    return {
        "fcfs": lambda: -a,
        "cmu": lambda: w * mu,
        "wspt": lambda: w / (size if size > 0.0 else 1e-300),
        "srpt": lambda: -size,
        "priority-aging": lambda: jump + rate * (0.0 - a),
        "drr-fcfs": lambda: jump - a,
        "drr-wspt": lambda: (1.0 + jump) / (tokens if tokens > 1.0 else 1.0),
    }[policy]()


finite = st.floats(-1e6, 1e6, allow_nan=False)
positive = st.floats(0.0, 1e6, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(POLICIES)), positive, positive, finite, positive, positive, positive, positive)
def test_each_key_form_is_the_textbook_key_bit_for_bit(policy, w, mu, size, a, jump, tokens, rate) -> None:
    """The engines' results stay the same only if every form evaluates exactly to its formula."""
    form = get_policy(policy).encoding({"aging_rate": rate}).key.packed()
    got = priority_key(form, w, mu, size, a, 0.0, jump, tokens)
    assert got == _textbook(policy, w, mu, size, a, jump, tokens, rate)


def test_ties_break_by_arrival_then_id() -> None:
    assert precedes(1.0, 5.0, 9, 1.0, 6.0, 1)
    assert precedes(1.0, 5.0, 1, 1.0, 5.0, 2)
    assert not precedes(1.0, 5.0, 2, 1.0, 5.0, 1)
    assert precedes(2.0, 9.0, 9, 1.0, 0.0, 0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 64), st.integers(0, 40), st.integers(1, 500), st.booleans()),
             min_size=1, max_size=6),
    st.integers(-1, 5),
)
def test_bounded_drr_equals_round_by_round(classes, pointer) -> None:
    """The O(K) arbiter picks the same class and leaves the same deficits as the original loop."""
    quanta = [float(q) for q, _, _, _ in classes]
    deficits = [float(d) for _, d, _, _ in classes]
    costs = [float(c) for _, _, c, _ in classes]
    nonempty = [b for _, _, _, b in classes]
    pointer = min(pointer, len(classes) - 1)
    ref = list(deficits)
    expected = drr_select_class_reference(ref, quanta, costs, nonempty, pointer)
    got_def = np.array(deficits)
    got = drr_select_class(got_def, np.array(quanta), np.array(costs), np.array(nonempty), pointer)
    assert tuple(got) == tuple(expected)
    np.testing.assert_array_equal(got_def, np.array(ref))


def test_drr_gives_each_backlogged_class_its_quantum_share() -> None:
    """All jobs present at t = 0, so every class stays backlogged until the first one empties.

    DRR's guarantee: after R rounds class k has been served R·Q_k ± (largest cost), so
    its share of served tokens tends to Q_k / ΣQ; the 1% tolerance is ~3x that bound here.
    """
    tokens = ServiceDist("lognormal", 500.0, 0.8, integer=True)
    quanta = (1000, 2000, 4000)
    classes = tuple(QueueClass(f"c{k}", 1.0, 1 / 3 if k < 2 else 1 - 2 / 3, tokens, quantum_tokens=q)
                    for k, q in enumerate(quanta))
    n = 30_000
    model = QueueModel(classes, ArrivalProcess("trace", times=tuple([0.0] * n)), policy="drr-fcfs", n_jobs=n,
                       speeds=(1000.0,))
    run = simulate_queue(model, seed=3)
    first_empty = min(float(run.start[run.cls == k].max()) for k in range(3))
    served = run.start < first_empty
    share = np.array([run.tokens[served & (run.cls == k)].sum() for k in range(3)])
    share /= share.sum()
    np.testing.assert_allclose(share, np.array(quanta) / sum(quanta), atol=0.01)

"""Taking back headroom: the raise rule, its ceiling, the back-off, and the loop recording every change."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

import planner.loop.run as loop_run
from planner.loop import LoopSettings, run_loop
from planner.loop.derate import find_misses
from planner.loop.headroom import RAISE_STEP, Headroom, raise_candidates
from planner.slo import p99_column, target_column

POOL = ("aws:a", "m")
UNITS = {POOL: {("H100", 1)}}


def _row(ratio: float, window: str, period: str, region: str = "aws:a", klass: str = "interactive",
         arrived: int = 100) -> dict:
    return {"window": window, "period": period, "region": region, "model": "m", "traffic_class": klass,
            p99_column("ttft"): 1000.0 * ratio, target_column("ttft"): 1000.0, "arrived": arrived,
            "slo_met": ratio <= 1.0}


def _slo(*ratios: float) -> pd.DataFrame:
    windows = [("fleet peak + pool peak", "p1"), ("pool trough", "p0")]
    return pd.DataFrame([_row(r, w, p) for r, (w, p) in zip(ratios, windows, strict=False)])


def _table(value: float) -> pd.DataFrame:
    return pd.DataFrame({"model": ["m"], "sku": ["H100"], "tp_degree": [1], "traffic_class": ["interactive"],
                         "max_rps_per_replica": [value]})


# --------------------------------------------------------------------------- the raise rule
def test_below_half_in_both_windows_is_raised_one_bounded_step():
    headroom = Headroom.of(_table(10.0))
    table, changes = headroom.adjust(_table(6.0), [], _slo(0.3, 0.4), UNITS)
    assert table["max_rps_per_replica"].tolist() == [pytest.approx(6.0 * RAISE_STEP)]
    (change,) = changes
    assert (change["kind"], change["before_rps"], change["window"], change["p99_over_slo"]) == (
        "raise", 6.0, "pool trough p0", 0.4)  # the window whose p99 sat highest
    assert "pool trough p0" in change["because"]


def test_a_raise_stops_at_the_calibrated_value():
    headroom = Headroom.of(_table(10.0))
    table, changes = headroom.adjust(_table(9.5), [], _slo(0.3, 0.4), UNITS)
    assert table["max_rps_per_replica"].tolist() == [10.0] and changes[0]["after_rps"] == 10.0
    table, changes = headroom.adjust(table, [], _slo(0.3, 0.4), UNITS)
    assert table["max_rps_per_replica"].tolist() == [10.0] and changes == []  # already at its ceiling


@pytest.mark.parametrize("ratios", [(0.3, 0.6), (0.6, 0.3), (0.5, 0.1)])
def test_one_window_at_or_above_half_is_not_raised(ratios):
    headroom = Headroom.of(_table(10.0))
    table, changes = headroom.adjust(_table(6.0), [], _slo(*ratios), UNITS)
    assert table["max_rps_per_replica"].tolist() == [6.0] and changes == []


def test_every_pool_running_the_unit_must_sit_below_half_and_none_may_miss():
    two_pools = {POOL: {("H100", 1)}, ("gcp:b", "m"): {("H100", 1)}}
    slow_b = pd.concat([_slo(0.3, 0.4), pd.DataFrame([_row(0.7, "pool peak", "p3", region="gcp:b")])])
    assert raise_candidates(slow_b, two_pools, []) == {}
    missing_other_class = pd.concat([_slo(0.3, 0.4), pd.DataFrame([_row(1.4, "pool trough", "p0", klass="batch")])])
    misses = find_misses(missing_other_class, "", "p0", {POOL: (("H100", 1),)})
    assert raise_candidates(missing_other_class, UNITS, misses) == {}
    idle_trough = pd.DataFrame([_row(0.3, "fleet peak + pool peak", "p1"), _row(5.0, "pool trough", "p0", arrived=0)])
    assert list(raise_candidates(idle_trough, UNITS, [])) == [("m", "H100", 1, "interactive")]  # no traffic: no check


def test_a_raise_that_misses_is_backed_off_and_never_raised_again():
    headroom = Headroom.of(_table(10.0))
    raised, _ = headroom.adjust(_table(6.0), [], _slo(0.3, 0.4), UNITS)
    missed = _slo(1.6, 0.4)
    table, (change,) = headroom.adjust(raised, find_misses(missed, "", "p1", {POOL: (("H100", 1),)}), missed, UNITS)
    assert change["kind"] == "back off" and table["max_rps_per_replica"].tolist() == [6.0]  # exactly as before
    table, changes = headroom.adjust(table, [], _slo(0.3, 0.4), UNITS)
    assert changes == [] and table["max_rps_per_replica"].tolist() == [6.0]


# --------------------------------------------------------------------------- the loop records every change
def _fake_loop(monkeypatch):
    """A loop whose plan is the capacity table and whose p99 / SLO is a step in the coefficient: at most 22 req/s
    per replica the pool needs one more replica and sits at 0.4 of its SLO, above it at 1.5."""
    def place(run, table, number, placements):
        value = float(table["max_rps_per_replica"].iloc[0])
        plan = pd.DataFrame({"period": ["p1"], "gpus": [3 if value <= 22 else 2]})
        return SimpleNamespace(plan=plan, flows=pd.DataFrame(), meta={"cost_usd": {"total": 10.0 * plan["gpus"][0]}},
                               value=value)

    def simulate(run, placement, number):
        ratio = 0.4 if placement.value <= 22 else 1.5
        slo = _slo(ratio, 0.3)
        units = {POOL: (("H100", 1),)}
        return loop_run._Simulated(slo, [], find_misses(slo, "", "p1", units), ["fleet peak p1", "pool trough p0"],
                                   {POOL: {("H100", 1)}})

    monkeypatch.setattr(loop_run, "_place", place)
    monkeypatch.setattr(loop_run, "_simulate", simulate)


def _run(rounds: int):
    settings = LoopSettings(max_rounds=rounds, seed=1)
    scenario = SimpleNamespace(policy=SimpleNamespace(name="fcfs"))
    return run_loop(scenario, pd.DataFrame(), None, pd.DataFrame(), settings, capacity=_table(40.0))


def test_the_loop_records_raises_and_back_offs_and_settles(monkeypatch):
    _fake_loop(monkeypatch)
    result = _run(rounds=10)
    kinds = [[c["kind"] for c in r["changes"]] for r in result.rounds]
    assert kinds == [["derate"], ["derate"], ["raise"], ["raise"], ["back off"], []]
    assert [r["raised"] for r in result.rounds] == [0, 0, 1, 1, 0, 0]
    raise_ = result.rounds[2]["changes"][0]
    assert raise_["after_rps"] == pytest.approx(raise_["before_rps"] * RAISE_STEP)
    assert raise_["window"] == "fleet peak + pool peak p1" and raise_["p99_over_slo"] == 0.4
    assert result.converged and result.plan_round == 6 and result.rounds[-1]["change"].startswith("none")
    assert result.capacity["max_rps_per_replica"].iloc[0] == result.rounds[4]["changes"][0]["after_rps"]


def test_a_last_round_that_misses_after_a_raise_returns_the_last_plan_that_met(monkeypatch):
    _fake_loop(monkeypatch)
    result = _run(rounds=5)  # round 4's raise misses in round 5, and no round is left to back it off
    assert result.rounds[-1]["failed"] == 1 and result.rounds[3]["raised"] == 1
    assert result.converged and result.plan_round == 4 and result.misses == []
    assert result.capacity["max_rps_per_replica"].iloc[0] == pytest.approx(result.rounds[2]["changes"][0]["after_rps"])

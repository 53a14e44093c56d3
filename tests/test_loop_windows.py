"""Which periods the loop replays: the fleet peak and every pool's own peak and trough, each period once."""

from __future__ import annotations

import pandas as pd

from planner.loop.windows import loop_windows, pool_periods

PERIODS = ["p0", "p1", "p2", "p3"]
DEMAND = {("aws:a", "m"): [1.0, 9.0, 4.0, 2.0],   # A peaks in p1 (the fleet peak), lowest in p0
          ("gcp:b", "m"): [3.0, 2.0, 0.0, 8.0]}   # B peaks in p3; lowest above zero in p1 (p2 has none)


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    plan = pd.DataFrame([{"period": p, "region": r, "model": m, "sku": "H100", "tp_degree": 1, "tier": "reserved",
                          "replicas": 1, "gpus": 1, "usd": 1.0} for (r, m) in DEMAND for p in PERIODS])
    flows = pd.DataFrame([{"period": p, "origin": "o", "region": r, "model": m, "traffic_class": "k", "rps": rps}
                          for (r, m), rates in DEMAND.items() for p, rps in zip(PERIODS, rates, strict=True)])
    return plan, flows


def test_each_pool_has_its_own_peak_and_trough():
    plan, flows = _frames()
    assert pool_periods(plan, flows) == {("aws:a", "m"): ("p1", "p0"), ("gcp:b", "m"): ("p3", "p1")}


def test_ties_go_to_the_earlier_period_and_a_pool_without_demand_has_no_window():
    plan, flows = _frames()
    flat = flows.assign(rps=[5.0, 5.0, 5.0, 5.0, 0.0, 0.0, 0.0, 0.0])
    assert pool_periods(plan, flat) == {("aws:a", "m"): ("p0", "p0")}


def test_every_period_is_simulated_once_with_the_pools_it_is_a_window_of():
    plan, flows = _frames()
    windows = loop_windows(plan, flows)
    assert [(w.period, w.name) for w in windows] == [
        ("p1", "fleet peak + pool peak + pool trough"), ("p0", "pool trough"), ("p3", "pool peak")]
    fleet, a_trough, b_peak = windows
    assert (fleet.label("aws:a", "m"), fleet.label("gcp:b", "m")) == ("fleet peak + pool peak",
                                                                      "fleet peak + pool trough")
    assert a_trough.label("aws:a", "m") == "pool trough" and b_peak.label("gcp:b", "m") == "pool peak"
    # the fleet peak replays every pool; a pool window only its own pools, at their demand in that period
    assert fleet.demand["rps"].tolist() == [9.0, 2.0]
    assert a_trough.demand[["region", "rps"]].values.tolist() == [["aws:a", 1.0]]
    assert b_peak.demand[["region", "rps"]].values.tolist() == [["gcp:b", 8.0]]
    assert set(b_peak.rows_of(plan)["region"]) == {"gcp:b"} and len(fleet.rows_of(plan)) == len(plan)

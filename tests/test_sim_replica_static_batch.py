"""Static batches on the replica model against the measured Splitwise end-to-end times.

Measured on the bundled data (760 distinct runs; see planner/sim/replica/static_batch.py):

| configuration | runs | MAPE % |
|---|---|---|
| all | 760 | 5.25 |
| TP2 (llama2-70b A100, H100) | 190 | 9.23 |
| TP4 (the measured-fit profiles) | 190 | 3.86 |
| TP8 (llama2-70b and bloom-176b) | 380 | 3.95 |
| llama2-70b H100 TP4 profile | 95 | 2.73 |
| llama2-70b A100-80GB TP4 profile | 95 | 4.98 |

The thresholds below sit just above these figures, so a change to the engine or the
profiles that degrades the match fails here.
"""

from __future__ import annotations

import pytest

from planner.profiles import load_profiles, profile_for
from planner.sim.replica.static_batch import (
    mape_table,
    static_batch_e2e_ms,
    static_batch_errors,
    static_batch_formula_ms,
)

THRESHOLDS_PCT = {0: 5.5, 2: 9.5, 4: 4.1, 8: 4.2}
PROFILE_THRESHOLDS_PCT = {"H100": 3.0, "A100-80GB": 5.3}


@pytest.fixture(scope="module")
def errors():
    return static_batch_errors()


def test_every_measured_configuration_is_covered(errors):
    assert len(errors) == 760
    assert set(errors["tp_degree"]) == {2, 4, 8}
    assert set(errors["model"]) == {"llama2-70b", "bloom-176b"}


@pytest.mark.parametrize("tp", sorted(THRESHOLDS_PCT))
def test_mape_per_tp_stays_below_threshold(errors, tp):
    table = mape_table(errors)
    row = table[(table["model"] == "all") & (table["tp_degree"] == tp)].iloc[0]
    assert row["mape_pct"] < THRESHOLDS_PCT[tp]


@pytest.mark.parametrize("sku", sorted(PROFILE_THRESHOLDS_PCT))
def test_measured_fit_profiles_reproduce_measured_e2e(errors, sku):
    """The production rows are exactly the profile table's measured-fit profiles."""
    profile = profile_for(load_profiles(), "llama2-70b", sku)
    assert profile["source"] == "measured-fit"
    mine = errors[(errors["model"] == "llama2-70b") & (errors["sku"] == sku) & errors["production"]]
    assert set(mine["tp_degree"]) == {int(profile["tp_degree"])}
    assert mine["ape_pct"].mean() < PROFILE_THRESHOLDS_PCT[sku]
    full = mine[mine["full_length"]]
    assert len(full) >= 60 and full["ape_pct"].mean() < PROFILE_THRESHOLDS_PCT[sku] + 1.0


@pytest.mark.parametrize("prompt,batch,tokens", [(512, 1, 128), (128, 64, 16), (4096, 8, 300), (7, 3, 1)])
def test_engine_runs_one_prefill_then_decode_steps(prompt, batch, tokens):
    a, b, c = 28.2279, 0.000555384, 0.0866584
    assert static_batch_e2e_ms(a, b, c, prompt, batch, tokens) == pytest.approx(
        static_batch_formula_ms(a, b, c, prompt, batch, tokens), rel=1e-12)

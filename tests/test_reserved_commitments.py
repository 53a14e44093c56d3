"""Reserved commitments stated over their whole term, and what the history behind them covers."""

from __future__ import annotations

import pandas as pd
import pytest

from planner.placement.reserved import EVIDENCE_WEEKS_PER_YEAR, commitments
from planner.report.fleet import commitment_sentence
from planner.report.risks import commitment_risks


def plan_rows() -> pd.DataFrame:
    """Two 12-hour periods: 8 + 4 reserved H100s in one region (constant), 2 on demand in the second period."""
    rows = []
    for period in ("p0", "p1"):
        rows += [{"period": period, "region": "gcp:us-central1", "sku": "H100", "tp_degree": 4,
                  "model": "llama-3.1-70b", "tier": "reserved", "replicas": 2, "gpus": 8, "usd": 8 * 12 * 2.5},
                 {"period": period, "region": "gcp:us-central1", "sku": "H100", "tp_degree": 1,
                  "model": "llama-3.1-8b", "tier": "reserved", "replicas": 4, "gpus": 4, "usd": 4 * 12 * 2.5},
                 {"period": period, "region": "gcp:europe-west4", "sku": "A100-80GB", "tp_degree": 1,
                  "model": "llama-3.1-8b", "tier": "reserved", "replicas": 1, "gpus": 1, "usd": 12 * 1.5}]
    rows.append({"period": "p1", "region": "gcp:us-central1", "sku": "H100", "tp_degree": 1, "model": "llama-3.1-8b",
                 "tier": "on_demand", "replicas": 2, "gpus": 2, "usd": 2 * 12 * 4.0})
    return pd.DataFrame(rows)


def test_a_commitment_is_its_gpus_held_for_the_term_at_the_price_the_horizon_is_charged():
    made = commitments(plan_rows(), horizon_hours=24.0, term_hours=8760)
    assert made == [
        {"region": "gcp:europe-west4", "sku": "A100-80GB", "gpus": 1, "term_hours": 8760,
         "horizon_usd": 36.0, "term_usd": round(1 * 8760 * 1.5, 2)},
        {"region": "gcp:us-central1", "sku": "H100", "gpus": 12, "term_hours": 8760,
         "horizon_usd": 720.0, "term_usd": round(12 * 8760 * 2.5, 2)},
    ]
    assert commitments(plan_rows()[lambda f: f["tier"] != "reserved"], 24.0, 8760) == []


def reserved_meta() -> dict:
    made = commitments(plan_rows(), horizon_hours=24.0, term_hours=8760)
    return {"commitments": made, "commitments_total_usd": sum(c["term_usd"] for c in made),
            "commitments_gpus": sum(c["gpus"] for c in made)}


def test_the_sentence_states_gpus_term_region_sku_and_the_total_beside_the_horizon_cost():
    sentence = commitment_sentence(reserved_meta(), horizon_usd=852.0)
    assert sentence is not None
    assert "13 GPUs for a 365-day term, $275,940 over the term" in sentence
    assert "12 H100 in gcp:us-central1 $262,800" in sentence and "1 A100-80GB in gcp:europe-west4 $13,140" in sentence
    assert "beside $852 for this plan's whole horizon" in sentence
    assert commitment_sentence({"commitments": []}, 852.0) is None


class _Inputs:
    def __init__(self, days: int):
        stamps = pd.date_range("2026-10-01", periods=days * 24, freq="h", tz="UTC")
        self.history = pd.DataFrame({"ts": stamps.strftime("%Y-%m-%dT%H:%M:%SZ")})
        self.plan_meta = {"reserved": reserved_meta()}


@pytest.mark.parametrize(("days", "severity"), [(14, "medium"), (60, "info")])
def test_the_risk_says_what_the_history_covers_and_is_medium_under_eight_weeks_a_year(days, severity):
    [risk] = commitment_risks(_Inputs(days))  # type: ignore[arg-type]
    assert risk["kind"] == "commitment evidence" and risk["severity"] == severity
    assert f"13 GPUs committed for 365 days ($275,940 over the term) on {days:.1f} days of history" in risk["detail"]
    assert ("under the 56 days" in risk["detail"]) == (severity == "medium")
    assert EVIDENCE_WEEKS_PER_YEAR == 8


def test_the_risk_says_when_the_short_history_limited_the_commitment_or_the_option_lifted_it():
    inputs = _Inputs(14)
    inputs.plan_meta["reserved"]["evidence"] = {"limited": True, "allowed_by_option": False}
    [risk] = commitment_risks(inputs)  # type: ignore[arg-type]
    assert "cover at most each model's steady load in the history" in risk["detail"]
    assert "--commit-on-short-history lifts that limit" in risk["detail"]
    inputs.plan_meta["reserved"]["evidence"] = {"limited": False, "allowed_by_option": True}
    [risk] = commitment_risks(inputs)  # type: ignore[arg-type]
    assert "--commit-on-short-history allowed reserving beyond" in risk["detail"]


def test_the_sentence_says_when_a_short_history_held_the_commitment_back():
    reserved = {**reserved_meta(), "term_hours": 8760,
                "evidence": {"history_hours": 336, "needed_hours": 1344, "limited": True}}
    sentence = commitment_sentence(reserved, horizon_usd=852.0)
    assert sentence is not None and sentence.endswith(
        "The history covers 14 days, under the 56 a 365-day term needs: reserved replicas were held to each "
        "model's steady load in the history (--commit-on-short-history lifts that limit).")
    none = {"commitments": [], "term_hours": 8760, "evidence": reserved["evidence"]}
    assert commitment_sentence(none, 852.0) == "Reserved commitments: none." + sentence.split("whatever the next "
                                                                                              "plans buy.")[1]
    assert commitment_sentence({**reserved, "evidence": {"limited": False}}, 852.0).endswith("plans buy.")

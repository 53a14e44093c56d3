"""Building the report model (pure): sections, honest gaps, accuracy maths, tolerant metadata, risks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_fixtures import AS_OF, empty_inputs, small_inputs

from planner.errors import InputError
from planner.report import build_report
from planner.report.accuracy import forecast_accuracy
from planner.report.evidence import ci_upper, slo_table
from planner.report.fleet import fleet_peak_gpus, plan_by_unit
from planner.report.model import SECTION_KEYS
from planner.report.render import render_json, render_markdown


@pytest.fixture(scope="module")
def model():
    return build_report(small_inputs())


def test_every_section_in_order_with_content(model):
    assert [s.key for s in model.sections] == list(SECTION_KEYS)
    statuses = {s.key: s.status for s in model.sections}
    assert statuses["accuracy"] == "partial"  # half of last month's forecast window is still ahead
    assert all(statuses[k] == "ok" for k in SECTION_KEYS if k != "accuracy")
    for section in model.sections:
        assert section.paragraphs, section.key
    for chart in model.charts():
        assert model.find_table(chart.table).frame.shape[0] > 0


def test_summary_states_spend_gpus_slo_and_three_changes(model):
    summary = model.section("summary")
    facts = model.facts
    plan = small_inputs().plan
    assert facts["spend_usd"] == pytest.approx(plan["usd"].sum(), abs=0.01)
    assert facts["spend_per_30_days_usd"] == pytest.approx(plan["usd"].sum() * 720 / 48, abs=0.01)
    assert facts["gpus_peak"] == 11 and facts["gpus_peak_by_sku"] == {"H100": 9.0, "L4": 2.0}
    assert facts["slo_met"] == 3 and facts["slo_failing"] == ["gcp:europe-west4 / llama-3.1-8b / interactive"]
    assert len(summary.bullets) == 3 and summary.bullets[0].startswith("Dropped: llama-3.1-8b on 1 x A100-80GB")


def test_without_last_months_plan_the_changes_come_from_demand():
    inputs = dataclasses.replace(small_inputs(), previous_plan=None)
    model = build_report(inputs)
    assert all(b.startswith("Demand for llama-3.1-8b") for b in model.section("summary").bullets)
    assert any(p.startswith("No data yet: the run history holds no plan") for p in model.section("plan").paragraphs)


def test_empty_inputs_give_no_data_paragraphs_not_errors():
    model = build_report(empty_inputs())
    for section in model.sections:
        if section.key in ("summary", "risks"):
            continue
        assert section.status == "no_data" and section.paragraphs[0].startswith("No data yet: "), section.key
        assert not section.tables and not section.charts
    risks = " ".join(model.section("risks").paragraphs)
    assert "did not run" in risks


@pytest.mark.parametrize(("field", "value", "match"), [
    ("month", "2026-13", "YYYY-MM"), ("as_of", "yesterday", "ISO-8601"), ("as_of", "now", "ISO-8601"),
    ("plan", pd.DataFrame({"region": ["x"], "gpus": [1]}), "lacks column"),
])
def test_bad_header_or_plan_is_an_input_error(field, value, match):
    with pytest.raises(InputError, match=match):
        build_report(dataclasses.replace(empty_inputs(), **{field: value}))


def test_accuracy_matches_a_hand_computation():
    # History: 14 days where each hour of the week repeats exactly, except the last day, then forecast errors.
    ts = pd.date_range("2026-10-18", periods=15 * 24, freq="h", tz="UTC")
    base = np.tile(np.arange(24, dtype=float) + 10.0, 15)
    base[168:192] += 2.0  # the in-sample 168-h naive error is 2 on one day of the scale window, else 0
    history = pd.DataFrame({"ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "r", "model": "m",
                            "traffic_class": "c", "requests": base})
    window = ts[-24:]
    actual = base[-24:]
    forecast = pd.DataFrame({"region": "r", "model": "m", "traffic_class": "c",
                             "ts": window.strftime("%Y-%m-%dT%H:%M:%SZ"), "mean": actual * 1.1,
                             "q90": actual * 1.05, "q99": actual * 1.2})
    as_of = pd.Timestamp("2026-11-03T00:00:00Z")
    (row,) = forecast_accuracy(forecast, history, as_of).to_dict("records")
    assert row["hours_compared"] == 24
    assert row["bias_pct"] == pytest.approx(10.0) and row["mape_pct"] == pytest.approx(10.0)
    before = base[:-24]
    scale = np.mean(np.abs(before[168:] - before[:-168]))
    assert row["mase_scale"] == "naive168"
    assert row["mase"] == pytest.approx(np.mean(0.1 * actual) / scale)
    assert row["below_q90_pct"] == 100.0 and row["below_q99_pct"] == 100.0
    assert forecast_accuracy(forecast, history, pd.Timestamp("2026-11-01T00:00:00Z")).empty  # nothing observed yet


def test_metadata_is_read_tolerantly_and_absent_figures_say_not_reported():
    inputs = small_inputs()
    meta = {"backend": "ortools", "objective_usd": 1000.0, "mip_gap": 0.002}
    model = build_report(dataclasses.replace(inputs, plan_meta=meta))
    solver = next(p for p in model.section("plan").paragraphs if p.startswith("Solver:"))
    assert "backend ortools" in solver and "objective $1,000" in solver and "gap 0.200 %" in solver
    assert "status not reported" in solver and "solve time" not in solver  # a wall-clock figure: shown only if given
    cost = " ".join(model.section("cost").paragraphs)
    assert "Lower bounds: not reported" in cost and "Baselines: not reported" in cost
    assert any("Quota usage: not reported" in p for p in model.section("risks").paragraphs)


def test_risks_cover_every_kind_most_severe_first(model):
    table = model.section("risks").table("risks").frame
    assert table["severity"].tolist() == sorted(table["severity"], key={"high": 0, "medium": 1, "info": 2}.get)
    kinds = set(table["kind"])
    assert {"quota", "slo", "utilisation", "forecast fallback", "data quality", "infeasibility", "pipeline"} <= kinds
    quota = table[table["kind"] == "quota"].iloc[0]
    assert quota["severity"] == "high" and "6 of 6 GPUs" in quota["detail"]
    assert table[table["kind"] == "utilisation"]["where"].tolist() == ["aws:us-east-1 / llama-3.1-8b / batch"]


@pytest.mark.parametrize(("meta", "severity"), [
    ({"status": "node_limit_with_incumbent", "gap": 0.031}, "medium"),
    ({"status": "time_limit_with_incumbent", "gap": 0.031}, "high"),
    ({"status": "error"}, "high"),
])
def test_a_search_that_stopped_on_a_limit_is_a_risk_by_its_kind(meta, severity):
    table = build_report(dataclasses.replace(small_inputs(), plan_meta=meta)).section("risks").table("risks").frame
    rows = table[table["kind"] == "infeasibility"]
    assert rows["severity"].tolist() == [severity] and meta["status"] in rows["detail"].iloc[0]


def test_a_plan_the_safety_net_cut_short_is_a_high_reproducibility_risk():
    meta = {"status": "feasible_within_gap", "time_limit_hits": ["the block's branch and bound"]}
    table = build_report(dataclasses.replace(small_inputs(), plan_meta=meta)).section("risks").table("risks").frame
    row = table[table["kind"] == "reproducibility"].iloc[0]
    assert row["severity"] == "high" and "may give another plan" in row["detail"]
    clean = build_report(dataclasses.replace(small_inputs(), plan_meta={"status": "optimal", "time_limit_hits": []}))
    assert "reproducibility" not in set(clean.section("risks").table("risks").frame["kind"])


def test_slo_verdicts_ratios_and_marginal_passes():
    table = slo_table(small_inputs().slo)
    batch = table[(table["region"] == "aws:us-east-1") & (table["traffic_class"] == "batch")].iloc[0]
    assert batch["slo_met"] and batch["marginal"]  # 2900 + 180 > 3000
    failing = table[~table["slo_met"].astype(bool)].iloc[0]
    assert failing["ttft_p99_over_slo"] == pytest.approx(560 / 500, abs=1e-3)
    assert ci_upper(100.0, 5.0) == 105.0 and ci_upper(100.0, [90.0, 111.0]) == 111.0
    assert ci_upper(100.0, "[95, 108]") == 108.0 and ci_upper(100.0, None) is None
    no_verdict = small_inputs().slo.drop(columns="slo_met")
    derived = slo_table(no_verdict)
    assert derived["slo_met"].tolist() == table["slo_met"].tolist()


def _tpot_evidence() -> pd.DataFrame:
    """interactive sets all three SLOs, batch no TPOT, chat only TPOT; no simulator verdict given."""
    return pd.DataFrame([
        {"region": "aws:us-east-1", "model": "llama-3.1-8b", "traffic_class": "interactive", "ttft_p99_ms": 410.0,
         "ttft_p99_ci_ms": 25.0, "ttft_slo_ms": 500.0, "tpot_p99_ms": 45.0, "tpot_p99_ci_ms": 8.0,
         "tpot_slo_ms": 50.0, "e2e_p99_ms": 7800.0, "e2e_slo_ms": 10000.0},
        {"region": "aws:us-east-1", "model": "llama-3.1-8b", "traffic_class": "batch", "ttft_p99_ms": 1200.0,
         "ttft_slo_ms": 3000.0, "tpot_p99_ms": 400.0, "tpot_slo_ms": None, "e2e_p99_ms": 30000.0,
         "e2e_slo_ms": 60000.0},
        {"region": "aws:us-east-1", "model": "llama-3.1-8b", "traffic_class": "chat", "ttft_p99_ms": 300.0,
         "ttft_slo_ms": None, "tpot_p99_ms": 70.0, "tpot_slo_ms": 60.0, "e2e_p99_ms": 9000.0, "e2e_slo_ms": None},
    ])


def test_slo_evidence_checks_only_the_metrics_each_class_sets():
    table = slo_table(_tpot_evidence()).set_index("traffic_class")
    assert table.loc["interactive", "worst_p99_over_slo"] == pytest.approx(0.9)  # TPOT 45 / 50
    assert table.loc["interactive", "slo_met"] and table.loc["interactive", "marginal"]  # 45 + 8 > 50
    # batch's TPOT is 400 ms, but it sets no TPOT SLO: neither a ratio nor a miss
    assert pd.isna(table.loc["batch", "tpot_p99_over_slo"]) and pd.isna(table.loc["batch", "tpot_slo_ms"])
    assert table.loc["batch", "worst_p99_over_slo"] == pytest.approx(0.5) and table.loc["batch", "slo_met"]
    assert table.loc["chat", "worst_p99_over_slo"] == pytest.approx(70 / 60, abs=1e-3)
    assert not table.loc["chat", "slo_met"]
    assert pd.isna(table.loc["chat", "ttft_p99_over_slo"]) and pd.isna(table.loc["chat", "e2e_p99_over_slo"])


def test_the_report_shows_a_metric_that_is_not_set_as_a_dash_and_says_it_is_not_checked():
    model = build_report(dataclasses.replace(small_inputs(), slo=_tpot_evidence()))
    section = model.section("slo")
    assert "2 of 3 simulated (region, model, class) rows meet their p99 TTFT, TPOT and end-to-end SLOs" in \
        section.paragraphs[0]
    caption = section.table("slo_evidence").caption
    assert "largest of p99 / target for TTFT, TPOT and end to end" in caption and "not checked" in caption
    lines = render_markdown(model, "NOW").splitlines()
    header = next(line for line in lines if line.startswith("| region | model | traffic_class | ttft_p99_ms"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[3:12] == ["ttft_p99_ms", "ttft_p99_ci_ms", "ttft_slo_ms", "tpot_p99_ms", "tpot_p99_ci_ms",
                             "tpot_slo_ms", "e2e_p99_ms", "e2e_p99_ci_ms", "e2e_slo_ms"]
    rows = {cells[2]: dict(zip(columns, cells, strict=True)) for cells in (
        [c.strip() for c in line.strip("|").split("|")] for line in lines[lines.index(header) + 2:]
        if line.startswith("| aws:us-east-1"))}
    assert (rows["batch"]["tpot_p99_ms"], rows["batch"]["tpot_slo_ms"]) == ("400.0", "–")
    assert (rows["chat"]["ttft_slo_ms"], rows["chat"]["e2e_slo_ms"], rows["chat"]["tpot_slo_ms"]) == ("–", "–", "60.0")
    payload = render_json(model, "NOW")
    assert '"tpot_slo_ms": null' in payload and '"tpot_slo_ms": 60.0' in payload


plans = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]), st.sampled_from(["H100", "L4"]),
                           st.sampled_from(["reserved", "spot"]), st.integers(0, 6)), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(plans)
def test_fleet_peak_is_between_the_largest_and_the_sum_of_placement_peaks(rows):
    plan = pd.DataFrame(rows, columns=["period", "region", "sku", "tier", "gpus"]).assign(
        model="m", replicas=lambda f: f["gpus"], usd=lambda f: f["gpus"] * 2.5)
    units = plan_by_unit(plan)
    peak = fleet_peak_gpus(plan)
    assert units["gpus_peak"].max() <= peak <= units["gpus_peak"].sum()
    assert units["usd"].sum() == pytest.approx(plan["usd"].sum())
    assert (units["gpus_mean"] <= units["gpus_peak"] + 1e-9).all()


def test_same_inputs_give_equal_models():
    first, second = build_report(small_inputs()), build_report(small_inputs())
    for a, b in zip(first.tables(), second.tables(), strict=True):
        pd.testing.assert_frame_equal(a.frame, b.frame)
    assert [s.paragraphs for s in first.sections] == [s.paragraphs for s in second.sections]
    assert first.as_of == AS_OF


def test_a_demand_spike_in_the_history_is_a_medium_risk():
    inputs = small_inputs()
    spike = {"kind": "spike", "series": "eu-west/llama-3.1-8b/batch", "hours": 2, "runs": 1,
             "ranges": [["2026-10-20T03:00:00Z", "2026-10-20T04:00:00Z"]], "max_value": 4800.0, "median": 60.0,
             "action": "kept as demand"}
    series = [dict(entry, data_quality=[spike]) if entry.get("series") == "eu-west/llama-3.1-8b/batch" else entry
              for entry in inputs.forecast_meta["series"]]
    model = build_report(dataclasses.replace(inputs, forecast_meta={**inputs.forecast_meta, "series": series}))
    table = model.section("risks").table("risks").frame
    row = table[table["kind"] == "demand spike"].iloc[0]
    assert row["severity"] == "medium" and row["where"] == "eu-west/llama-3.1-8b/batch"
    assert "up to 4800 (median 60)" in row["detail"] and "2026-10-20T03:00:00Z" in row["detail"]
    assert "demand spike" not in set(build_report(inputs).section("risks").table("risks").frame["kind"])


def test_the_policy_section_says_why_policies_differ_or_why_they_tie():
    inputs = small_inputs()
    capacity = ["llama-3.1-8b H100 TP1 9 req/s/GPU at 45 % of ceiling"] + [
        "llama-3.1-8b H100 TP1 14 req/s/GPU at 70 % of ceiling"] * 3
    differ = dataclasses.replace(inputs, policy_comparison=inputs.policy_comparison.assign(capacity=capacity))
    section = next(s for s in build_report(differ).sections if s.key == "policies")
    assert "capacity" in section.tables[0].frame.columns
    assert any(p.startswith("Why the policies differ") for p in section.paragraphs)

    tied = differ.policy_comparison.assign(usd=1000.0, gpus=10.0, capacity=capacity[1])
    section = next(s for s in build_report(dataclasses.replace(inputs, policy_comparison=tied)).sections
                   if s.key == "policies")
    assert not any(p.startswith("Why the policies differ") for p in section.paragraphs)
    assert any(p.startswith("Every policy needs the same fleet") for p in section.paragraphs)


def test_bounds_and_baselines_show_their_status_and_the_reserved_break_even():
    inputs = small_inputs()
    meta = {**inputs.plan_meta,
            "reference_status": {"lp_relaxation_usd": {"status": "optimal"},
                                 "best_single_sku_usd": {"status": "node_limit", "gap": 0.031}},
            "plan_source": "best_single_sku",
            "reserved": {"term_hours": 8760, "rule": "the horizon is shorter than the reserved term",
                         "break_even": [{"region": "aws:us-east-1", "sku": "H100", "break_even_utilisation": 0.65}]}}
    cost = build_report(dataclasses.replace(inputs, plan_meta=meta)).section("cost")
    refs = cost.table("cost_vs_bounds").frame.set_index("reference")
    assert refs.loc["lp relaxation", "status"] == "optimal"
    assert refs.loc["best single sku", "status"] == "node limit reached, gap 3.1 %"
    assert any("node limit reached, gap 3.1 %" in b for b in cost.bullets)
    assert any("the single-SKU plan was cheaper: returned it" in b for b in cost.bullets)
    text = " ".join(cost.paragraphs)
    assert "break-even utilisation" in text and "aws:us-east-1 H100 65" in text and "8,760-hour term" in text
    plain = build_report(small_inputs()).section("cost")
    assert "status" not in plain.table("cost_vs_bounds").frame.columns
    assert not any("returned it" in b for b in plain.bullets)


def test_the_forecast_is_compared_with_the_history_that_exists():
    """48 forecast hours against 48 of the 21 days of history; with only 30 hours of history, those 30, said so."""
    inputs = small_inputs()
    full = build_report(inputs).section("forecast").paragraphs[0]
    assert "against the 48 hours of history before it" in full
    stamps = pd.to_datetime(inputs.history["ts"], utc=True)
    short = dataclasses.replace(inputs, history=inputs.history[stamps >= stamps.max() - pd.Timedelta(hours=29)])
    paragraph = build_report(short).section("forecast").paragraphs[0]
    assert "against the 30 hours of history before it (all there is; the forecast covers 48)." in paragraph

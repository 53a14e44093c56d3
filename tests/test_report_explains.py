"""A report that explains itself: definitions beside headline numbers, ties, skip reasons, idle regions, risks, layout.

Small synthetic inputs (``report_fixtures``) and plain facts; no pipeline run.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from report_fixtures import small_inputs
from test_report_render import fake_pngs

from planner.catalog import load_catalog
from planner.forecast import backtest
from planner.report import build_report
from planner.report.assemble import plan_prices
from planner.report.charts import ZOOM_NOTE, draw_bars, zoomed_range
from planner.report.explain import bound_notes, objective_note, sku_peak_note
from planner.report.regions import RegionFacts, idle_region_reason, idle_regions, region_facts
from planner.report.render import WRAP_CHARS, render_html
from planner.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[1]


def _section(inputs, key):
    return build_report(inputs).section(key)


# ---------------------------------------------------------------------------------- headline numbers
def test_the_summary_says_why_per_sku_peaks_add_up_to_more_than_the_fleet_peak():
    assert "137, more than the fleet's peak of 133, because the SKUs peak in different periods" in sku_peak_note(
        133, {"A100-80GB": 39, "H100": 78, "L4": 20})
    inputs = small_inputs()
    plan = inputs.plan.copy()
    plan.loc[(plan["period"] == 1) & (plan["sku"] == "L4"), ["gpus", "replicas", "usd"]] = 0  # L4 peaks in period 0
    plan.loc[(plan["period"] == 0) & (plan["sku"] == "H100"), ["gpus", "replicas"]] -= 1  # H100 peaks in period 1
    summary = _section(dataclasses.replace(inputs, plan=plan), "summary")
    assert "because the SKUs peak in different periods" in summary.paragraphs[0]


def test_the_objective_is_explained_against_the_plan_cost():
    meta = {"objective": 124940.0, "cost_usd": {"rental": 124880.0, "switching": 0.0, "total": 124880.0},
            "problem": {"latency_penalty_usd_per_request_ms": 1e-08}}
    note = objective_note(meta, 124880.0)
    assert "($124,940) is what the solver minimises, not what the plan costs" in note
    assert "a latency tie-break of $60.00 (1e-08 USD per request per ms of round-trip time)" in note
    with_switching = objective_note({**meta, "cost_usd": {"switching": 40.0}}, 124880.0)
    assert "switching costs ($40" in with_switching and "latency tie-break of $20.00" in with_switching
    inputs = small_inputs()
    plan_section = _section(dataclasses.replace(inputs, plan_meta={**inputs.plan_meta, **meta}), "plan")
    assert any("latency tie-break of" in p for p in plan_section.paragraphs)


def test_equal_bounds_say_why_they_coincide():
    bounds = {"lp relaxation": 122695.0, "best proven": 122695.0, "solver bound": 122695.2,
              "perfectly elastic": 118000.0}
    notes = bound_notes(bounds, 124880.0)
    assert any(n.startswith("LP relaxation ($122,695): the placement problem with fractional replicas") for n in notes)
    equal = [n for n in notes if n.startswith("All three bounds")]
    assert len(equal) == 1 and "the LP relaxation is tight" in equal[0]
    assert "best proven takes the solver bound, which is above the perfectly elastic bound ($118,000)" in equal[0]
    assert not any("equal" in n for n in bound_notes({"lp relaxation": 1.0e5, "solver bound": 1.1e5}, 1.2e5))
    inputs = small_inputs()
    total = float(inputs.plan["usd"].sum())
    meta = {**inputs.plan_meta, "bound": total * 0.9, "lower_bounds": {"lp_relaxation_usd": total * 0.9,
                                                                       "best_proven_usd": total * 0.9}}
    cost = _section(dataclasses.replace(inputs, plan_meta=meta), "cost")
    assert any("All three bounds (best proven, LP relaxation and solver bound)" in p for p in cost.paragraphs)


# ---------------------------------------------------------------------------------- ties
def test_a_tie_between_policies_names_every_tied_policy():
    inputs = small_inputs()
    tied = inputs.policy_comparison.assign(usd=1000.0, gpus=10.0, slo_met=True)
    section = _section(dataclasses.replace(inputs, policy_comparison=tied), "policies")
    text = section.paragraphs[0]
    assert text.startswith("Tie: cmu, drr-wspt, fcfs and wspt cost the same (every policy compared)")
    assert "Cheapest" not in text and "Against" not in text
    assert section.facts["tied_policies"] == ["cmu", "drr-wspt", "fcfs", "wspt"]


def test_the_policy_in_use_against_the_cheapest_is_said_once():
    inputs = small_inputs()
    meta = {**inputs.plan_meta, "policy": "fcfs"}
    text = _section(dataclasses.replace(inputs, plan_meta=meta), "policies").paragraphs[0]
    assert text.count("Against fcfs") == 1 and "Against fcfs (the policy in use)" in text


# ---------------------------------------------------------------------------------- backtest
def test_a_skipped_backtest_gives_its_reason():
    inputs = small_inputs()
    reason = "history of 400 h is too short for 3 windows of at least 24 h after 336 h of training"
    series = [{**s, "backtest": {"skipped": reason}} for s in inputs.forecast_meta["series"]]
    meta = {**inputs.forecast_meta, "parameters": {"measure": "requests", "backtest": True},
            "backtest_overall": {"series_backtested": 0}, "series": series}
    paragraphs = _section(dataclasses.replace(inputs, forecast_meta=meta), "forecast").paragraphs
    line = next(p for p in paragraphs if p.startswith("Backtest"))
    assert f"skipped, not run: {reason} (2 of 2 series" in line and "--backtest" not in line
    meta = {**meta, "parameters": {"backtest": False}, "backtest_overall": None,
            "series": inputs.forecast_meta["series"]}
    paragraphs = _section(dataclasses.replace(inputs, forecast_meta=meta), "forecast").paragraphs
    assert "Backtest: not reported (the forecast ran without --backtest)." in paragraphs


# ---------------------------------------------------------------------------------- idle regions
def _facts(region, reachable=("us-east",), gpus=0.0, quota=64, prices=((("H100", "reserved"), 4.47),),
           residency=True, nearest=("us-east", 8.0)):
    return RegionFacts(region=region, reachable=reachable, nearest=nearest, budget_ms=250.0,
                       residency_allows=residency, quota_gpus=quota, prices=prices, gpus=gpus)


USED = _facts("gcp:us-central1", gpus=64.0, prices=((("H100", "reserved"), 3.39),))


def test_an_idle_region_cheaper_served_elsewhere_says_price():
    reason, detail = idle_region_reason(_facts("aws:us-east-1"), [USED])
    assert reason == "price"
    assert detail == ("gcp:us-central1 serves the same origins (us-east) within their latency budgets at $3.39 per "
                      "H100 GPU-hour (reserved) against $4.47 here")
    assert idle_region_reason(_facts("gcp:us-central1", gpus=8.0), [USED]) is None


def test_an_idle_region_without_quota_says_quota():
    assert idle_region_reason(_facts("aws:us-east-1", quota=0), [USED])[0] == "quota"
    assert idle_region_reason(_facts("aws:us-east-1", prices=()), [USED])[0] == "quota"


def test_an_idle_region_out_of_reach_says_latency_or_residency():
    reason, detail = idle_region_reason(_facts("gcp:asia-northeast1", reachable=(), nearest=("us-west", 300.0)),
                                        [USED])
    assert reason == "latency" and "outside every class's latency budget (at most 250 ms)" in detail
    assert "us-west, is 300 ms away" in detail
    reason, detail = idle_region_reason(_facts("gcp:europe-west4", reachable=(), residency=False), [USED])
    assert reason == "latency" and "residency" in detail


def test_idle_regions_come_from_the_scenario_the_catalog_and_the_plan():
    with (REPO / "scenarios" / "demo.toml").open("rb") as handle:
        scenario = parse_scenario(tomllib.load(handle), source="demo")
    plan = pd.DataFrame([{"period": 0, "region": "gcp:us-central1", "sku": "H100", "tier": "reserved", "gpus": 8,
                          "usd": 100.0, "model": "llama-3.1-8b"}])
    table = idle_regions(region_facts(scenario, load_catalog(), plan, ["us-east", "us-west"]))
    rows = {r.region: (r.reason, r.detail) for r in table.itertuples(index=False)}
    assert "gcp:us-central1" not in rows
    assert rows["aws:us-east-1"][0] == "price" and "against $4.47 here" in rows["aws:us-east-1"][1]
    assert rows["gcp:asia-northeast1"][0] == "latency"  # no origin with demand may go there
    inputs = dataclasses.replace(small_inputs(), idle_regions=table)
    plan_section = _section(inputs, "plan")
    assert any(p.startswith("3 serving region(s) get no capacity: aws:us-east-1: price (") for p in
               plan_section.paragraphs)
    assert plan_section.table("idle_regions").frame.equals(table)


# ---------------------------------------------------------------------------------- risks
def _backtest(below_q99, mase, naive):
    return {"model": {"mase": mase, "below": {"q99": below_q99}, "hours_scored": 504},
            "naive24": {"mase": naive}, "naive168": {"mase": naive + 0.1}}


def test_risks_name_q99_under_coverage_naive_beating_series_and_understated_prices():
    inputs = small_inputs()
    series = [{**inputs.forecast_meta["series"][0], "backtest": _backtest(0.93, 0.8, 0.9)},
              {**inputs.forecast_meta["series"][1], "backtest": _backtest(0.988, 1.05, 0.95)}]
    prices = pd.DataFrame([
        {"region": "gcp:europe-west4", "sku": "L4", "tier": "spot", "usd": 33.6, "usd_per_gpu_hour": 0.35,
         "assumption": "host g2-standard-4 not in the source subset: accelerator-only price, understated"},
        {"region": "aws:us-east-1", "sku": "H100", "tier": "reserved", "usd": 403.2, "usd_per_gpu_hour": 2.1,
         "assumption": "reserved = on_demand x 0.65: assumed 35% aws 1-yr commitment discount, not a quote"}])
    risks = _section(dataclasses.replace(inputs, forecast_meta={**inputs.forecast_meta, "series": series},
                                         plan_prices=prices), "risks").table("risks").frame
    coverage = risks[(risks["kind"] == "q99 under-coverage") & risks["detail"].str.contains("backtest")]
    assert list(coverage["where"]) == ["eu-west/llama-3.1-8b/batch"]
    assert "93.0 % of 504 backtest hours" in coverage["detail"].iloc[0]
    naive = risks[risks["kind"] == "naive-beating series"]
    assert list(naive["where"]) == ["eu-west/llama-3.1-8b/interactive"]
    assert "MASE 1.050 against 0.950 for naive24" in naive["detail"].iloc[0]
    price = risks[risks["kind"] == "understated price"]
    assert list(price["where"]) == ["gcp:europe-west4 L4 spot"] and "$34" in price["detail"].iloc[0]


# ---------------------------------------------------------------------------------- layout
def test_the_loop_table_prints_no_raw_lists_or_mappings():
    frame = _section(small_inputs(), "slo").table("plan_loop_rounds").frame
    cells = frame.astype(str).to_numpy().ravel()
    assert not [c for c in cells if c.startswith(("[", "{"))]
    assert frame["shortfall"].tolist() == ["ttft_p99_ms: 140", "ttft_p99_ms: 60"]
    assert frame["failed"].iloc[0] == "gcp:europe-west4/llama-3.1-8b/interactive"


def test_near_equal_costs_get_a_zoomed_axis_that_says_so():
    assert zoomed_range([127811.0, 125600.0, 122695.0]) == pytest.approx((120137.0, 130369.0))
    assert zoomed_range([100.0, 40.0]) is None and zoomed_range([0.0, 1.0]) is None
    inputs = small_inputs()
    total = float(inputs.plan["usd"].sum())
    near = {**inputs.plan_meta, "bound": None, "lower_bounds": {"lp_relaxation_usd": 0.982 * total},
            "baselines": {"best_single_sku_usd": 1.01 * total}}
    chart = next(c for c in _section(dataclasses.replace(inputs, plan_meta=near), "cost").charts
                 if c.name == "cost_vs_bounds")
    assert chart.options["zoom"] and chart.title.endswith(f"({ZOOM_NOTE})") and chart.alt.endswith(f"({ZOOM_NOTE})")
    chart = next(c for c in _section(inputs, "cost").charts if c.name == "cost_vs_bounds")  # 1.6 x spread
    assert ZOOM_NOTE not in chart.title


def test_every_html_table_can_wrap_or_scroll_within_a_1280_px_page():
    model = build_report(small_inputs())
    page = render_html(model, "GOLDEN", fake_pngs(model))
    css = page[page.index("<style>"):page.index("</style>")]
    assert re.search(r"\.table-wrap\{[^}]*overflow-x:auto", css)
    assert re.search(r"main\{[^}]*box-sizing:border-box;max-width:1280px", css)
    assert not re.search(r"(^|[};])td(\.wrap)?\{[^}]*white-space:nowrap", css)  # text cells wrap
    assert not re.search(r"min-width:\d{3,}px", css)  # no fixed width that could overflow
    tables = page.count("<table")
    assert tables == len(re.findall(r'<div class="table-wrap"><table', page)) > 0
    assert 'class="wide"' in page  # the many-column SLO table is set smaller
    for cell in re.findall(r"<td([^>]*)>([^<]*)</td>", page):
        if len(cell[1]) > WRAP_CHARS and not re.search(r"\d", cell[1][:1]):
            assert 'class="wrap"' in cell[0], cell


def test_the_bars_chart_draws_the_zoomed_axis():
    frame = pd.DataFrame({"reference": ["plan", "bound"], "usd": [127811.0, 122695.0], "kind": ["plan", "bound"]})
    figure = Figure()
    draw_bars(figure, frame, {"label": ["reference"], "value": "usd", "color_by": "kind", "zoom": True})
    axis = figure.axes[0]
    assert axis.get_xlim()[0] == pytest.approx(120137.0) and ZOOM_NOTE in axis.get_xlabel()
    figure = Figure()
    draw_bars(figure, frame, {"label": ["reference"], "value": "usd", "color_by": "kind"})
    assert figure.axes[0].get_xlim()[0] == 0.0


def test_the_backtest_records_the_share_of_hours_below_each_quantile():
    accumulator = backtest._Accumulator([0.05, 0.1, 0.9, 0.95, 0.99])
    x = np.array([10.0, 20.0, 30.0, 40.0])
    quantiles = {0.05: x - 5, 0.1: x - 1, 0.9: x + 1, 0.95: x + 5, 0.99: np.array([11.0, 21.0, 29.0, 41.0])}
    accumulator.add(x, x, quantiles, scale=1.0)
    assert accumulator.result()["below"]["q99"] == pytest.approx(0.75)  # the third hour is above its q99


def test_the_plan_prices_carry_the_catalog_note_that_makes_an_understated_price_risk():
    plan = pd.DataFrame([{"period": p, "region": "gcp:asia-east1", "sku": "L4", "tier": "spot", "gpus": 2,
                          "usd": 10.0} for p in (0, 1)]
                        + [{"period": 0, "region": "aws:us-east-1", "sku": "H100", "tier": "reserved", "gpus": 8,
                            "usd": 100.0}])
    prices = plan_prices(plan, load_catalog())
    assert prices[["region", "usd"]].values.tolist() == [["aws:us-east-1", 100.0], ["gcp:asia-east1", 20.0]]
    risks = _section(dataclasses.replace(small_inputs(), plan_prices=prices), "risks").table("risks").frame
    assert list(risks.loc[risks["kind"] == "understated price", "where"]) == ["gcp:asia-east1 L4 spot"]


def test_last_months_q99_under_coverage_is_a_risk():
    model = build_report(small_inputs())  # last month's q99 held 90.5 % and 95.8 % of the hours in two series
    risks = model.section("risks").table("risks").frame
    coverage = risks[risks["kind"] == "q99 under-coverage"]
    assert list(coverage["where"]) == ["eu-west/llama-3.1-8b/batch", "us-east/llama-3.1-8b/batch"]
    assert list(coverage["severity"]) == ["medium", "medium"]
    assert coverage["detail"].iloc[0] == ("last month, actuals at or below the q99 forecast in 90.5 % of 168 hours "
                                          "(99 % if calibrated)")


def test_a_bound_equal_to_the_plan_cost_says_the_plan_is_optimal_and_partial_backtests_say_what_was_left_out():
    notes = bound_notes({"solver bound": 1049.2, "lp relaxation": 1007.0}, 1049.0)
    assert "Solver bound equals the plan's cost: no plan for the same demand and capacity coefficients costs less, " \
           "so this plan is optimal." in notes
    inputs = small_inputs()
    reason = "no observed hours in any backtest window"
    series = [{**inputs.forecast_meta["series"][0], "backtest": {"skipped": reason}},
              {**inputs.forecast_meta["series"][1], "backtest": _backtest(0.99, 0.8, 0.9)}]
    meta = {**inputs.forecast_meta, "series": series}
    line = next(p for p in _section(dataclasses.replace(inputs, forecast_meta=meta), "forecast").paragraphs
                if p.startswith("Backtest"))
    assert line.startswith("Backtest (rolling origin): MASE 0.780")
    assert line.endswith(f"; not backtested: {reason} (1 of 2 series, e.g. eu-west/llama-3.1-8b/batch).")

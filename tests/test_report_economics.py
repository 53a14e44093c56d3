"""What a plan's deployments cost per token (planner/report/economics.py), against hand computations."""

from __future__ import annotations

import math

import pandas as pd

from planner.report.economics import deployment_table, served_cost_per_m_tokens, tokens_per_request

HISTORY = pd.DataFrame({
    "model": ["m", "m", "m"], "traffic_class": ["chat", "chat", "long"],
    "requests": [100, 300, 50], "prompt_tokens_sum": [100_000, 300_000, 500_000],
    "output_tokens_sum": [20_000, 60_000, 10_000],
})
FORECAST = pd.DataFrame({
    "ts": ["2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z", "2026-11-01T01:00:00Z", "2026-11-02T00:00:00Z"],
    "model": ["m", "m", "m", "m"], "traffic_class": ["chat", "long", "chat", "chat"],
    "mean": [1_000.0, 100.0, 3_000.0, 99_999.0],  # the last hour is outside the window
})
PLAN = pd.DataFrame({"period": ["p", "p"], "model": ["m", "m"], "sku": ["H100", "H100"], "tp_degree": [1, 2],
                     "replicas": [3, 1], "gpus": [3, 2], "usd": [60.0, 40.0]})


def test_tokens_per_request_are_the_history_s_means_per_model_and_class():
    assert tokens_per_request(HISTORY) == {("m", "chat"): 200.0, ("m", "long"): 200.0}
    assert tokens_per_request(HISTORY, prompt=True) == {("m", "chat"): 1200.0, ("m", "long"): 10_200.0}
    assert tokens_per_request(HISTORY.drop(columns="prompt_tokens_sum"), prompt=True) == {}


def test_served_cost_divides_the_plan_s_usd_by_the_tokens_the_forecast_serves_in_the_window():
    window = ("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z")
    output = 4_000 * 200.0 + 100 * 200.0  # chat requests x 200 + long requests x 200
    both = 4_000 * 1_200.0 + 100 * 10_200.0
    assert math.isclose(served_cost_per_m_tokens(PLAN, FORECAST, HISTORY, *window)["m"], 100.0 * 1e6 / output)
    assert math.isclose(served_cost_per_m_tokens(PLAN, FORECAST, HISTORY, *window, prompt=True)["m"],
                        100.0 * 1e6 / both)
    assert served_cost_per_m_tokens(PLAN, None, HISTORY, *window) == {}


def test_a_deployment_s_cost_at_capacity_is_its_gpu_hour_price_over_its_output_tokens():
    units = [{"model": "m", "sku": "H100", "tp_degree": 1, "mix_rps_per_replica": 4.0, "status": "ok",
              "classes": {"chat": {"share": 0.5, "output_mean_tokens": 100.0},
                          "long": {"share": 0.5, "output_mean_tokens": 300.0}}},
             {"model": "m", "sku": "H100", "tp_degree": 2, "status": "infeasible"}]
    deployments = [{"model": "m", "sku": "H100", "tp_degree": 1, "engine": "vllm", "launch": "vllm serve m"}]
    table = deployment_table(PLAN, {"p": 10.0}, deployments, units).set_index("tp_degree")
    one = table.loc[1]
    assert (one["gpus_peak"], one["usd_per_gpu_hour"]) == (3, 2.0)  # $60 over 3 GPUs x 10 h
    assert one["rps_per_gpu"] == 4.0 and one["output_tokens_per_s_per_gpu"] == 800.0  # 4 req/s x 200 tokens
    assert math.isclose(one["usd_per_m_output_tokens_at_capacity"], 2.0 * 1e6 / (3600 * 800.0))
    assert one["launch"] == "vllm serve m"
    assert math.isnan(table.loc[2, "rps_per_gpu"])  # not calibrated: no throughput, no cost per token

"""The real-data section of ``benchmarks/forecast_accuracy.py`` without statsforecast.

On a series whose every day is the day before plus 10 requests an hour, the 24 h seasonal
naive misses by exactly 10 at every hour and so does its in-sample scale, so its MASE is
1.0; the 168 h naive misses by 70, MASE 7.0. A fake reference runner stands in for the
statsforecast one to check the request/result contract and the scoring of its rows.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "forecast_accuracy.py"


@pytest.fixture(scope="module")
def fa():
    name = "forecast_accuracy_benchmark"
    spec = importlib.util.spec_from_file_location(name, BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    saved_path = list(sys.path)
    sys.modules[name] = module  # dataclasses look their module up here
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
        sys.path[:] = saved_path  # the script prepends the repository root


DAYS = 10
MISSING_HOUR = 9 * 24 + 5  # inside the last origin's horizon: not observed, so not scored


def _history() -> pd.DataFrame:
    hours = np.arange(DAYS * 24)
    requests = 100 + 10 * (hours // 24) + 3 * (hours % 24)
    stamps = pd.Timestamp("2025-03-03T00:00:00Z") + pd.to_timedelta(hours, unit="h")
    frame = pd.DataFrame({"ts": stamps.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "r1", "model": "m1",
                          "traffic_class": "all", "requests": requests})
    return frame.drop(index=MISSING_HOUR).reset_index(drop=True)


@pytest.fixture(scope="module")
def dataset(fa):
    history = _history()
    return fa.RealDataset("tiny", history, 24, fa.rolling_origins(history, 2, 24))


def test_origins_are_day_starts_before_the_end_and_cut_keeps_only_the_past(fa, dataset):
    assert [o.strftime("%Y-%m-%d %H:%M") for o in dataset.origins] == ["2025-03-11 00:00", "2025-03-12 00:00"]
    cut = fa.cut_at(dataset.history, dataset.origins[0])
    assert len(cut) == 8 * 24 and cut["ts"].iloc[-1] == "2025-03-10T23:00:00Z"


def test_cases_carry_past_actuals_observed_hours_and_the_24h_scale(fa, dataset):
    cases = fa.origin_cases(dataset)
    assert [c.past.n_hours for c in cases] == [192, 216]
    assert [c.lead for c in cases] == [0, 0]
    assert [c.scale for c in cases] == [10.0, 10.0]
    assert [int(c.scored.sum()) for c in cases] == [24, 23]
    assert cases[0].actual[0] == 100 + 10 * 8


def test_naive_rows_score_the_known_mase_on_observed_hours_only(fa, dataset):
    cases = fa.origin_cases(dataset)
    daily = fa.score(cases, fa.naive_runs(cases, 24, 24))
    weekly = fa.score(cases, fa.naive_runs(cases, 168, 24))
    assert daily["mase"] == pytest.approx(1.0) and weekly["mase"] == pytest.approx(7.0)
    assert daily["hours_scored"] == 47
    # every in-sample daily error is 10: the band, centred on the point, has no width and misses every actual
    assert daily["coverage90"] == 0.0 and daily["coverage98"] == 0.0
    # every actual is 10 (one scale) above every quantile: pinball at tau is tau * 10 / 10
    assert daily["pinball_scaled"]["q95"] == pytest.approx(0.95)
    assert daily["pinball_scaled"]["q99"] == pytest.approx(0.99)
    assert daily["pinball_scaled"]["q1"] == pytest.approx(0.01)


def test_planner_row_forecasts_every_case_through_forecast_history(fa, dataset):
    cases = fa.origin_cases(dataset)
    runs = fa.planner_runs(dataset, cases)
    assert sorted(runs.forecasts) == [0, 1]
    assert all(mean.size == 24 and set(q) == set(fa.TAIL_LEVELS) for mean, q in runs.forecasts.values())
    assert set(fa.TAIL_LEVELS) == {0.01, 0.05, 0.10, 0.90, 0.95, 0.99}
    assert len(runs.models_used) == 2  # one forecast per origin, whichever model the product chose
    assert all("r1/m1/all" in note and "fallback" in note for note in runs.notes)  # fallbacks say why


FAKE_RUNNER = textwrap.dedent('''
    import json, sys
    request = json.load(open(sys.argv[1]))
    results = []
    for task in request["tasks"]:
        mean = [task["y"][-24 + h % 24] for h in range(task["horizon"])]
        block = {"mean": mean, "fit_seconds": 0.5}
        for level in request["levels"]:
            block[f"lo{level}"] = [m - 1 for m in mean]
            block[f"hi{level}"] = [m + 1 for m in mean]
        models = {"mstl_autoarima": block, "autoets": block}
        if task["id"] == "1":
            models["autoets"] = {"error": "ValueError: no fit"}
        results.append({"id": task["id"], "models": models})
    json.dump({"versions": {"statsforecast": "fake"}, "results": results}, open(sys.argv[2], "w"))
''')


def test_reference_runner_contract_with_a_fake_runner(fa, dataset, tmp_path):
    cases = fa.origin_cases(dataset)
    request = fa.reference_request(cases, 24)
    assert request["levels"] == [80, 90, 98]
    assert [(t["id"], len(t["y"]), t["horizon"], t["season_lengths"]) for t in request["tasks"]] == [
        ("0", 192, 24, [24]), ("1", 216, 24, [24])]
    runner = tmp_path / "fake_runner.py"
    runner.write_text(FAKE_RUNNER)
    runs = fa.reference_runs(fa.run_reference(request, Path(sys.executable), runner), cases)
    mstl, ets = runs["mstl_autoarima"], runs["autoets"]
    assert sorted(mstl.forecasts) == [0, 1] and sorted(ets.forecasts) == [0]
    assert len(ets.notes) == 1 and "no fit" in ets.notes[0]
    scored = fa.score(cases, mstl)
    assert scored["mase"] == pytest.approx(1.0)  # the fake repeats the last day: the 24 h naive
    assert scored["coverage80"] == 0.0  # actual = mean + 10, outside mean +- 1
    assert scored["pinball_scaled"]["q99"] == pytest.approx(0.99 * 9 / 10)  # hi98 = mean + 1 read as the q99
    assert scored["fit_seconds_per_series"] == 0.5
    json.dumps(request)  # the request is plain JSON


def _block(q95: float) -> dict:
    return {"pinball_scaled": {"q95": q95}}


def test_q95_pinball_verdicts_name_the_better_naive_and_every_series_the_planner_loses(fa):
    key_a, key_b = ("r", "a", "c"), ("r", "b", "c")
    per_series = {"planner": {key_a: _block(0.2), key_b: _block(0.5)},
                  "naive24": {key_a: _block(0.3), key_b: _block(0.4)},
                  "naive168": {key_a: _block(0.25), key_b: _block(0.6)}}
    line, met = fa.pinball_verdict(per_series["planner"][key_a], {n: per_series[n][key_a] for n in fa.NAIVE_PERIODS})
    assert met and line == "planner q95 pinball 0.200 vs the better naive's 0.250 (naive 168 h, planner -20.0%): met"
    lines = fa.series_verdicts(per_series)
    assert lines == [
        "r/b/c: planner q95 pinball 0.500 vs the better naive's 0.400 (naive 24 h, planner +25.0%): MISSED"]
    per_series["planner"][key_b] = _block(0.1)
    assert "all 2 series" in fa.series_verdicts(per_series)[0]


def test_missing_reference_venv_gives_no_rows_and_says_how_to_make_it(fa, dataset, tmp_path):
    cases = fa.origin_cases(dataset)
    runs, note = fa.reference_or_note(cases, 24, tmp_path / "no-venv" / "bin" / "python")
    assert runs == {} and "make reference-venv" in note


def test_demo_series_are_picked_spread_over_sorted_keys(fa):
    keys = [("r", f"m{i:02d}", "c") for i in range(32)]
    frame = pd.DataFrame([{"region": r, "model": m, "traffic_class": c, "ts": "x"} for r, m, c in keys])
    picked = fa.demo_series(frame)["model"].tolist()
    assert picked == ["m00", "m05", "m10", "m16", "m21", "m26"]


def test_backtest_q95_reads_the_band_chosen_at_q95_and_the_naives(fa):
    selection = {"winner": "harmonic", "upper_band": {"q95": "mstl"},
                 "candidates": {"harmonic": {"tail_pinball_scaled": {"q95": 0.3}},
                                "mstl": {"tail_pinball_scaled": {"q95": 0.2}},
                                "naive24": {"tail_pinball_scaled": {"q95": 0.4}},
                                "naive168": {"error": "could not fit"}}}
    assert fa.backtest_q95(selection) == {"chosen": 0.2, "naive24": 0.4}
    del selection["upper_band"]
    assert fa.backtest_q95(selection)["chosen"] == 0.3
    assert fa.backtest_q95({"skipped": "too short"}) == {}


def test_held_out_evidence_gives_losses_per_origin_the_paired_test_and_the_backtest(fa, dataset):
    cases = fa.origin_cases(dataset)

    def runs_above(offsets):  # q95 this far above every actual: pinball (1 - 0.95) * offset / scale (10)
        runs = fa.MethodRuns()
        for i, case in enumerate(cases):
            runs.forecasts[i] = (case.actual, {0.95: case.actual + offsets[i]})
        return runs

    planner = runs_above([10.0, 20.0])
    planner.backtest_q95 = {0: {"chosen": 0.1, "naive168": 0.2}, 1: {"chosen": 0.3, "naive168": 0.2}}
    lines = fa.held_out_evidence(cases, {"planner": planner, "naive168": runs_above([0.0, 0.0])},
                                 ("r1", "m1", "all"), "naive168")
    assert lines[0].endswith("03-11 0.050/0.000, 03-12 0.100/0.000")
    # gaps 0.05 and 0.10: t = 0.075 / (0.0354 / sqrt 2) = 3.00 < t_0.95(1) = 6.31
    assert "paired t of the held-out gap 3.00 over 2 origins" in lines[1] and "> 6.31): within" in lines[1]
    assert lines[2].endswith("0.100/0.200, 0.300/0.200 (the chosen band lower at 1 of 2 origins)")

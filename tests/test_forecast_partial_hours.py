"""Partly collected hours (``planner.forecast.quality`` rule 6b): found, masked or kept, reported, and not
confused with a daily trough, a weekly dip or a ramp; the flagged counts on real data held fixed."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from planner import cli
from planner.forecast.findings import summary_lines
from planner.forecast.model import ModelSpec
from planner.forecast.quality import HOUR_NS, PARTIAL_FRACTION, clean_series
from planner.forecast.run import clean_history
from planner.forecast.synthetic import START, Truth, hourly_stamps, synthetic_series

T0 = int(START.value)
INJECTED = (200, 263, 331, 402, 478, 545)
"""Hours of the injected partial hours: past the first week, none a day or a week from another."""

runner = CliRunner()


def stamps_ns(n: int) -> np.ndarray:
    return T0 + np.arange(n, dtype=np.int64) * HOUR_NS


def series(n: int = 24 * 28, seed: int = 0, truth: Truth | None = None) -> np.ndarray:
    """A busy series with a daily cycle, a weekend drop and AR(1) plus Poisson noise."""
    values, _ = synthetic_series(n, np.random.default_rng(seed), truth or Truth(), poisson=True)
    return values


def with_partial_hours(values: np.ndarray, hours: tuple[int, ...] = INJECTED) -> np.ndarray:
    """``values`` with each of ``hours`` at 30-50 % of the smallest of its three references."""
    out = values.copy()
    for hour, share in zip(hours, np.resize([0.3, 0.4, 0.5], len(hours)), strict=True):
        out[hour] = np.round(share * min(values[hour - 1], values[hour + 1], values[hour - 168]))
    return out


def partial(findings: list[dict]) -> dict | None:
    found = [f for f in findings if f["kind"] == "partial_hour"]
    assert len(found) <= 1
    return found[0] if found else None


def flagged_hours(finding: dict | None) -> list[int]:
    if finding is None:
        return []
    out = []
    for first, last in finding["ranges"]:
        a, b = ((pd.Timestamp(x) - START) // pd.Timedelta(hours=1) for x in (first, last))
        out += list(range(a, b + 1))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_injected_partial_hours_are_flagged_and_masked_like_outages(seed: int) -> None:
    values = with_partial_hours(series(seed=seed))
    clean = clean_series("r/m/c", stamps_ns(values.size), values)
    finding = partial(clean.findings)
    assert finding is not None and finding["series"] == "r/m/c" and finding["action"].startswith("masked")
    assert flagged_hours(finding) == list(INJECTED)
    assert finding["hours"] == finding["runs"] == len(INJECTED) and finding["partial_hours"] == "mask"
    assert np.isnan(clean.values[list(INJECTED)]).all() and not clean.observed[list(INJECTED)].any()
    assert clean.observed.sum() == values.size - len(INJECTED)
    # imputed for the baselines from the same hour a week earlier, not the partial value
    np.testing.assert_array_equal(clean.filled[list(INJECTED)], values[[h - 168 for h in INJECTED]])


def test_keep_reports_them_but_keeps_them_as_demand() -> None:
    values = with_partial_hours(series())
    clean = clean_series("r/m/c", stamps_ns(values.size), values, partial_hours_mode="keep")
    finding = partial(clean.findings)
    assert finding is not None and finding["action"].startswith("kept as demand")
    assert flagged_hours(finding) == list(INJECTED) and finding["partial_hours"] == "keep"
    np.testing.assert_array_equal(clean.values, values)
    assert clean.observed.all()


@pytest.mark.parametrize("seed", range(4))
def test_a_clean_series_has_no_partial_hour(seed: int) -> None:
    values = series(24 * 56, seed=seed)
    assert partial(clean_series("s", stamps_ns(values.size), values).findings) is None


def test_a_deep_daily_trough_is_not_a_partial_hour() -> None:
    # a daily amplitude of 1.2 in logs: the trough hour is 11x below the peak, but only a few per cent
    # below the hours on either side of it
    values = series(truth=Truth(daily_amp=1.2))
    assert values.max() / values.min() > 10
    assert partial(clean_series("s", stamps_ns(values.size), values).findings) is None


def test_a_weekly_dip_is_not_a_partial_hour_once_a_week_before_is_known() -> None:
    values = series(24 * 35)
    dips = np.arange(24 * 2 + 3, values.size, 168)  # every Wednesday 03:00, a weekly job ends: 40 % of the usual
    values[dips] = np.round(0.4 * values[dips])
    finding = partial(clean_series("s", stamps_ns(values.size), values).findings)
    # The first Wednesday has only the day before for reference, and a weekly dip then looks like a partial
    # hour (module docstring); every later one is matched by the week before.
    assert flagged_hours(finding) == [int(dips[0])]


def test_a_step_up_is_a_ramp_not_a_partial_hour() -> None:
    values = series()
    values[300:] *= 3.0  # a launch: the hour before it is a third of the hour after
    assert partial(clean_series("s", stamps_ns(values.size), values).findings) is None


def test_masked_or_missing_neighbours_are_no_evidence() -> None:
    values = with_partial_hours(series(), (200, 263, 331))
    values[199] = 0.0  # an outage hour before the first partial hour
    keep = np.ones(values.size, dtype=bool)
    keep[264] = False  # the hour after the second one is missing
    clean = clean_series("s", stamps_ns(values.size)[keep], values[keep])
    assert "outage" in {f["kind"] for f in clean.findings}
    assert flagged_hours(partial(clean.findings)) == [331]


def test_the_day_before_stands_in_for_a_missing_week_before_and_neither_means_not_judged() -> None:
    values = with_partial_hours(series(), (200,))
    values[100] = np.round(0.4 * min(values[99], values[101], values[76]))  # no week before hour 100
    keep = np.ones(values.size, dtype=bool)
    keep[32] = False  # the week before hour 200 is missing: the day before (176) is the reference
    clean = clean_series("s", stamps_ns(values.size)[keep], values[keep])
    assert flagged_hours(partial(clean.findings)) == [100, 200]
    keep[[76, 176]] = False  # now hour 200 has neither; hour 100 has no week before and no day before
    clean = clean_series("s", stamps_ns(values.size)[keep], values[keep])
    assert flagged_hours(partial(clean.findings)) == []


def test_a_quiet_series_is_not_judged() -> None:
    values = np.full(24 * 21, 12.0)
    values[300] = 3.0  # a quarter of its neighbours, but 12 an hour is within Poisson noise of 3
    assert partial(clean_series("s", stamps_ns(values.size), values).findings) is None


def test_the_terminal_line_names_the_masked_hours_and_the_kept_ones() -> None:
    values = with_partial_hours(series())
    masked = clean_series("eu-west/m/chat", stamps_ns(values.size), values).findings
    kept = clean_series("eu-west/m/chat", stamps_ns(values.size), values, partial_hours_mode="keep").findings
    assert summary_lines([{"series": "eu-west/m/chat", "data_quality": masked}]) == [
        f"data: {len(INJECTED)} partly collected hours masked in 1 series: eu-west/m/chat ({len(INJECTED)})"]
    assert summary_lines([{"series": "eu-west/m/chat", "data_quality": kept}]) == [
        f"data: {len(INJECTED)} partly collected hours kept as demand (--partial-hours keep) in 1 series: "
        f"eu-west/m/chat ({len(INJECTED)})"]


def test_the_model_spec_carries_the_choice() -> None:
    assert ModelSpec().partial_hours == "mask" and ModelSpec().as_dict()["partial_hours"] == "mask"
    assert replace(ModelSpec(), partial_hours="keep").as_dict()["partial_hours"] == "keep"


# --------------------------------------------------------------------------- real data
def flagged(history: pd.DataFrame) -> int:
    return sum(f["hours"] for _, clean in clean_history(history) for f in clean.findings
               if f["kind"] == "partial_hour")


def servegen(repo_root) -> pd.DataFrame:
    """ServeGen's 10-minute rates summed into hourly counts, as ``servegen_history`` in
    ``benchmarks/forecast_accuracy.py`` does."""
    rates = pd.read_csv(repo_root / "data/sources/servegen_aggregate/rate_rps_10min_m-large_m-mid.csv")
    hourly = rates.groupby(rates["window_start_s"] // 3600)[["m-large", "m-mid"]].sum() * 600.0
    stamps = hourly_stamps(len(hourly))
    return pd.concat([pd.DataFrame({"ts": stamps, "region": "bailian", "model": name, "traffic_class": "all",
                                    "requests": hourly[name].to_numpy()}) for name in ("m-large", "m-mid")])


def azure(repo_root) -> pd.DataFrame:
    """The Azure 2023 sample's requests counted per hour, one series per trace."""
    parts = []
    for trace in ("code", "conv"):
        times = pd.read_csv(repo_root / f"data/samples/azure_llm_2023/AzureLLMInferenceTrace_{trace}.csv")
        counts = pd.to_datetime(times["TIMESTAMP"], utc=True).dt.floor("h").value_counts().sort_index()
        parts.append(pd.DataFrame({"ts": counts.index.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "azure",
                                   "model": trace, "traffic_class": "all", "requests": counts.to_numpy()}))
    return pd.concat(parts)


def test_real_and_demo_histories_flag_the_measured_counts(repo_root) -> None:
    # the figures of the module docstring at PARTIAL_FRACTION 0.6: a change in the rule or the data shows here
    assert PARTIAL_FRACTION == 0.6
    assert flagged(servegen(repo_root)) == 0
    assert flagged(azure(repo_root)) == 0
    assert flagged(pd.read_parquet(repo_root / "data/history/demo_history.parquet")) == 26


# --------------------------------------------------------------------------- CLI
def test_the_cli_option_masks_by_default_and_keeps_on_request(tmp_path) -> None:
    values = with_partial_hours(series(24 * 21), (200, 263, 331))
    pd.DataFrame({"ts": hourly_stamps(values.size), "region": "eu-west", "model": "m", "traffic_class": "chat",
                  "requests": values}).to_csv(tmp_path / "x.csv", index=False)
    for choice, line in (("mask", True), ("keep", False)):
        out = tmp_path / choice / "f.csv"
        args = ["forecast", str(tmp_path / "x.csv"), "--out", str(out), "--horizon", "24h", "--engine", "local"]
        result = runner.invoke(cli.app, [*args, "--partial-hours", choice] if choice == "keep" else args)
        assert result.exit_code == 0, result.output
        meta = json.loads(out.with_name("f.meta.json").read_text())
        assert meta["parameters"]["model_spec"]["partial_hours"] == choice
        finding = partial(meta["series"][0]["data_quality"])
        assert finding is not None and finding["partial_hours"] == choice and finding["hours"] == 3
        assert ("3 partly collected hours masked in 1 series" in " ".join(result.output.split())) is line

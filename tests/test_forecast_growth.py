"""Forecast tails within the evidence: the growth limit, the damped decomposition on short histories,
the tail test of model choice, and the findings the terminal prints."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT
from scipy.special import ndtri

from planner.contracts import DEFAULT_MAX_GROWTH, quantile_column
from planner.forecast.findings import summary_lines
from planner.forecast.forecaster import SeriesForecast, SeriesHistory
from planner.forecast.growth import WARN_MULTIPLE, bound_growth, growth_findings, history_peak
from planner.forecast.model import ModelSpec
from planner.forecast.mstl import LONG_ORDER, SHORT_ORDER, MstlForecaster
from planner.forecast.run import forecast_history
from planner.forecast.selection import NAIVE_CANDIDATES, SelectingForecaster

LEVELS = [0.5, 0.9, 0.95, 0.99]
SERVEGEN = REPO_ROOT / "data" / "sources" / "servegen_aggregate" / "rate_rps_10min_m-large_m-mid.csv"


def fourteen_days(seed: int, peak_per_s: float, noise: float, cls: str) -> pd.DataFrame:
    """Two weeks of hourly requests with a daily cycle, a slow random walk of the level and noise."""
    rng = np.random.default_rng(seed)
    n = 14 * 24
    hour = np.arange(n) % 24
    daily = 0.55 + 0.45 * np.sin(2 * np.pi * (hour - 8) / 24)
    walk = np.cumsum(rng.normal(0, 0.03, n))
    rate = peak_per_s * daily * np.exp(walk - walk.max() + rng.normal(0, noise, n))
    ts = pd.date_range("2026-11-01", periods=n, freq="h", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    return pd.DataFrame({"ts": ts, "region": "us-east", "model": "llama-3.1-70b", "traffic_class": cls,
                         "requests": np.round(rate * 3600)})


def generated_history(seed: int) -> pd.DataFrame:
    return pd.concat([fourteen_days(seed, 15.0, 0.15, "coding"), fourteen_days(seed + 100, 40.0, 0.10, "chat")],
                     ignore_index=True)


def servegen_history() -> pd.DataFrame:
    """ServeGen's 10-minute rates of m-large and m-mid as hourly request counts (14 days)."""
    rates = pd.read_csv(SERVEGEN)
    hourly = rates.groupby(rates["window_start_s"] // 3600)[["m-large", "m-mid"]].sum() * 600.0
    ts = (pd.Timestamp("2025-01-06T00:00:00Z") + pd.to_timedelta(hourly.index, unit="h")).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    return pd.concat([pd.DataFrame({"ts": ts, "region": "bailian", "model": name, "traffic_class": "all",
                                    "requests": hourly[name].to_numpy()}) for name in ("m-large", "m-mid")],
                     ignore_index=True)


def assert_within_the_bound(history: pd.DataFrame, horizon_hours: int, max_growth: float = DEFAULT_MAX_GROWTH):
    """No quantile above ``max_growth`` times its series' peak, and every cap that cut one is a finding."""
    result = forecast_history(history, horizon_hours=horizon_hours, quantiles=LEVELS, engine="local",
                              spec=ModelSpec(max_growth=max_growth))
    keys = ["region", "model", "traffic_class"]
    peaks = history.groupby(keys)["requests"].max()
    for entry in result.metadata["series"]:
        key = (entry["region"], entry["model"], entry["traffic_class"])
        rows = result.forecast.set_index(keys).loc[key]
        growth = entry["fit"]["growth"]
        assert growth["history_peak"] == pytest.approx(peaks[key], rel=1e-5)  # the metadata keeps 6 digits
        for level in LEVELS:
            column = quantile_column(level)
            assert rows[column].max() <= max_growth * peaks[key] * (1 + 1e-6), (key, column)
        was_cut = any(growth["multiple_of_peak"][quantile_column(level)] > max_growth for level in LEVELS)
        kinds = [finding["kind"] for finding in entry["forecast_findings"]]
        assert ("quantile_capped" in kinds) == was_cut, (key, growth)
    return result


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("horizon_hours", [7 * 24, 30 * 24])
def test_no_quantile_of_a_fourteen_day_forecast_exceeds_the_growth_limit(seed, horizon_hours):
    assert_within_the_bound(generated_history(seed), horizon_hours)


@pytest.mark.slow
@pytest.mark.parametrize("horizon_hours", [7 * 24, 30 * 24])
def test_no_quantile_of_a_servegen_forecast_exceeds_the_growth_limit(horizon_hours):
    assert_within_the_bound(servegen_history(), horizon_hours)


@pytest.mark.slow
def test_a_raised_limit_keeps_what_the_model_says_and_names_a_quantile_above_twice_the_peak():
    """Seed 4's coding series runs to 2.2 x its peak a month out: capped by default, kept (and named) at 5 x."""
    history = generated_history(4)
    capped = assert_within_the_bound(history, 30 * 24)
    assert any("capped at 2 x" in line for line in capped.metadata["findings"])
    raised = assert_within_the_bound(history, 30 * 24, max_growth=5.0)
    kinds = {finding["kind"] for entry in raised.metadata["series"] for finding in entry["forecast_findings"]}
    assert kinds == {"quantile_above_peak"}
    assert any(f"above {WARN_MULTIPLE:g} x" in line and "--max-growth 5" in line
               for line in raised.metadata["findings"])


def history_of(values: np.ndarray, observed: np.ndarray | None = None) -> SeriesHistory:
    observed = np.ones(values.size, dtype=bool) if observed is None else observed
    return SeriesHistory(np.where(observed, values, np.nan), values, observed, 0)


def test_the_bound_caps_every_level_and_the_mean_keeping_the_quantiles_in_order():
    history = history_of(np.array([10.0, 40.0, 25.0]))
    quantiles = {0.5: np.array([30.0, 60.0, 90.0]), 0.9: np.array([50.0, 85.0, 200.0])}
    bounded = bound_growth(SeriesForecast(np.array([35.0, 70.0, 120.0]), quantiles, "m"), history, 2.0)
    assert bounded.quantiles[0.5].tolist() == [30.0, 60.0, 80.0]
    assert bounded.quantiles[0.9].tolist() == [50.0, 80.0, 80.0]
    assert bounded.mean.tolist() == [35.0, 70.0, 80.0]
    growth = bounded.details["growth"]
    assert growth["capped_hours"] == {"q50": 1, "q90": 2}
    assert growth["multiple_of_peak"] == {"q50": 90.0 / 40.0, "q90": 200.0 / 40.0}
    [finding] = growth_findings("s", growth, [0.5, 0.9])
    assert finding["kind"] == "quantile_capped" and finding["hours"] == {"q50": 1, "q90": 2}
    assert growth_findings("s", growth, [0.1]) == []  # a level the run does not write is nobody's finding


def test_the_peak_is_of_observed_hours_only():
    values = np.array([10.0, 500.0, 30.0])
    assert history_peak(history_of(values, np.array([True, False, True]))) == 30.0


def daily_truth(t: np.ndarray) -> np.ndarray:
    return 1000 * (1 + 0.5 * np.sin(2 * np.pi * t / 24))


@dataclass(frozen=True, eq=False)
class RunawayTail:
    """The noiseless truth as its median, with a band that widens with the square of the lead: the best MASE,
    and a tail no calibration of its width can mend (too narrow at the first hours, far too wide at the last)."""

    end: int = 0

    @property
    def name(self) -> str:
        return "runaway"

    def fit(self, history: SeriesHistory) -> RunawayTail:
        return RunawayTail(history.t_start_abs + history.n_hours)

    def predict(self, horizon: int, levels) -> SeriesForecast:
        median = daily_truth(np.arange(self.end, self.end + horizon))
        spread = 0.001 * np.arange(1, horizon + 1) ** 2.0
        quantiles = {lvl: np.expm1(np.log1p(median) + float(ndtri(lvl)) * spread) for lvl in levels}
        return SeriesForecast(median, quantiles, "runaway")


def test_an_upper_band_that_loses_clearly_is_taken_from_the_candidate_that_wins_it():
    """The runaway model keeps the median it wins, and its upper levels go to the naive whose band beats it."""
    rng = np.random.default_rng(5)
    t = np.arange(28 * 24)
    history = history_of(daily_truth(t) * np.exp(rng.normal(0, 0.05, t.size)))
    selector = SelectingForecaster((("runaway", RunawayTail()),) + NAIVE_CANDIDATES, horizon_hours=24,
                                   levels=(0.05, 0.5, 0.95, 0.99))
    fitted = selector.fit(history)
    selection = fitted.report["selection"]
    candidates = selection["candidates"]
    assert selection["winner"] == "runaway"
    assert candidates["runaway"]["mase"] < min(candidates[n]["mase"] for n, _ in NAIVE_CANDIDATES)
    taken = selection["upper_band"]
    assert set(taken) == {"q95", "q99"} and set(taken.values()) <= {"naive24", "naive168"}
    for column, name in taken.items():
        assert candidates[name]["tail_pinball_scaled"][column] < candidates["runaway"]["tail_pinball_scaled"][column]
    forecast = fitted.predict(48, [0.5, 0.95, 0.99])
    assert np.array_equal(forecast.quantiles[0.5], RunawayTail(history.n_hours).predict(48, [0.5]).quantiles[0.5])
    assert np.all(forecast.quantiles[0.5] <= forecast.quantiles[0.95])
    assert np.all(forecast.quantiles[0.95] <= forecast.quantiles[0.99])
    assert forecast.model_used.startswith("runaway; q95") and "from seasonal_naive" in forecast.model_used
    assert forecast.quantiles[0.99][-1] < 3 * forecast.quantiles[0.5][-1]  # the runaway band would be 10^15 x


def test_the_decomposition_reverts_to_its_mean_on_a_short_window_and_drifts_on_a_long_one():
    rng = np.random.default_rng(9)

    def fitted(days: int) -> MstlForecaster:
        t = np.arange(days * 24)
        values = 500 * (1 + 0.4 * np.sin(2 * np.pi * t / 24)) * np.exp(np.cumsum(rng.normal(0, 0.01, t.size)))
        return MstlForecaster().fit(history_of(values))

    short, long = fitted(14), fitted(70)
    assert short.fitted is not None and long.fitted is not None
    assert short.fitted.order == SHORT_ORDER and long.fitted.order == LONG_ORDER
    _, variance = short.fitted.log_forecast(30 * 24)
    assert variance[-1] < 1.2 * variance[7 * 24]  # levelled off after a week, not still growing with the horizon


def test_the_terminal_lines_name_masked_hours_fallbacks_and_caps():
    series = [
        {"series": "a", "fallback": False, "data_quality": [{"kind": "outage", "hours": 17}],
         "forecast_findings": [{"kind": "quantile_capped", "largest_multiple_of_peak": 22.4, "max_growth": 2.0}]},
        {"series": "b", "fallback": True, "data_quality": [{"kind": "outage", "hours": 1},
                                                           {"kind": "spike", "hours": 2}], "forecast_findings": []},
    ]
    data, forecast = summary_lines(series)
    assert data == ("data: 18 outage hours masked in 2 series: a (17), b (1); "
                    "2 spike hours kept as demand (check the source) in 1 series: b (2)")
    assert "1 series fell back to a seasonal naive (b)" in forecast
    assert "capped at 2 x their history's peak" in forecast and "a (22.4)" in forecast
    assert summary_lines([{"series": "c", "data_quality": [{"kind": "ends_early", "hours": 3}]}]) == []
    assert summary_lines([{"series": "c", "data_quality": [{"kind": "outage", "hours": 1}]}]) == [
        "data: 1 outage hour masked in 1 series: c (1)"]
    [spike] = summary_lines([{"series": "c", "data_quality": [{"kind": "spike", "hours": 3}]}])
    assert spike == "data: 3 spike hours kept as demand (check the source) in 1 series: c (3)"


def test_past_the_longest_lead_scored_the_band_keeps_the_width_it_had_within_it():
    from planner.forecast.calibration import Calibration, centre_and_spread

    median = np.full(10, 100.0)
    spread = np.linspace(0.05, 0.5, 10)  # the model widens its band with every hour
    band = {lvl: np.expm1(np.log1p(median) + float(ndtri(lvl)) * spread) for lvl in (0.5, 0.95, 0.99)}
    calibration = Calibration.from_errors([np.linspace(-2.0, 2.0, 200)])
    held = calibration.apply(band, [0.5, 0.99], evidence_hours=4)
    free = calibration.apply(band, [0.5, 0.99])
    assert np.allclose(held[0.99][:4], free[0.99][:4])
    assert np.allclose(held[0.99][4:], held[0.99][3]) and free[0.99][-1] > 1.5 * held[0.99][-1]
    assert np.array_equal(held[0.5], free[0.5])
    _, w = centre_and_spread({0.5: np.array([100.0]), 0.95: np.array([300.0]), 0.05: np.array([0.0])})
    assert w[0] == pytest.approx(np.log(301 / 101) / ndtri(0.95))  # a lower half clipped at zero is not read

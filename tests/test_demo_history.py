"""The bundled demo demand history: contract, shape, recorded outages, and reproducibility.

The history is SYNTHETIC; these tests pin what the forecaster and the demo rely on: the
columns of the ingest contract, 13 months x 32 series, consistent token figures, the
documented daily and weekly cycles, the outages recorded in the meta JSON, and that the
committed file is exactly what the committed script produces.
"""

from __future__ import annotations

import importlib
import json
import sys
from itertools import product

import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT
from scipy.special import ndtr, ndtri

from planner.errors import InputError
from planner.storage import file_sha256

BUILD = REPO_ROOT / "data" / "build"
HISTORY = REPO_ROOT / "data" / "history" / "demo_history.parquet"
META = REPO_ROOT / "data" / "history" / "demo_history_meta.json"
INT_COLUMNS = [
    "requests", "prompt_tokens_sum", "output_tokens_sum",
    "prompt_tokens_p50", "prompt_tokens_p99", "output_tokens_p50", "output_tokens_p99",
]  # fmt: skip


def _import(name: str):
    if str(BUILD) not in sys.path:
        sys.path.insert(0, str(BUILD))
    return importlib.import_module(name)


gen = _import("make_demo_history")
tokens = _import("demo_history_tokens")
sources = _import("demo_history_sources")


@pytest.fixture(scope="module")
def history() -> pd.DataFrame:
    return pd.read_parquet(HISTORY)


@pytest.fixture(scope="module")
def meta() -> dict:
    return json.loads(META.read_text(encoding="utf-8"))


def _series(frame: pd.DataFrame, region: str, model: str, traffic_class: str) -> pd.DataFrame:
    rows = frame[(frame.region == region) & (frame.model == model) & (frame.traffic_class == traffic_class)]
    return rows.assign(t=pd.to_datetime(rows.ts)).set_index("t")


def test_columns_and_types_are_the_ingest_contract(history):
    assert list(history.columns) == gen.COLUMNS
    for column in INT_COLUMNS:
        assert history[column].dtype == np.int64, column
    assert history["synthetic"].dtype == bool
    assert history["synthetic"].all()
    assert history["ts"].str.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:00:00Z").all()


def test_covers_thirteen_months_of_32_series(history):
    assert history["ts"].min() == "2025-10-01T00:00:00Z"
    assert history["ts"].max() == "2026-10-31T23:00:00Z"
    assert history["ts"].str[:7].nunique() == 13
    keys = set(map(tuple, history[["region", "model", "traffic_class"]].drop_duplicates().to_numpy()))
    expected = set(product(("us-east", "us-west", "eu-west", "ap-northeast"),
                           ("llama-3.1-8b", "llama-3.1-70b"),
                           ("interactive", "standard", "batch", "long-context")))  # fmt: skip
    assert keys == expected
    assert not history.duplicated(["ts", "region", "model", "traffic_class"]).any()


def test_token_figures_are_consistent(history):
    assert (history[INT_COLUMNS] >= 0).all().all()
    busy, idle = history[history.requests > 0], history[history.requests == 0]
    for kind in ("prompt", "output"):
        assert (busy[f"{kind}_tokens_sum"] >= busy.requests).all()
        assert (busy[f"{kind}_tokens_p50"] >= 1).all()
        assert (history[f"{kind}_tokens_p50"] <= history[f"{kind}_tokens_p99"]).all()
        assert (idle[[f"{kind}_tokens_sum", f"{kind}_tokens_p50", f"{kind}_tokens_p99"]] == 0).all().all()
    cap = history.model.map(gen.CONTEXT_TOKENS) - gen.OUTPUT_CAP_TOKENS
    assert (history.prompt_tokens_p99 <= cap).all()
    assert (history.output_tokens_p99 <= gen.OUTPUT_CAP_TOKENS).all()
    assert (history.prompt_tokens_sum <= history.requests * cap).all()


def test_scale_us_east_largest_and_70b_smaller(history):
    peaks = history.groupby(["region", "model", "traffic_class"]).requests.max()
    assert peaks.min() >= 1_000 and peaks.max() <= 300_000
    assert peaks.idxmax()[0] == "us-east"
    for region, traffic_class in product(gen.UTC_OFFSET_HOURS, gen.CLASSES):
        assert peaks[(region, "llama-3.1-70b", traffic_class)] < peaks[(region, "llama-3.1-8b", traffic_class)]


def _circular_gap(a: float, b: float) -> float:
    gap = abs(a - b) % 24
    return min(gap, 24 - gap)


@pytest.mark.parametrize("region", ["us-east", "us-west", "eu-west", "ap-northeast"])
def test_daily_cycle_peaks_at_the_documented_local_hour(history, region):
    offset = pd.Timedelta(hours=gen.UTC_OFFSET_HOURS[region])
    for traffic_class, documented in gen.DIURNAL_PEAK_LOCAL_HOUR.items():
        rows = _series(history, region, "llama-3.1-8b", traffic_class)
        by_hour = rows.requests.groupby((rows.index + offset).hour).mean()
        # hour bins are [h, h+1): a peak at 19.2 h falls in bin 19; allow one bin either side
        assert _circular_gap(by_hour.idxmax() + 0.5, documented) <= 1.5, (traffic_class, by_hour.idxmax())


def test_weekends_are_lower_for_interactive_and_standard(history):
    for region in gen.UTC_OFFSET_HOURS:
        offset = pd.Timedelta(hours=gen.UTC_OFFSET_HOURS[region])
        for traffic_class, ceiling in (("interactive", 0.9), ("standard", 0.85), ("batch", 1.05)):
            rows = _series(history, region, "llama-3.1-8b", traffic_class)
            weekend = (rows.index + offset).day_of_week >= 5
            ratio = rows.requests[weekend].mean() / rows.requests[~weekend].mean()
            assert ratio < ceiling, (region, traffic_class, ratio)


def test_recorded_outages_are_in_the_file(history, meta):
    outages = {o["kind"]: o for o in meta["events"]["outages"]}
    assert set(outages) == {"zero_requests", "missing_rows", "partial"}
    indexed = history.set_index(["region", "model", "traffic_class", "ts"])
    for kind, outage in outages.items():
        assert len(outage["hours"]) >= 5
        for s in outage["series"]:
            key = (s["region"], s["model"], s["traffic_class"])
            before = pd.Timestamp(outage["start"]) - pd.Timedelta(hours=1)
            assert key + (before.strftime("%Y-%m-%dT%H:00:00Z"),) in indexed.index  # neighbours present
            if kind == "missing_rows":
                assert not any(key + (h,) in indexed.index for h in outage["hours"])
                continue
            got = indexed.loc[[key + (h,) for h in outage["hours"]], "requests"].to_numpy()
            week_ago = [(pd.Timestamp(h) - pd.Timedelta(days=7)).strftime("%Y-%m-%dT%H:00:00Z")
                        for h in outage["hours"]]  # fmt: skip
            usual = indexed.loc[[key + (h,) for h in week_ago], "requests"].to_numpy()
            if kind == "zero_requests":
                assert (got == 0).all() and (usual > 1_000).all()  # a busy series went silent
            else:
                assert got.sum() < 0.6 * usual.sum()
    hours_total = len(history.ts.unique())
    assert hours_total == (pd.Timestamp(gen.END) - pd.Timestamp(gen.START)) // pd.Timedelta(hours=1)
    assert len(history) == 32 * hours_total - len(outages["missing_rows"]["series"]) * len(
        outages["missing_rows"]["hours"]
    )


def test_committed_file_is_what_the_script_produces(history, meta):
    regenerated = gen.generate_with_events(gen.SEED, gen.START, gen.END)
    pd.testing.assert_frame_equal(regenerated.frame, history)
    assert [dict(sorted(e.__dict__.items())) for e in regenerated.episodes] == meta["events"]["episodes"]
    assert meta["seed"] == gen.SEED and meta["rows"] == len(history) and meta["synthetic"] is True
    assert meta["sha256"] == file_sha256(HISTORY)


def test_the_first_24_series_keep_their_random_streams_after_long_context_joined():
    """long-context's series come after the first classes', so theirs draw what they always drew."""
    keys = gen.series_keys()
    first = [k for k in keys if k[2] != "long-context"]
    assert keys[:24] == first and all(k[2] == "long-context" for k in keys[24:])


def test_long_context_prompts_are_mooncake_long_up_to_a_32k_context(history):
    rows = history[history.requests > 0]
    mean_prompt = rows.groupby("traffic_class").apply(lambda g: g.prompt_tokens_sum.sum() / g.requests.sum())
    # the Mooncake sample's median is 8,873 and mean 13,910; cut at 31,744 the mean comes to about 9,900
    assert 9_000 < mean_prompt["long-context"] < 11_000
    assert history.loc[history.traffic_class == "long-context", "prompt_tokens_p99"].max() <= 31_744
    assert mean_prompt["long-context"] > 5 * mean_prompt.drop("long-context").max()


def test_generation_is_seeded_and_pure():
    a = gen.generate(7, "2026-01-01T00:00:00Z", "2026-01-08T00:00:00Z")
    b = gen.generate(7, "2026-01-01T00:00:00Z", "2026-01-08T00:00:00Z")
    c = gen.generate(8, "2026-01-01T00:00:00Z", "2026-01-08T00:00:00Z")
    pd.testing.assert_frame_equal(a, b)
    assert not a["requests"].equals(c["requests"])
    assert len(a) == 32 * 7 * 24


def test_constants_match_the_real_traces(meta):
    assert sources.DATA_DIR == REPO_ROOT / "data"  # the measured traces are the copies in the checkout
    measured = sources.measure_all()
    assert gen.provenance_mismatches(measured) == []
    assert json.loads(json.dumps(measured)) == meta["measured_sources"]


@pytest.mark.slow
def test_the_script_rebuilds_the_committed_files_from_the_bundled_traces(tmp_path, history, meta):
    assert gen.main(["--out-dir", str(tmp_path)]) == 0
    rebuilt = json.loads((tmp_path / "demo_history_meta.json").read_text(encoding="utf-8"))
    # The Parquet bytes (and so their hash) may differ with the pyarrow version; the values may not.
    assert rebuilt.pop("sha256") == file_sha256(tmp_path / "demo_history.parquet")
    assert rebuilt == {k: v for k, v in meta.items() if k != "sha256"}
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "demo_history.parquet"), history)


def test_a_missing_trace_names_the_file_and_the_data_dir_option(tmp_path):
    with pytest.raises(InputError) as caught:
        sources.measure_all(tmp_path)
    assert str(tmp_path / sources.SERVEGEN_FILE) in str(caught.value)
    assert "--data-dir" in str(caught.value)


def test_small_hours_draw_every_request_exactly():
    rng = np.random.default_rng(1)
    law = tokens.LengthLaw(mu=np.full(4, np.log(129.0)), sigma=0.66, lo=1.0, hi=1024.0)
    total, p50, p99 = tokens.hour_token_stats(np.array([0, 1, 3, 150]), law, rng)
    assert (total[0], p50[0], p99[0]) == (0, 0, 0)
    assert total[1] == p50[1] == p99[1]  # one request: its length is every statistic
    assert (total[1:] >= np.array([1, 3, 150])).all() and (p50 <= p99).all() and (p99 <= 1024).all()


@pytest.mark.parametrize(
    ("p50", "sigma", "cap", "n"),
    [(1469.0, 0.697, 3072.0, 400), (129.0, 0.662, 1024.0, 250), (13.0, 1.273, 1024.0, 1000)],
)
def test_large_hour_laws_match_exact_sampling(p50, sigma, cap, n):
    """The CLT sum and Beta order-statistic quantiles against brute-force draws of n
    lengths per hour, over 1,500 hours. Hourly figures vary by at most ~10% (CV), so the
    standard error of a 1,500-hour mean is <= 0.26% and of the difference of two such
    means <= 0.4%: 1.2% is 3 standard errors. The relative standard error of an sd is
    1/sqrt(2 * 1500) = 1.8%, 2.6% for a ratio of two: 10% leaves room for heavy tails."""
    hours = 1_500
    law = tokens.LengthLaw(mu=np.full(hours, np.log(p50)), sigma=sigma, lo=1.0, hi=cap)
    total, q50, q99 = tokens.hour_token_stats(np.full(hours, n), law, np.random.default_rng(2))
    a, _, z = law._bounds()
    u = np.random.default_rng(3).random((hours, n))
    draws = np.clip(np.rint(np.exp(np.log(p50) + sigma * ndtri(ndtr(a[0]) + u * z[0]))), 1.0, cap)
    exact = [draws.sum(axis=1), *np.quantile(draws, [0.5, 0.99], axis=1, method="inverted_cdf")]
    for fast, brute in zip((total, q50, q99), exact, strict=True):
        assert abs(fast.mean() / brute.mean() - 1) < 0.012
        assert abs(fast.std() / brute.std() - 1) < 0.10

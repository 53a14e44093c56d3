"""Measure the real traces that shape the demo demand history.

The demo history (``make_demo_history.py``) is synthetic, but each of its shape
parameters is a figure measured here from public traces kept in the repository's
``data/`` folder (paths below are relative to it):

* ServeGen (Alibaba Bailian, ``sources/servegen_aggregate/rate_rps_10min_m-large_m-mid.csv``):
  10-minute request rates over 14 days, ``window_start_s = 0`` at 00:00 local time.
  Daily cycle, hourly noise (size, persistence, tail weight), day-to-day level shifts,
  drift and collection gaps.
* Azure LLM inference traces 2023
  (``samples/azure_llm_2023/AzureLLMInferenceTrace_{conv,code}.csv``): one row per request
  over about one hour. Per-minute burstiness and token lengths.
* Mooncake conversation trace, first 200 lines (``samples/mooncake/``): long outputs.

Every function takes a path and returns plain numbers (floats rounded to 4 significant
digits so the recorded JSON is stable), so the generator's constants can be checked
against the data they came from. The recorded ``file`` of each source is its path
relative to the data folder, so the JSON does not depend on where the checkout lives.

Maths used below:

* Hour-of-day log profile (ServeGen): hourly rate r_{d,h} = mean of the six 10-minute
  rates in hour h of day d; residual u_{d,h} = log r_{d,h} - mean_h log r_{d,h};
  profile p(h) = mean_d u_{d,h}; then a least-squares fit with K = 3 harmonics,
  p(h) ~ sum_k a_k cos(2 pi k h / 24) + b_k sin(2 pi k h / 24).
* Hourly noise: e_{d,h} = u_{d,h} - p(h); its sd, lag-1 autocorrelation, and a
  Student-t fit (degrees of freedom nu measure tail weight; small nu = heavy tails).
* Hourly CV implied by per-minute burstiness (Azure): per-minute counts c_m with mean
  m and CV v; the Poisson part is 1/sqrt(m), the excess is x = sqrt(v^2 - 1/m). If the
  excess follows an AR(1) with lag-1 correlation rho, the CV of a 60-minute mean is
  about x * sqrt((1 + rho) / (1 - rho) / 60) (the large-n variance of an AR(1) mean).
  The same formula, applied to the per-minute mean of log token lengths (after removing
  the sampling variance s^2/n), gives the hour-to-hour wobble of the length mix.
* Lognormal token lengths fitted on the median and p99: mu = ln p50,
  sigma = (ln p99 - ln p50) / z_0.99 with z_0.99 = 2.3263.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from planner.errors import InputError

# The repository's data folder; the source paths below are relative to it. The public tables
# are vendored in sources/, the request traces (also ingest samples) live once, in samples/.
DATA_DIR = Path(__file__).resolve().parents[1]
SERVEGEN_FILE = Path("sources/servegen_aggregate/rate_rps_10min_m-large_m-mid.csv")
AZURE_FILES = {
    "conv": Path("samples/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"),
    "code": Path("samples/azure_llm_2023/AzureLLMInferenceTrace_code.csv"),
}
MOONCAKE_FILE = Path("samples/mooncake/conversation_trace_head200.jsonl")
MISSING_SOURCE_FIX = (
    "restore it from the repository (git checkout -- data/), or point --data-dir at a folder "
    "laid out like data/ (sources/servegen_aggregate/, samples/azure_llm_2023/, samples/mooncake/)"
)
Z99 = float(stats.norm.ppf(0.99))
HARMONICS = 3


def sig(value: float, digits: int = 4) -> float:
    """Round to ``digits`` significant digits (stable JSON, honest precision)."""
    value = float(value)
    if value == 0.0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - int(math.floor(math.log10(abs(value)))))


def _require(path: Path, columns: list[str]) -> pd.DataFrame:
    if not path.exists():
        raise InputError("source trace not found", where=path, fix=MISSING_SOURCE_FIX)
    frame = pd.read_csv(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"missing columns {missing}", where=path, fix="use the published file unchanged")
    return frame


def harmonic_design(hours: np.ndarray, harmonics: int = HARMONICS) -> np.ndarray:
    """Columns cos(2 pi k h/24), sin(2 pi k h/24) for k = 1..K (no intercept)."""
    cols = []
    for k in range(1, harmonics + 1):
        angle = 2.0 * np.pi * k * np.asarray(hours, dtype=float) / 24.0
        cols += [np.cos(angle), np.sin(angle)]
    return np.column_stack(cols)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start index, length) of each run of True."""
    runs, i = [], 0
    while i < len(mask):
        if mask[i]:
            j = i
            while j < len(mask) and mask[j]:
                j += 1
            runs.append((i, j - i))
            i = j
        else:
            i += 1
    return runs


def shape_figures(rate: pd.Series) -> dict[str, Any]:
    """Daily-cycle and noise figures of an hourly rate series.

    ``rate`` is indexed by whole local hours counted from 00:00 of day 0 (positive rates
    only; missing hours simply absent). Used on ServeGen and on the demo history alike,
    so the two are measured the same way.
    """
    hour = rate.index.to_numpy()
    day, hod = hour // 24, hour % 24
    log_rate = np.log(rate.to_numpy(dtype=float))
    resid = log_rate - pd.Series(log_rate).groupby(day).transform("mean").to_numpy()
    profile = pd.Series(resid).groupby(hod).mean()
    noise = pd.Series(resid - profile.reindex(hod).to_numpy())
    design = harmonic_design(profile.index.to_numpy())
    coef, *_ = np.linalg.lstsq(design, profile.to_numpy(), rcond=None)
    r2 = 1.0 - np.sum((profile.to_numpy() - design @ coef) ** 2) / np.sum((profile - profile.mean()) ** 2)
    fine = np.arange(0.0, 24.0, 0.01)
    curve = harmonic_design(fine) @ coef
    by_hod = rate.groupby(hod).mean()
    steps = np.diff(pd.Series(log_rate).groupby(day).mean().to_numpy())
    per_day = rate.groupby(day).agg(["max", "min"])
    return {
        "hour_of_day_mean_rate": {
            "peak_to_trough": sig(by_hod.max() / by_hod.min()),
            "peak_hour_local": int(by_hod.idxmax()),
            "trough_hour_local": int(by_hod.idxmin()),
        },
        "log_profile_fit": {
            "harmonics": HARMONICS,
            "coef_cos_sin": [sig(c, 5) for c in coef],
            "r2": sig(r2, 3),
            "peak_to_trough": sig(math.exp(curve.max() - curve.min())),
            "peak_hour_local": sig(fine[curve.argmax()], 3),
            "trough_hour_local": sig(fine[curve.argmin()], 3),
        },
        "hourly_noise_log": {
            "sd": sig(noise.std(ddof=1)),
            "lag1_autocorr": sig(noise.autocorr(1)),
            "excess_kurtosis": sig(stats.kurtosis(noise)),
        },
        "daily_log_level": {
            "day_over_day_change_sd": sig(steps.std(ddof=1)),
            "day_over_day_change_max_abs": sig(np.abs(steps).max()),
        },
        "median_within_day_hourly_max_over_min": sig((per_day["max"] / per_day["min"]).median()),
        "_noise": noise,
        "_daily": pd.Series(log_rate).groupby(day).mean(),
    }


def measure_servegen(path: Path) -> dict[str, Any]:
    """Daily cycle, hourly noise, level shifts, drift and gaps of the two ServeGen models."""
    frame = _require(path, ["window_start_s", "m-large", "m-mid"])
    frame["hour"] = frame["window_start_s"] // 3600
    out: dict[str, Any] = {"file": str(SERVEGEN_FILE), "windows_10min": int(len(frame))}
    for column in ("m-large", "m-mid"):
        rates = frame[column].to_numpy()
        kept = frame[rates > 0]
        hourly = kept.groupby("hour").agg(rate=(column, "mean"), n=(column, "size"))
        figures = shape_figures(hourly.loc[hourly["n"] == 6, "rate"])  # whole hours only
        noise, daily = figures.pop("_noise"), figures.pop("_daily")
        t_df, _, t_scale = stats.t.fit(noise.to_numpy())
        figures["hourly_noise_log"] |= {"student_t_df": sig(t_df, 3), "student_t_scale": sig(t_scale)}
        slope = np.polyfit(daily.index.to_numpy(), daily.to_numpy(), 1)[0]
        figures["daily_log_level"]["drift_per_day"] = sig(slope)
        figures["zero_windows"] = int((rates == 0).sum())
        figures["zero_runs_minutes"] = [int(length * 10) for _, length in _runs(rates == 0)]
        out[column] = figures
    return out


def measure_history(frame: pd.DataFrame, utc_offset_hours: dict[str, int]) -> dict[str, Any]:
    """The same shape figures, measured on a demand history (to compare with the sources).

    Daily-cycle and noise figures for every class of each region's llama-3.1-8b series (in
    local hours), weekend over weekday mean per class, per-series peak hourly requests,
    and request-weighted mean token lengths per class.
    """
    hours = pd.to_datetime(frame["ts"]).astype("datetime64[s, UTC]")
    epoch_hour = (hours - hours.min()).dt.total_seconds().to_numpy() // 3600
    local_hour = epoch_hour + frame["region"].map(utc_offset_hours).to_numpy()
    local_hour = (local_hour - local_hour.min() // 24 * 24).astype(np.int64)
    weekday = (hours + pd.to_timedelta(frame["region"].map(utc_offset_hours), unit="h")).dt.day_of_week
    out: dict[str, Any] = {"daily_cycle_llama_3_1_8b": {}, "weekend_over_weekday": {}, "mean_tokens": {}}
    for (region, model, traffic_class), idx in frame.groupby(["region", "model", "traffic_class"]).groups.items():
        if model != "llama-3.1-8b":
            continue
        rows = frame.loc[idx]
        busy = rows["requests"].to_numpy() > 0
        rate = pd.Series(rows["requests"].to_numpy()[busy], index=local_hour[idx][busy])
        figures = shape_figures(rate)
        figures.pop("_noise"), figures.pop("_daily")
        out["daily_cycle_llama_3_1_8b"][f"{region}/{traffic_class}"] = figures
    for traffic_class, rows in frame.groupby("traffic_class"):
        weekend = weekday.loc[rows.index] >= 5
        out["weekend_over_weekday"][traffic_class] = sig(
            rows.loc[weekend, "requests"].mean() / rows.loc[~weekend, "requests"].mean(), 3
        )
        n = rows["requests"].sum()
        out["mean_tokens"][traffic_class] = {
            "prompt": sig(rows["prompt_tokens_sum"].sum() / n), "output": sig(rows["output_tokens_sum"].sum() / n)
        }
    peaks = frame.groupby(["region", "model", "traffic_class"])["requests"].max()
    out["peak_requests_per_hour"] = {"/".join(k): int(v) for k, v in peaks.items()}
    return out


def _minute_counts(times: pd.Series) -> pd.Series:
    minutes = times.dt.floor("min")
    counts = minutes.value_counts().sort_index()
    grid = pd.date_range(counts.index.min(), counts.index.max(), freq="min")
    return counts.reindex(grid, fill_value=0).iloc[1:-1]  # drop the partial first/last minute


def _hourly_from_minutes(excess: float, rho: float) -> float:
    return excess * math.sqrt(max((1.0 + rho) / (1.0 - rho), 0.0) / 60.0)


def _length_stats(values: np.ndarray) -> dict[str, float]:
    p50, p99 = np.percentile(values, [50, 99])
    return {
        "mean": sig(values.mean()),
        "p50": sig(p50),
        "p99": sig(p99),
        "min": int(values.min()),
        "max": int(values.max()),
        "lognormal_sigma_from_p50_p99": sig(math.log(p99 / p50) / Z99),
    }


def measure_azure(path: Path, name: str) -> dict[str, Any]:
    """Per-minute burstiness, implied hourly CV, token lengths and length-mix wobble."""
    frame = _require(path, ["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    times = pd.to_datetime(frame["TIMESTAMP"])
    counts = _minute_counts(times)
    mean = float(counts.mean())
    cv = float(counts.std(ddof=1) / mean)
    excess = math.sqrt(max(cv**2 - 1.0 / mean, 0.0))
    rho = float(counts.autocorr(1))
    minute = times.dt.floor("min")
    wobble = {}
    for column, key in (("ContextTokens", "prompt"), ("GeneratedTokens", "output")):
        logs = np.log(frame[column].astype(float))
        per_min = logs.groupby(minute).agg(["mean", "size", "var"])
        per_min = per_min[per_min["size"] >= 20]
        sampling = float((per_min["var"] / per_min["size"]).mean())
        ex = math.sqrt(max(float(per_min["mean"].var()) - sampling, 0.0))
        wobble[key] = sig(_hourly_from_minutes(ex, float(per_min["mean"].autocorr(1))), 3)
    prompt = frame["ContextTokens"].to_numpy()
    output = frame["GeneratedTokens"].to_numpy()
    return {
        "file": str(AZURE_FILES[name]),
        "requests": int(len(frame)),
        "minutes": int(len(counts)),
        "per_minute_count": {
            "mean": sig(mean),
            "min": int(counts.min()),
            "max": int(counts.max()),
            "cv": sig(cv),
            "poisson_cv": sig(1.0 / math.sqrt(mean)),
            "excess_cv": sig(excess),
            "lag1_autocorr": sig(rho),
        },
        "implied_hourly_cv": sig(_hourly_from_minutes(excess, rho), 3),
        "implied_hourly_length_mix_sd_log": wobble,
        "prompt_tokens": _length_stats(prompt),
        "output_tokens": _length_stats(output),
        "log_prompt_output_corr": sig(np.corrcoef(np.log(prompt), np.log(output))[0, 1], 3),
    }


def measure_mooncake(path: Path) -> dict[str, Any]:
    """Token lengths of the 200-request Mooncake sample (long prompts, long outputs)."""
    if not path.exists():
        raise InputError("source trace not found", where=path, fix=MISSING_SOURCE_FIX)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {
        "file": str(MOONCAKE_FILE),
        "requests": len(rows),
        "prompt_tokens": _length_stats(np.array([r["input_length"] for r in rows])),
        "output_tokens": _length_stats(np.array([r["output_length"] for r in rows])),
    }


def measure_all(data_dir: Path = DATA_DIR) -> dict[str, Any]:
    """Every figure the demo history is shaped by, keyed by source; ``data_dir`` is laid out like ``data/``."""
    data_dir = Path(data_dir)
    return {
        "servegen": measure_servegen(data_dir / SERVEGEN_FILE),
        "azure_conv": measure_azure(data_dir / AZURE_FILES["conv"], "conv"),
        "azure_code": measure_azure(data_dir / AZURE_FILES["code"], "code"),
        "mooncake_sample": measure_mooncake(data_dir / MOONCAKE_FILE),
    }

"""Build the bundled demo demand history: SYNTHETIC hourly demand shaped by real traces.

Writes ``data/history/demo_history.parquet`` (the demand-history contract of
``planner ingest``, plus ``synthetic = true`` on every row) and
``data/history/demo_history_meta.json`` (seed, parameters, events, outages, and the
real figures they came from). Run from the repository root:

    .venv/bin/python data/build/make_demo_history.py [--data-dir data] [--out-dir data/history]

The real traces it measures are read from the repository (``data/sources/`` and
``data/samples/``); ``--data-dir`` points at another folder laid out like ``data/``.

Model, per series s = (region r, model m, class c) and UTC hour t, with local time
l = t + offset_r (fixed offsets; daylight saving is ignored):

    log lambda_s(t) = log B_s                        base: median req/h on a weekday at START
                    + log(1 + g_m) * days(t) / 30.4375          growth per month
                    + A_c * P(hour(l) + shift_c)                daily cycle
                    + log W_c   if weekday(l) is Sat/Sun        weekly cycle
                    + k_c * log H_r(date(l))                     holidays (k = 1, batch 1/2)
                    + sum log L(t)                                launches
                    + sum log E(t)                                big-client episodes
                    + eps_s(t)
    eps_s(t) = phi eps_s(t-1) + sigma_c sqrt(1 - phi^2) z_t,  z_t = t_nu / sqrt(nu/(nu-2)), |z| <= 6
    requests_s(t) ~ Poisson(lambda_s(t) * partial-outage factor); zero-request outages set 0

P is the 3-harmonic fit of ServeGen m-large's hour-of-day log profile (zero mean over a
day). A launch is L(t) = S^min(1, dt/ramp) * (1 + (K - 1) 2^(-dt/half_life)) for
dt = t - start >= 0. Token columns come from ``demo_history_tokens`` (truncated
lognormal lengths per class); events from ``demo_history_calendar``.

Randomness: one SeedSequence(SEED); one spawned child per series, in series order; each
child spawns three streams (episodes, counts, tokens). No global RNG.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from demo_history_calendar import (  # noqa: E402
    CLASSES, EPISODE_DAYS_BETWEEN, EPISODE_HOURS, EPISODE_LOG_SIZE, HOLIDAYS, LAUNCHES,
    MODELS, UTC_OFFSET_HOURS, Episode, draw_episodes, events_record, iso, outage_mask,
    parse_utc, series_keys,
)  # fmt: skip
from demo_history_tokens import LengthLaw, hour_token_stats  # noqa: E402

SEED = 20251001
START = "2025-10-01T00:00:00Z"
END = "2026-11-01T00:00:00Z"  # exclusive
COLUMNS = [
    "ts", "region", "model", "traffic_class", "requests",
    "prompt_tokens_sum", "output_tokens_sum",
    "prompt_tokens_p50", "prompt_tokens_p99", "output_tokens_p50", "output_tokens_p99",
    "synthetic",
]  # fmt: skip

# --- levels and trend (chosen: the demo's scale, not measured) ---
BASE_REQUESTS_PER_HOUR = 30_000.0
REGION_WEIGHT = {"us-east": 1.0, "us-west": 0.6, "eu-west": 0.75, "ap-northeast": 0.45}
MODEL_WEIGHT = {"llama-3.1-8b": 1.0, "llama-3.1-70b": 0.3}
CLASS_WEIGHT = {"interactive": 1.0, "standard": 0.55, "batch": 0.3, "long-context": 0.12}
MONTHLY_GROWTH = {"llama-3.1-8b": 0.055, "llama-3.1-70b": 0.03}
DAYS_PER_MONTH = 30.4375

# --- daily cycle: ServeGen m-large hour-of-day log profile, 3 harmonics (measured) ---
# coefficients of cos(2 pi k h/24), sin(2 pi k h/24), k = 1..3; peak 19.2 h, peak/trough 1.436
DIURNAL_COEF = (0.0050154, -0.13893, 0.048866, -0.014216, -0.021649, 0.033073)
# (amplitude A_c, shift_c hours): interactive more peaked; standard (business, code-like)
# 4 h earlier; batch in anti-phase at 0.6 amplitude (jobs scheduled off-peak, overnight)
# long-context (documents, RAG, agents with long histories) follows standard's business hours
DIURNAL_CLASS = {"interactive": (1.3, 0.0), "standard": (1.0, 4.0), "batch": (-0.6, 0.0), "long-context": (1.0, 4.0)}
DIURNAL_PEAK_LOCAL_HOUR = {"interactive": 19.2, "standard": 15.2, "batch": 6.25, "long-context": 15.2}
WEEKEND_FACTOR = {"interactive": 0.80, "standard": 0.72, "batch": 0.95,  # chosen; ServeGen weekday unknown
                  "long-context": 0.72}
HOLIDAY_EXPONENT = {"interactive": 1.0, "standard": 1.0, "batch": 0.5, "long-context": 1.0}

# --- hourly noise (measured) ---
NOISE_PHI = 0.6935  # ServeGen m-large hourly log-noise lag-1 autocorrelation
NOISE_T_DF = 3.8  # ServeGen m-mid hourly log-noise Student-t degrees of freedom
NOISE_CLIP = 6.0
NOISE_SIGMA = {  # marginal sd of eps on the log scale
    "interactive": 0.107,  # hourly CV implied by Azure conv per-minute burstiness
    "standard": 0.159,  # hourly CV implied by Azure code per-minute burstiness
    "batch": 0.2423,  # ServeGen m-large hourly log-noise sd (lumpy big clients)
    "long-context": 0.159,  # as standard: API traffic
}

# --- token lengths per class: (p50, p99, hour-to-hour wobble sd of log length) (measured) ---
TOKEN_LAWS = {
    "interactive": {"prompt": (1020.0, 4142.0, 0.0562), "output": (129.0, 601.0, 0.0942)},  # Azure conv
    "standard": {"prompt": (1469.0, 7436.0, 0.0237), "output": (13.0, 251.5, 0.0)},  # Azure code
    # summarisation-like: Azure code prompts, Mooncake sample outputs (conv output wobble)
    "batch": {"prompt": (1469.0, 7436.0, 0.0237), "output": (368.0, 904.0, 0.0942)},
    # long prompts, short answers: Mooncake sample prompts and outputs (conv wobble)
    "long-context": {"prompt": (8873.0, 87330.0, 0.0562), "output": (368.0, 904.0, 0.0942)},
}
Z99 = 2.3263478740408408
CONTEXT_TOKENS = {"llama-3.1-8b": 131072, "llama-3.1-70b": 131072}  # max_position_embeddings
OUTPUT_CAP_TOKENS = 1024  # reserved for output; prompts are capped at context - 1024
# the long-context service runs with a 32k context (--max-model-len 32768): its prompts stop at 31,744 tokens,
# as the demo scenario's max_prompt_tokens says
PROMPT_CAP_TOKENS = {"long-context": 32768 - OUTPUT_CAP_TOKENS}


def diurnal_log(local_hour: np.ndarray, traffic_class: str) -> np.ndarray:
    """A_c * P(h + shift_c), P the 3-harmonic ServeGen profile (zero mean over a day)."""
    amplitude, shift = DIURNAL_CLASS[traffic_class]
    h = 2.0 * np.pi * (np.asarray(local_hour, dtype=float) + shift) / 24.0
    c = DIURNAL_COEF
    return amplitude * sum(c[2 * k] * np.cos((k + 1) * h) + c[2 * k + 1] * np.sin((k + 1) * h) for k in range(3))


def base_requests(region: str, model: str, traffic_class: str) -> float:
    return BASE_REQUESTS_PER_HOUR * REGION_WEIGHT[region] * MODEL_WEIGHT[model] * CLASS_WEIGHT[traffic_class]


def calendar_log(hours: np.ndarray, region: str, model: str, traffic_class: str) -> np.ndarray:
    """Deterministic part of log lambda: base, growth, daily, weekly, holidays, launches."""
    local = hours + np.timedelta64(UTC_OFFSET_HOURS[region], "h")
    local_day = local.astype("datetime64[D]")
    weekday = (local_day.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    days = (hours - hours[0]).astype(np.int64) / 24.0
    out = np.full(hours.shape, np.log(base_requests(region, model, traffic_class)))
    out += np.log1p(MONTHLY_GROWTH[model]) * days / DAYS_PER_MONTH
    out += diurnal_log(local.astype(np.int64) % 24, traffic_class)
    out += np.where(weekday >= 5, np.log(WEEKEND_FACTOR[traffic_class]), 0.0)
    for holiday in HOLIDAYS:
        if region in holiday.regions:
            hit = local_day == np.datetime64(holiday.date_local)
            out += np.where(hit, HOLIDAY_EXPONENT[traffic_class] * np.log(holiday.factor), 0.0)
    for launch in LAUNCHES:
        if region in launch.regions and model in launch.models and traffic_class in launch.classes:
            dt = (hours - parse_utc(launch.start)).astype(np.int64).astype(float)
            ramp = np.clip(dt / launch.ramp_hours, 0.0, 1.0) if launch.ramp_hours > 0 else (dt >= 0) * 1.0
            spike = 1.0 + (launch.spike - 1.0) * np.exp2(-np.maximum(dt, 0.0) / launch.half_life_hours)
            out += np.where(dt >= 0, ramp * np.log(launch.step) + np.log(spike), 0.0)
    return out


def log_noise(n: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """AR(1) on the log scale with standardised, clipped Student-t innovations."""
    z = rng.standard_t(NOISE_T_DF, size=n) / np.sqrt(NOISE_T_DF / (NOISE_T_DF - 2.0))
    z = np.clip(z, -NOISE_CLIP, NOISE_CLIP) * sigma * np.sqrt(1.0 - NOISE_PHI**2)
    eps = np.empty(n)
    eps[0] = z[0] / np.sqrt(1.0 - NOISE_PHI**2)  # start in the stationary law
    for i in range(1, n):
        eps[i] = NOISE_PHI * eps[i - 1] + z[i]
    return eps


def token_law(key: tuple[str, str, str], kind: str, wobble: np.ndarray) -> LengthLaw:
    """Lognormal through the class's (p50, p99), cut at what fits the model's context."""
    p50, p99, _ = TOKEN_LAWS[key[2]][kind]
    cap = OUTPUT_CAP_TOKENS if kind == "output" else min(CONTEXT_TOKENS[key[1]] - OUTPUT_CAP_TOKENS,
                                                         PROMPT_CAP_TOKENS.get(key[2], CONTEXT_TOKENS[key[1]]))
    return LengthLaw(mu=np.log(p50) + wobble, sigma=float(np.log(p99 / p50) / Z99), lo=1.0, hi=float(cap))


def one_series(
    hours: np.ndarray, key: tuple[str, str, str], seq: np.random.SeedSequence
) -> tuple[pd.DataFrame, list[Episode]]:
    """(frame, episodes) for one series; rows of missing-row outages are left out."""
    rng_events, rng_counts, rng_tokens = (np.random.default_rng(s) for s in seq.spawn(3))
    region, model, traffic_class = key
    episodes = draw_episodes(hours, key, rng_events)
    log_lam = calendar_log(hours, region, model, traffic_class)
    for e in episodes:
        log_lam += np.where((hours >= parse_utc(e.start)) & (hours < parse_utc(e.end)), np.log(e.factor), 0.0)
    log_lam += log_noise(len(hours), NOISE_SIGMA[traffic_class], rng_counts)
    partial, factor = outage_mask(hours, key, "partial")
    requests = rng_counts.poisson(np.exp(log_lam) * np.where(partial, factor, 1.0)).astype(np.int64)
    requests[outage_mask(hours, key, "zero_requests")[0]] = 0

    columns: dict[str, object] = {"ts": iso(hours), "region": region, "model": model,
                                  "traffic_class": traffic_class, "requests": requests}  # fmt: skip
    for kind in ("prompt", "output"):
        wobble = rng_tokens.standard_normal(len(hours)) * TOKEN_LAWS[traffic_class][kind][2]
        total, p50, p99 = hour_token_stats(requests, token_law(key, kind, wobble), rng_tokens)
        columns |= {f"{kind}_tokens_sum": total, f"{kind}_tokens_p50": p50, f"{kind}_tokens_p99": p99}
    columns["synthetic"] = np.ones(len(hours), dtype=bool)
    keep = ~outage_mask(hours, key, "missing_rows")[0]
    return pd.DataFrame(columns)[COLUMNS][keep], episodes


@dataclass(frozen=True)
class DemoHistory:
    frame: pd.DataFrame
    episodes: tuple[Episode, ...]


def generate_with_events(seed: int = SEED, start: str = START, end: str = END) -> DemoHistory:
    """The demo history over [start, end) and the big-client episodes drawn for it."""
    hours = np.arange(parse_utc(start), parse_utc(end), np.timedelta64(1, "h"))
    keys = series_keys()
    parts, episodes = [], []
    for key, seq in zip(keys, np.random.SeedSequence(seed).spawn(len(keys)), strict=True):
        part, drawn = one_series(hours, key, seq)
        parts.append(part)
        episodes += drawn
    frame = pd.concat(parts, ignore_index=True)
    for column in ("ts", "region", "model", "traffic_class"):
        frame[column] = frame[column].astype(str)
    return DemoHistory(frame=frame, episodes=tuple(episodes))


def generate(seed: int = SEED, start: str = START, end: str = END) -> pd.DataFrame:
    """The demo history frame: one row per (series, UTC hour), series-major, hours ascending."""
    return generate_with_events(seed, start, end).frame


def parameters() -> dict:
    """Every constant of the model, for the meta JSON."""
    return {
        "base_requests_per_hour": BASE_REQUESTS_PER_HOUR, "region_weight": REGION_WEIGHT,
        "model_weight": MODEL_WEIGHT, "class_weight": CLASS_WEIGHT, "monthly_growth": MONTHLY_GROWTH,
        "days_per_month": DAYS_PER_MONTH, "utc_offset_hours": UTC_OFFSET_HOURS,
        "models": list(MODELS), "traffic_classes": list(CLASSES),
        "diurnal_coef_cos_sin_k1_k3": list(DIURNAL_COEF),
        "diurnal_class_amplitude_shift_hours": {c: list(v) for c, v in DIURNAL_CLASS.items()},
        "diurnal_peak_local_hour": DIURNAL_PEAK_LOCAL_HOUR, "weekend_factor": WEEKEND_FACTOR,
        "holiday_exponent": HOLIDAY_EXPONENT,
        "noise": {"phi": NOISE_PHI, "student_t_df": NOISE_T_DF, "clip_sd": NOISE_CLIP, "sigma_log": NOISE_SIGMA},
        "episodes": {"mean_days_between": EPISODE_DAYS_BETWEEN, "hours_min_max": list(EPISODE_HOURS),
                     "abs_log_size_min_max": list(EPISODE_LOG_SIZE)},
        "token_laws_p50_p99_wobble_sd_log": {c: {k: list(v) for k, v in d.items()} for c, d in TOKEN_LAWS.items()},
        "context_tokens": CONTEXT_TOKENS, "output_cap_tokens": OUTPUT_CAP_TOKENS,
        "prompt_cap_tokens": PROMPT_CAP_TOKENS,
    }  # fmt: skip


def provenance(measured: dict) -> list[tuple[str, float, float]]:
    """(constant, value used, value measured) for every constant taken from a trace."""
    sg, conv, code = measured["servegen"]["m-large"], measured["azure_conv"], measured["azure_code"]
    moon = measured["mooncake_sample"]
    fit = sg["log_profile_fit"]
    pairs = [(f"DIURNAL_COEF[{i}]", DIURNAL_COEF[i], fit["coef_cos_sin"][i]) for i in range(6)]
    pairs += [
        ("DIURNAL_PEAK_LOCAL_HOUR[interactive]", DIURNAL_PEAK_LOCAL_HOUR["interactive"], fit["peak_hour_local"]),
        ("DIURNAL_PEAK_LOCAL_HOUR[standard] + 4", DIURNAL_PEAK_LOCAL_HOUR["standard"] + 4, fit["peak_hour_local"]),
        ("DIURNAL_PEAK_LOCAL_HOUR[batch]", DIURNAL_PEAK_LOCAL_HOUR["batch"], fit["trough_hour_local"]),
        ("NOISE_PHI", NOISE_PHI, sg["hourly_noise_log"]["lag1_autocorr"]),
        ("NOISE_T_DF", NOISE_T_DF, measured["servegen"]["m-mid"]["hourly_noise_log"]["student_t_df"]),
        ("NOISE_SIGMA[interactive]", NOISE_SIGMA["interactive"], conv["implied_hourly_cv"]),
        ("NOISE_SIGMA[standard]", NOISE_SIGMA["standard"], code["implied_hourly_cv"]),
        ("NOISE_SIGMA[batch]", NOISE_SIGMA["batch"], sg["hourly_noise_log"]["sd"]),
    ]
    sources = {"interactive": (conv, conv), "standard": (code, code), "batch": (code, moon),
               "long-context": (moon, moon)}
    for traffic_class, (prompt_src, output_src) in sources.items():
        for kind, src in (("prompt", prompt_src), ("output", output_src)):
            p50, p99, wobble = TOKEN_LAWS[traffic_class][kind]
            pairs += [(f"TOKEN_LAWS[{traffic_class}][{kind}].p50", p50, src[f"{kind}_tokens"]["p50"]),
                      (f"TOKEN_LAWS[{traffic_class}][{kind}].p99", p99, src[f"{kind}_tokens"]["p99"])]  # fmt: skip
            wobble_src = conv if src is moon else src
            pairs.append((f"TOKEN_LAWS[{traffic_class}][{kind}].wobble", wobble,
                          wobble_src["implied_hourly_length_mix_sd_log"][kind]))  # fmt: skip
    return pairs


def provenance_mismatches(measured: dict, rel_tol: float = 2e-3, abs_tol: float = 2e-4) -> list[str]:
    """Constants that no longer match the figure measured from their source."""
    return [
        f"{name}: used {used}, measured {real}"
        for name, used, real in provenance(measured)
        if abs(used - real) > max(abs_tol, rel_tol * abs(real))
    ]


def main(argv: list[str] | None = None) -> int:
    from demo_history_sources import DATA_DIR, measure_all, measure_history

    from planner.errors import InputError
    from planner.storage import file_sha256, write_json_atomic, write_table_atomic

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR,
                        help="folder laid out like data/ holding the measured traces (default: this repository's data/)")
    parser.add_argument("--out-dir", type=Path, default=HERE.parent / "history", help="output folder")
    args = parser.parse_args(argv)

    measured = measure_all(args.data_dir)
    stale = provenance_mismatches(measured)
    if stale:
        raise InputError("constants differ from the measured traces: " + "; ".join(stale),
                         where=args.data_dir, fix="update the constants in make_demo_history.py")  # fmt: skip
    history = generate_with_events(SEED, START, END)
    parquet = write_table_atomic(args.out_dir / "demo_history.parquet", history.frame)
    meta = {
        "synthetic": True,
        "description": "SYNTHETIC hourly demand history for the planner demo; shaped by real traces, "
        "not a record of real traffic.",
        "seed": SEED, "start": START, "end_exclusive": END, "rng": "numpy default_rng(SeedSequence(seed)), "
        "one spawned child per series in series order, each spawning (episodes, counts, tokens) streams",
        "series": [dict(zip(("region", "model", "traffic_class"), k, strict=True)) for k in series_keys()],
        "columns": COLUMNS, "rows": int(len(history.frame)), "sha256": file_sha256(parquet),
        "parameters": parameters(),
        "events": events_record(history.episodes),
        "measured_sources": measured,
        "provenance": [{"constant": n, "used": u, "measured": m} for n, u, m in provenance(measured)],
        "measured_on_output": measure_history(history.frame, UTC_OFFSET_HOURS),
    }  # fmt: skip
    write_json_atomic(args.out_dir / "demo_history_meta.json", meta)
    print(f"wrote {parquet} ({len(history.frame)} rows, sha256 {meta['sha256'][:12]}) and its meta JSON")
    return 0


if __name__ == "__main__":
    sys.exit(main())

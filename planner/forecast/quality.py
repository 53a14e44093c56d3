"""Data-quality pass for one demand series: parse, regularise, fill, and mask outages.

Real traffic is messy, and the forecaster must survive it *and say what it did*.
Every action below produces a finding (a small JSON-able dict) that ends up in the
forecast metadata; nothing is changed silently.

Rules, in the order they are applied to one (region, model, traffic_class) series:

1. **Timestamps** are parsed as UTC (the orchestrator parses the whole frame once;
   an unparsable ``ts`` is an input error naming the row).
2. **Duplicate timestamps** are an input error (exit 3) naming the series and the
   first duplicated timestamp: two rows for one hour cannot both be right, and
   summing or dropping them would hide an upstream bug.
3. **Irregular frequency.** A history is hourly. Timestamps that are not whole
   hours (10-minute rates, jitter) are *resampled*: summed into their hour bucket,
   with a warning finding. Summing is right for every measure we forecast
   (``requests``, ``prompt_tokens_sum``, ``output_tokens_sum`` are counts per
   interval). A history that is *coarser* than hourly (median spacing over one hour)
   cannot be turned into an hourly forecast and is an input error.
4. **Leading zeros** (a series that starts before its traffic did, e.g. a model
   launched mid-history) are trimmed and reported: they are not demand history.
5. **Missing hours** (absent rows, or NaN values) inside the span are filled and
   reported as runs ``[first, last]``. The model treats them as *missing
   observations* (the Kalman filter skips them, OLS leaves them out); the baselines
   and plots use an imputed value: the same hour one week earlier (then later,
   then one day earlier/later, then linear interpolation).
6. **Outages.** In a busy series a zero (or near-zero) hour is not demand: with an
   expected level of ``L >= 20`` per hour a Poisson count is zero with probability
   ``exp(-L) <= 2e-9``. The expected level of hour ``t`` is the median of the
   positive values at the same hour of day over the surrounding 15 days, so a
   business-hours-only class whose nights are always small is never flagged.
   An hour is an outage when ``L_t >= busy_min_level`` and
   ``x_t <= outage_fraction * L_t`` (default 2 %, which also catches hours where
   collection stopped partway, e.g. 2 requests where 2,000 were due). Outage hours
   are masked exactly like missing hours and reported. A zero run that reaches the
   end of the series is *not* masked (the series may really have stopped) but is
   reported, since it decides the forecast.
6b. **Partly collected hours.** An hour whose collection stopped for part of it (a log shipper
   down for 40 minutes: 40k requests where the neighbours have 100k) is far above the outage
   line and would be learned as demand. After the outage rule, an observed hour is *partial*
   when its expected level is ``>= busy_min_level`` and its value is below ``PARTIAL_FRACTION``
   (60 %) times each of three references: the hour before, the hour after, and the same hour
   one week earlier (the same hour one day earlier when that one was not observed). All three
   are needed: one low neighbour is a ramp (the evening decline, a launch), both low neighbours
   are a trough or a longer dip, and a low week-before is a weekly pattern (a weekly job that
   ends, a maintenance window). A reference that is missing or masked is no evidence, and an
   hour without all three references is not judged; so a run of partial hours, or the partial
   hour at the edge of an outage, is left as it is, and in the series' first week (a day's
   reference only) a weekly dip can be taken for a partial hour. A daily trough is never
   flagged: its neighbours are only somewhat higher (1-2 % on average in the demo history).
   ``--partial-hours mask`` (the default) masks them exactly like outage hours;
   ``--partial-hours keep`` keeps them as demand; both report them (``partial_hour``).
   Measured flags, hours (series), at fractions 0.5 / 0.55 / **0.6** / 0.65 / 0.7:
   ``data/history/demo_history.parquet`` (32 synthetic series, 304,000 hours): 1 (1) / 9 (6) /
   **26 (9)** / 73 (17) / 200 (24), all single-hour dips of its heavy-tailed noise, 24 of the 26
   in batch series; ServeGen (2 series, 14 days, hourly sums of the 10-minute rates): 0 / 0 /
   **0** / 1 / 2 (its collection gaps leave at most one 10-minute window of an hour, so the
   outage rule masks them); the Azure 2023 sample
   (2 series, hourly counts): 0 everywhere, since it spans one hour (18:15-19:14), two buckets
   per series with no day-before and no expected level. Injected partial hours (``r`` times the
   hour's own value, 40 per demo series): found at 0.6 in 99 % for ``r = 0.3``, 91 % for 0.4,
   67 % for 0.5 (at 0.55: 98 / 86 / 44 %); an hour at 30-50 % of all three references is always
   found. Above 0.6 the false flags climb fast (73, then 200 on the demo); below it hours that
   lost half their traffic are mostly missed.
7. **Spikes.** An hour above ``SPIKE_FACTOR`` (50) times the median of the series' positive
   hours is possible (a launch, a retry storm, a load test) but worth a look before it is
   planned for: it is kept as demand and reported, with the largest value and the median.
   (A value no fleet could serve, above the ceilings of :mod:`planner.ceilings`, never gets
   here: the history check refuses it.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planner.errors import InputError

HOUR_NS = 3_600_000_000_000
BUSY_MIN_LEVEL = 20.0
OUTAGE_FRACTION = 0.02
PARTIAL_FRACTION = 0.6
"""An hour below this fraction of the hour before, the hour after and the same hour a week (else a day)
earlier is partly collected (rule 6b; the measurements that chose it are in the module docstring)."""
PARTIAL_HOURS_CHOICES = ("mask", "keep")
"""What ``--partial-hours`` does with a partly collected hour: mask it like an outage, or keep it as demand."""
MAX_RANGES_REPORTED = 20
SPIKE_FACTOR = 50.0
"""An hour above this many times the series' median positive hour is reported as a spike: well above
daily and weekly peaks, low enough to catch a mis-scaled or duplicated load (figures in
``docs/decisions/0004-forecast-harmonic-regression-with-arma-errors.md``)."""


@dataclass
class CleanSeries:
    """One hourly series on a contiguous grid, ready for the model and the baselines.

    ``values`` holds the observations with NaN where an hour was missing or masked
    (what the model sees); ``filled`` holds the imputed series without NaN (what the
    seasonal-naive baselines and the plots see); ``observed`` is True where
    ``values`` is a real, unmasked observation (only those hours are scored).
    """

    start: pd.Timestamp
    values: np.ndarray
    filled: np.ndarray
    observed: np.ndarray
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def n_hours(self) -> int:
        return int(self.values.size)

    @property
    def end(self) -> pd.Timestamp:
        return self.start + pd.Timedelta(hours=self.n_hours - 1)


def format_ts(ts: pd.Timestamp) -> str:
    """ISO-8601 UTC with a ``Z`` suffix, the project's one timestamp spelling."""
    text: str = ts.strftime("%Y-%m-%dT%H:%M:%SZ")
    return text


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive index runs ``(first, last)`` where ``mask`` is True."""
    if not mask.any():
        return []
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _ranges(start: pd.Timestamp, runs: list[tuple[int, int]]) -> list[list[str]]:
    hour = pd.Timedelta(hours=1)
    return [[format_ts(start + a * hour), format_ts(start + b * hour)] for a, b in runs[:MAX_RANGES_REPORTED]]


def _finding(kind: str, series: str, action: str, start: pd.Timestamp | None = None,
             runs: list[tuple[int, int]] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind, "series": series, "action": action}
    if runs is not None and start is not None:
        out["hours"] = int(sum(b - a + 1 for a, b in runs))
        out["runs"] = len(runs)
        out["ranges"] = _ranges(start, runs)
        if len(runs) > MAX_RANGES_REPORTED:
            out["ranges_truncated"] = True
    out.update(extra)
    return out


def impute_seasonal(values: np.ndarray) -> np.ndarray:
    """Fill NaN from the same hour a week earlier/later, then a day, then linearly."""
    out = values.astype(float).copy()
    n = out.size
    for lag in (168, -168, 336, -336, 24, -24, 48, -48):
        gaps = np.isnan(out)
        if not gaps.any():
            return out
        src = np.arange(n) - lag
        ok = gaps & (src >= 0) & (src < n)
        idx = np.flatnonzero(ok)
        out[idx] = out[src[idx]]
    gaps = np.isnan(out)
    if gaps.any():
        good = np.flatnonzero(~gaps)
        if good.size == 0:
            return np.zeros(n)
        out[gaps] = np.interp(np.flatnonzero(gaps), good, out[good])
    return out


def expected_level(values: np.ndarray) -> np.ndarray:
    """Median of positive values at the same hour of day over a centred 15-day window."""
    n = values.size
    if n == 0:
        return np.full(0, np.nan)
    # One column per hour of day, one row per day (the last day padded with NaN, which the
    # median ignores): a single rolling pass over 24 columns instead of 24 passes.
    days = -(-n // 24)
    positive = np.full(days * 24, np.nan)
    positive[:n] = np.where(values > 0, values, np.nan)
    grid = pd.DataFrame(positive.reshape(days, 24))
    med = grid.rolling(15, center=True, min_periods=3).median().ffill().bfill()
    levels: np.ndarray = med.to_numpy().reshape(-1)[:n]
    return levels


def detect_outages(values: np.ndarray, *, busy_min_level: float = BUSY_MIN_LEVEL,
                   outage_fraction: float = OUTAGE_FRACTION,
                   level: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return (masked outage hours, trailing zero-run hours) as boolean arrays (``level``: ``expected_level``)."""
    level = expected_level(values) if level is None else level
    with np.errstate(invalid="ignore"):
        low = (values <= outage_fraction * level) & (level >= busy_min_level)
    low &= ~np.isnan(values)
    trailing = np.zeros_like(low)
    runs = _runs(low)
    last_observed = np.flatnonzero(~np.isnan(values))
    if runs and last_observed.size and runs[-1][1] >= last_observed[-1]:
        a, b = runs[-1]
        trailing[a : b + 1] = True
        low[a : b + 1] = False
    return low, trailing


def _shifted(values: np.ndarray, lag: int) -> np.ndarray:
    """``values[t - lag]`` at every ``t`` (NaN where that hour is outside the series)."""
    out = np.full(values.size, np.nan)
    if 0 < lag < values.size:
        out[lag:] = values[:-lag]
    elif 0 < -lag < values.size:
        out[:lag] = values[-lag:]
    return out


def partial_hours(values: np.ndarray, level: np.ndarray, *, fraction: float = PARTIAL_FRACTION,
                  busy_min_level: float = BUSY_MIN_LEVEL) -> np.ndarray:
    """Partly collected hours (rule 6b) as a boolean array.

    ``values`` has NaN where an hour is missing or masked: such an hour is no evidence, and an
    hour lacking any of its three references is not judged. ``level``: ``expected_level``.
    """
    week, day = _shifted(values, 168), _shifted(values, 24)
    references = np.vstack([_shifted(values, 1), _shifted(values, -1), np.where(np.isnan(week), day, week)])
    judged = np.isfinite(values) & np.isfinite(references).all(axis=0) & (np.nan_to_num(level) >= busy_min_level)
    with np.errstate(invalid="ignore"):
        low: np.ndarray = judged & (values < fraction * references.min(axis=0))
    return low


def spike_hours(values: np.ndarray, factor: float = SPIKE_FACTOR) -> np.ndarray:
    """Hours above ``factor`` times the median of the positive observed hours (none if there are none)."""
    positive = values[np.isfinite(values) & (values > 0)]
    if positive.size == 0:
        return np.zeros(values.size, dtype=bool)
    with np.errstate(invalid="ignore"):
        spikes: np.ndarray = np.nan_to_num(values, nan=0.0) > factor * float(np.median(positive))
    return spikes


def regularise(key: str, ts_ns: np.ndarray,
               values: np.ndarray) -> tuple[pd.Timestamp, np.ndarray, list[dict[str, Any]]]:
    """Put one series on a contiguous hourly grid (NaN for absent hours).

    ``ts_ns`` are UTC nanoseconds, sorted ascending. Raises InputError on duplicate
    timestamps or a coarser-than-hourly history.
    """
    findings: list[dict[str, Any]] = []
    dup = np.flatnonzero(np.diff(ts_ns) == 0)
    if dup.size:
        first = format_ts(pd.Timestamp(int(ts_ns[dup[0]]), tz="UTC"))
        raise InputError(
            f"duplicate timestamp {first} in series {key} ({dup.size} duplicated row(s) in this series)",
            where=f"series {key}, ts {first}",
            fix="keep exactly one row per (region, model, traffic_class, ts); re-run `planner ingest` on the raw log",
        )
    off_hour = ts_ns % HOUR_NS != 0
    if ts_ns.size > 2:
        median_step = float(np.median(np.diff(ts_ns)))
        if median_step > HOUR_NS:
            raise InputError(
                f"series {key} is coarser than hourly (median spacing {median_step / HOUR_NS:.1f} h)",
                where=f"series {key}, column ts",
                fix="provide hourly (or finer) history; finer data is summed into hours",
            )
    if off_hour.any():
        buckets = ts_ns - ts_ns % HOUR_NS
        frame = pd.DataFrame({"b": buckets, "v": values})
        summed = frame.groupby("b", sort=True)["v"].sum(min_count=1)
        findings.append(_finding(
            "irregular_frequency", key,
            action="resampled: values summed into their UTC hour",
            rows=int(ts_ns.size), rows_off_the_hour=int(off_hour.sum()), hours_after=int(summed.size),
        ))
        ts_ns = summed.index.to_numpy(dtype=np.int64)
        values = summed.to_numpy(dtype=float)
    start = pd.Timestamp(int(ts_ns[0]), tz="UTC")
    n = int((ts_ns[-1] - ts_ns[0]) // HOUR_NS) + 1
    grid = np.full(n, np.nan)
    grid[((ts_ns - ts_ns[0]) // HOUR_NS).astype(np.int64)] = values
    return start, grid, findings


def check_partial_hours(value: str) -> str | None:
    """Why ``value`` cannot be a ``--partial-hours`` choice (None when it can)."""
    if value in PARTIAL_HOURS_CHOICES:
        return None
    return f"unknown choice '{value}': use {' or '.join(PARTIAL_HOURS_CHOICES)}"


def _partial_finding(key: str, start: pd.Timestamp, partial: np.ndarray, mode: str) -> dict[str, Any]:
    rule = (f"below {PARTIAL_FRACTION:.0%} of the hour before, the hour after and the same hour a week "
            f"(else a day) earlier, at an expected level >= {BUSY_MIN_LEVEL:g}/h")
    action = (f"masked: hours {rule} are taken as partly collected and not learned as demand" if mode == "mask"
              else f"kept as demand (--partial-hours keep): hours {rule} look partly collected; check the source")
    return _finding("partial_hour", key, start=start, runs=_runs(partial), action=action, partial_hours=mode,
                    fraction=PARTIAL_FRACTION)


def clean_series(key: str, ts_ns: np.ndarray, values: np.ndarray, partial_hours_mode: str = "mask") -> CleanSeries:
    """Run every rule of the module docstring on one series; see CleanSeries.

    ``partial_hours_mode``: ``"mask"`` masks a partly collected hour (rule 6b) like an outage,
    ``"keep"`` keeps it as demand; both report it.
    """
    problem = check_partial_hours(partial_hours_mode)
    if problem:
        raise ValueError(f"partial_hours_mode: {problem}")
    start, grid, findings = regularise(key, ts_ns, values.astype(float))
    nonzero = np.flatnonzero(np.nan_to_num(grid, nan=0.0) > 0)
    if nonzero.size == 0:
        findings.append(_finding("all_zero", key, action="no positive value; forecast is zero"))
        zeros = np.zeros_like(grid)
        return CleanSeries(start, zeros, zeros.copy(), np.ones(grid.size, dtype=bool), findings)
    if nonzero[0] > 0:
        cut = int(nonzero[0])
        findings.append(_finding("leading_zeros_trimmed", key, action="series starts at its first positive hour",
                                 start=start, runs=[(0, cut - 1)]))
        grid = grid[cut:]
        start = start + pd.Timedelta(hours=cut)
    missing = np.isnan(grid)
    if missing.any():
        findings.append(_finding("missing_hours", key, start=start, runs=_runs(missing),
                                 action="filled: treated as missing observations by the model, "
                                        "imputed from the same hour a week earlier for baselines"))
    level = expected_level(grid)
    outage, trailing = detect_outages(grid, level=level)
    if outage.any():
        findings.append(_finding("outage", key, start=start, runs=_runs(outage),
                                 action=f"masked: hours at or below {OUTAGE_FRACTION:.0%} of the expected level "
                                        f"(>= {BUSY_MIN_LEVEL:g}/h) are not learned as demand"))
    if trailing.any():
        findings.append(_finding("trailing_zero_run", key, start=start, runs=_runs(trailing),
                                 action="kept as demand: the series may have stopped; check the source"))
    values = np.where(outage, np.nan, grid)
    partial = partial_hours(values, level)
    if partial.any():
        findings.append(_partial_finding(key, start, partial, partial_hours_mode))
        if partial_hours_mode == "mask":
            values[partial] = np.nan
    spike = spike_hours(values)
    if spike.any():
        positive = values[np.isfinite(values) & (values > 0)]
        findings.append(_finding("spike", key, start=start, runs=_runs(spike),
                                 action=f"kept as demand: hours above {SPIKE_FACTOR:g} x the series' median hour; "
                                        "check the source before planning for them",
                                 max_value=float(np.nanmax(values[spike])), median=float(np.median(positive))))
    observed = ~np.isnan(values)
    filled = impute_seasonal(values)
    return CleanSeries(start, values, filled, observed, findings)

"""Per-series model choice by rolling-origin backtest, with intervals calibrated on its errors.

No one model wins on every series: the harmonic regression leads on long, regular
histories, a decomposition or exponential smoothing can lead on two weeks of real traffic,
and on a noisy series nothing beats the seasonal naive. So every series is backtested with
every candidate and forecast with the one that erred least.

Procedure for one series of ``n`` hours, forecast horizon ``H``:

1. Windows: as :func:`planner.forecast.backtest.window_plan` (windows tiling the last hours,
   each ``H`` long, or shorter whole days when the history is short, with at least
   ``min_history_hours`` of training before the first origin), but as many as it takes to
   score ``MIN_SCORED_HOURS`` hours, from 3 up to ``MAX_WINDOWS``, where the history has room.
2. At each origin every candidate is fitted to the hours before it and forecasts the
   window. Where a candidate cannot fit (too little history before an early origin, no
   convergence), the window is scored with the seasonal naive that would replace it in
   production, and the reason is kept; a candidate that fits at no origin is out. The
   seasonal naives (24 h and 168 h) are always candidates, so something always qualifies.
3. Winner: the first candidate in the list (the harmonic model) stays the choice unless
   another beats it clearly. A few windows of one series are a small, noisy sample, and the
   earliest windows have the least training, which favours the simplest models; a switch on
   noise costs more than it gains (measured on ServeGen: always taking the lowest backtest
   MASE made the out-of-sample error 15-40 % worse). "Clearly" is a one-sided paired t-test
   across windows (Diebold-Mariano on per-window MASE): with ``d_w = MASE_w(default) -
   MASE_w(challenger)`` over ``W`` windows,

       t = mean(d) / (sd(d) / sqrt(W)),   switch when  t > t_{1 - ALPHA}(W - 1)

   and among the challengers that pass, the lowest pooled MASE wins.

   The upper band is chosen the same way, level by level. Plans buy capacity on an upper
   quantile (``forecast_quantile``, q95 by default), and a model can lead on the median while
   its upper band loses (measured: scaled pinball loss at q99 of 0.439 for a chosen
   decomposition model against 0.036 for the 24 h naive; on ServeGen m-mid the harmonic model's
   q95 band lost to the 24 h naive's by a factor of 2 to 4 in every window while its median
   won out of sample). At every level above the median that the run writes, each candidate's
   band is scored as it would be deployed (calibrated as in step 4 on the other windows, held to
   the growth limit) by its scaled pinball loss per window; the median's model keeps that level
   unless a challenger beats it clearly by the same paired test on per-window pinball loss,
   and among those that do, the lowest pooled loss wins. The forecast then takes that level
   from that candidate (its own calibrated band, fitted on the whole history), never below the
   levels beneath it, and ``model_used`` names it.
4. Intervals: the winner's standardised errors over all windows calibrate its final band
   (:mod:`planner.forecast.calibration`), which past the window length keeps the width it had
   within it. The backtest's reported coverage of the
   calibrated band is cross-fitted: window ``i`` is scored with the calibration from the
   other windows, so the figure is not the calibration grading itself.
5. The winner is refitted on the whole history for the forecast.

When the history is too short for the windows, no choice is made: the first candidate
that fits gives the forecast with its own band, and the reason is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from planner.contracts import quantile_column
from planner.forecast import backtest as bt
from planner.forecast.baselines import SeasonalNaive
from planner.forecast.calibration import SPREAD_LEVELS, Calibration, standardised_errors
from planner.forecast.forecaster import FitFailure, Forecaster, SeriesForecast, SeriesHistory
from planner.forecast.growth import history_peak

NAIVE_CANDIDATES: tuple[tuple[str, Forecaster], ...] = (("naive24", SeasonalNaive(24)),
                                                        ("naive168", SeasonalNaive(168)))
FIT_ERRORS = (FitFailure, ValueError, np.linalg.LinAlgError, FloatingPointError)
MAX_WINDOWS = 6
MIN_SCORED_HOURS = 144
"""Short windows (a 24 h horizon) come six at a time, so that the choice and the calibration see six days."""
ALPHA = 0.05


@dataclass
class _WindowRun:
    """One candidate's forecast of one backtest window, on the window's observed hours."""

    origin: int
    model_used: str
    actual: np.ndarray
    point: np.ndarray
    quantiles: dict[float, np.ndarray]
    scale: float
    fallback: bool = False
    peak: float = 0.0

    def mase(self) -> float:
        return float(np.mean(np.abs(self.actual - self.point))) / self.scale


@dataclass
class _CandidateTrial:
    name: str
    forecaster: Forecaster
    runs: list[_WindowRun] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        """Why the candidate is out: it fitted at no origin."""
        if self.runs and len(self.failures) == len(self.runs):
            return "could not fit at any origin: " + "; ".join(self.failures)
        return None

    def mase(self) -> float:
        return float(np.mean(np.concatenate([np.abs(r.actual - r.point) / r.scale for r in self.runs])))


def selection_windows(n_hours: int, horizon: int, min_history_hours: int) -> tuple[int, list[int], str | None]:
    """The backtest's window length and origins (see step 1 of the module docstring)."""
    length, origins, skip = bt.window_plan(n_hours, horizon, min_history_hours)
    if skip:
        return length, origins, skip
    wanted = -(-MIN_SCORED_HOURS // length)
    room = (n_hours - min_history_hours) // length
    count = int(max(bt.N_WINDOWS, min(wanted, room, MAX_WINDOWS)))
    return length, [n_hours - (count - i) * length for i in range(count)], None


def clearly_better(default: _CandidateTrial, challenger: _CandidateTrial) -> bool:
    """The one-sided paired test of step 3: does ``challenger`` beat ``default`` beyond window-to-window noise?"""
    return clearly_lower(np.array([r.mase() for r in default.runs]), np.array([r.mase() for r in challenger.runs]))


def clearly_lower(default: np.ndarray, challenger: np.ndarray) -> bool:
    """Step 3's paired test on per-window losses: is ``challenger``'s lower beyond window-to-window noise?"""
    d = default - challenger
    if d.size < 2 or d.mean() <= 0:
        return False
    spread = float(d.std(ddof=1))
    if spread == 0.0:
        return True
    return bool(d.mean() / (spread / np.sqrt(d.size)) > student_t.ppf(1.0 - ALPHA, d.size - 1))


@dataclass(frozen=True, eq=False)
class SelectingForecaster:
    """Backtests its candidates on each series and forecasts with the winner (module docstring).

    ``horizon_hours`` sets the backtest windows' length (the forecast's own horizon);
    ``min_history_hours`` the training every window must have.
    """

    candidates: tuple[tuple[str, Forecaster], ...]
    horizon_hours: int = 336
    min_history_hours: int = 168
    levels: tuple[float, ...] = ()
    max_growth: float | None = None
    winner: Forecaster | None = None
    calibration: Calibration = field(default_factory=lambda: Calibration(np.empty(0)))
    evidence_hours: int | None = None
    upper_band: dict[float, tuple[Forecaster, Calibration]] = field(default_factory=dict)
    """Upper levels taken from another candidate than the median's: its fitted model and calibration."""
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "auto"

    def for_horizon(self, horizon_hours: int, min_history_hours: int, levels: Sequence[float] = (),
                    max_growth: float | None = None) -> SelectingForecaster:
        """This run's horizon and minimum history, the quantile levels its backtest should score, and the growth
        limit every candidate is held to in the backtest as in the forecast."""
        return replace(self, horizon_hours=horizon_hours, min_history_hours=min_history_hours,
                       levels=tuple(sorted(levels)), max_growth=max_growth)

    def fit(self, history: SeriesHistory) -> SelectingForecaster:
        length, origins, skip = selection_windows(history.n_hours, self.horizon_hours, self.min_history_hours)
        trials = [] if skip else self._trials(history, length, origins)
        qualified = [t for t in trials if t.runs and t.error is None]
        if not qualified:
            reason = skip or "no observed hours in any backtest window"
            return replace(self, winner=self._first_that_fits(history),
                           report={"selection": {"skipped": reason}})
        best = choose(qualified)
        tails = {t.name: window_tail_losses(t, self._tail_levels(), self.max_growth) for t in qualified}
        upper = {level: choose_upper(best, qualified, tails, level) for level in self._tail_levels()}
        upper = {level: trial for level, trial in upper.items() if trial is not best}
        report = {"selection": {"winner": best.name, "window_hours": length, "origins": origins,
                                "candidates": {t.name: _score(t) for t in trials}},
                  "backtest": _backtest_block(best, trials, length, self.horizon_hours, upper)}
        for name, losses in tails.items():
            report["selection"]["candidates"][name]["tail_pinball_scaled"] = {
                quantile_column(level): float(np.mean(np.concatenate(parts))) for level, parts in losses.items()}
        if upper:
            report["selection"]["upper_band"] = {quantile_column(level): t.name for level, t in upper.items()}
        fitted = self._fit_upper(history, upper)
        return replace(self, winner=best.forecaster.fit(history), calibration=own_calibration(best),
                       evidence_hours=length, upper_band=fitted, report=report)

    def _fit_upper(self, history: SeriesHistory,
                   upper: dict[float, _CandidateTrial]) -> dict[float, tuple[Forecaster, Calibration]]:
        """The upper band's models fitted on the whole history (one fit each); a model that cannot fit leaves its
        levels to the median's model."""
        fitted: dict[str, Forecaster | None] = {}
        out = {}
        for level, trial in upper.items():
            if trial.name not in fitted:
                try:
                    fitted[trial.name] = trial.forecaster.fit(history)
                except FIT_ERRORS:
                    fitted[trial.name] = None
            model = fitted[trial.name]
            if model is not None:
                out[level] = (model, own_calibration(trial))
        return out

    def predict(self, horizon: int, levels: Sequence[float]) -> SeriesForecast:
        if self.winner is None:
            raise RuntimeError("SelectingForecaster.predict called before fit")
        wanted = sorted(set(levels) | set(SPREAD_LEVELS))
        raw = self.winner.predict(horizon, wanted)
        quantiles = self.calibration.apply(raw.quantiles, sorted(levels), self.evidence_hours)
        model_used = raw.model_used
        borrowed: dict[str, list[float]] = {}
        for level, (model, calibration) in sorted(self.upper_band.items()):
            if level not in quantiles:
                continue
            other = model.predict(horizon, sorted({level, *SPREAD_LEVELS}))
            quantiles[level] = calibration.apply(other.quantiles, [level], self.evidence_hours)[level]
            borrowed.setdefault(other.model_used, []).append(level)
        for used, taken in borrowed.items():
            model_used += f"; {','.join(quantile_column(level) for level in taken)} from {used}"
        calibration_report = {**self.calibration.describe(), "spread_held_beyond_hours": self.evidence_hours}
        details = {**raw.details, **self.report, "calibration": calibration_report}
        return replace(raw, quantiles=monotone(quantiles), model_used=model_used, details=details)

    def _trials(self, history: SeriesHistory, length: int, origins: list[int]) -> list[_CandidateTrial]:
        trials = [_CandidateTrial(name, forecaster) for name, forecaster in self.candidates]
        levels = sorted(set(SPREAD_LEVELS) | set(bt.INTERVAL_LEVELS) | set(self.levels))  # the median included
        for origin in origins:
            scored = history.observed[origin:origin + length]
            if not scored.any():
                continue
            past = history.head(origin)
            actual = history.values[origin:origin + length][scored]
            scale = bt.in_sample_scale(past.filled, past.observed)
            peak = history_peak(past)
            for trial in trials:
                try:
                    run, fallback = trial.forecaster.fit(past).predict(length, levels), False
                except FIT_ERRORS as exc:
                    trial.failures.append(f"origin {origin}: {str(exc)[:200] or type(exc).__name__}")
                    run, fallback = SeasonalNaive().fit(past).predict(length, levels), True
                trial.runs.append(_WindowRun(origin, run.model_used, actual, run.quantiles[bt.POINT_LEVEL][scored],
                                             {lvl: run.quantiles[lvl][scored] for lvl in levels}, scale, fallback,
                                             peak))
        return trials

    def _tail_levels(self) -> list[float]:
        return [level for level in self.levels if level > bt.POINT_LEVEL]

    def _first_that_fits(self, history: SeriesHistory) -> Forecaster:
        for _, forecaster in self.candidates:
            try:
                return forecaster.fit(history)
            except FIT_ERRORS:
                continue
        return SeasonalNaive().fit(history)


def choose(qualified: list[_CandidateTrial]) -> _CandidateTrial:
    """Step 3: the default (first) candidate, unless challengers beat it clearly; then the best of those."""
    default, challengers = qualified[0], qualified[1:]
    passed = [t for t in challengers if clearly_better(default, t)]
    return min(passed, key=lambda t: t.mase()) if passed else default  # min keeps the first of equals


def own_calibration(trial: _CandidateTrial) -> Calibration:
    """The trial's band calibration from its own forecasts, not from the naive that stood in for it."""
    return Calibration.from_errors(_own_errors(trial))


def window_tail_losses(trial: _CandidateTrial, levels: list[float],
                       max_growth: float | None) -> dict[float, list[np.ndarray]]:
    """Scaled pinball loss per hour at each of ``levels``, window by window, of the trial's band as deployed:
    calibrated on the other windows, held to ``max_growth`` times the peak before each origin (step 3)."""
    errors = [standardised_errors(r.actual, r.quantiles) for r in trial.runs]
    losses: dict[float, list[np.ndarray]] = {level: [] for level in levels}
    for run, calibrated in zip(trial.runs, _cross_fitted(trial.runs, errors), strict=True):
        bound = np.inf if max_growth is None or run.peak <= 0 else max_growth * run.peak
        for level in levels:
            losses[level].append(bt.pinball(run.actual, np.minimum(calibrated[level], bound), level) / run.scale)
    return losses


def choose_upper(best: _CandidateTrial, qualified: list[_CandidateTrial],
                 tails: dict[str, dict[float, list[np.ndarray]]], level: float) -> _CandidateTrial:
    """Step 3 for one upper level: the median's model, unless challengers' bands beat it clearly; then the lowest
    pooled loss of those."""
    def per_window(trial: _CandidateTrial) -> np.ndarray:
        return np.array([float(np.mean(part)) for part in tails[trial.name][level]])

    def pooled(trial: _CandidateTrial) -> float:
        return float(np.mean(np.concatenate(tails[trial.name][level])))

    passed = [t for t in qualified if t is not best and clearly_lower(per_window(best), per_window(t))]
    return min(passed, key=pooled) if passed else best


def monotone(quantiles: dict[float, np.ndarray]) -> dict[float, np.ndarray]:
    """Each upper level at least the one beneath it (a level taken from another model may sit below the median)."""
    out = dict(quantiles)
    previous = None
    for level in sorted(out):
        if previous is not None and level > bt.POINT_LEVEL:
            out[level] = np.maximum(out[level], previous)
        previous = out[level]
    return out


def _score(trial: _CandidateTrial) -> dict[str, Any]:
    if trial.error is not None or not trial.runs:
        return {"error": trial.error or "no scored hours"}
    acc = _accumulate(trial.runs, [r.quantiles for r in trial.runs])
    score = {key: acc[key] for key in ("mase", "smape", "coverage80", "coverage90", "hours_scored")}
    if trial.failures:
        score["fallback_windows"] = trial.failures
    return score


def _accumulate(runs: list[_WindowRun], quantiles: list[dict[float, np.ndarray]]) -> dict[str, Any]:
    levels = sorted(quantiles[0])
    acc = bt._Accumulator(levels)
    for run, quants in zip(runs, quantiles, strict=True):
        acc.add(run.actual, run.point, quants, run.scale)
    return acc.result()


def _cross_fitted(runs: list[_WindowRun], errors: list[np.ndarray]) -> list[dict[float, np.ndarray]]:
    """Each window's band calibrated on the other windows' errors (on its own when it is the only one)."""
    out = []
    for i, run in enumerate(runs):
        others = [e for j, e in enumerate(errors) if j != i] or errors
        out.append(Calibration.from_errors(others).apply(run.quantiles, sorted(run.quantiles)))
    return out


def _own_errors(trial: _CandidateTrial) -> list[np.ndarray]:
    return [standardised_errors(r.actual, r.quantiles) if not r.fallback else np.empty(0) for r in trial.runs]


def _deployed(best: _CandidateTrial, upper: dict[float, _CandidateTrial]) -> list[dict[float, np.ndarray]]:
    """Each window's band as the forecast deploys it: the winner's, cross-fitted, with each level of ``upper`` from
    its own candidate's cross-fitted band, kept in order."""
    bands = _cross_fitted(best.runs, _own_errors(best))
    for trial in {id(t): t for t in upper.values()}.values():
        theirs = _cross_fitted(trial.runs, _own_errors(trial))
        for band, other in zip(bands, theirs, strict=True):
            band.update({level: other[level] for level, t in upper.items() if t is trial})
    return [monotone(band) for band in bands]


def _backtest_block(best: _CandidateTrial, trials: list[_CandidateTrial], length: int, horizon: int,
                    upper: dict[float, _CandidateTrial]) -> dict[str, Any]:
    """The backtest metadata block: the deployed band (the winner's calibrated and cross-fitted, its upper levels
    from ``upper`` where another candidate took them) as ``model``, and both naives."""
    by_name = {t.name: t for t in trials}
    windows = [{"origin_index": r.origin, "hours_scored": int(r.actual.size), "model_used": r.model_used,
                "mase_scale": r.scale} for r in best.runs]
    block: dict[str, Any] = {"window_hours": length, "windows": windows,
                             "window_fraction_of_horizon": round(length / horizon, 4),
                             "model": _accumulate(best.runs, _deployed(best, upper)),
                             "model_uncalibrated": _accumulate(best.runs, [r.quantiles for r in best.runs])}
    for name, _ in NAIVE_CANDIDATES:
        trial = by_name.get(name)
        if trial is not None and trial.runs and trial.error is None:
            block[name] = _accumulate(trial.runs, [r.quantiles for r in trial.runs])
    return block

"""Report sections about demand: the forecast with its bands, and last month's forecast against actuals.

Last month's forecast is compared with the actual demand on every hour of last month
(the calendar month before the report's) for which both exist; the section says how
many of the month's hours that is.

Totals over traffic classes add the class means (exact for expectations) and add the
class quantiles (exact only if the classes peak together, so the bands shown for a
region and model are upper bounds on the quantiles of their total). The change
against history compares the forecast's mean hourly demand with the mean of the same
number of hours of history just before the forecast starts.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner.contracts import FORECAST_QUANTILES, quantile_column
from planner.report.accuracy import forecast_accuracy, hours_compared, overall_accuracy, wape_pct
from planner.report.inputs import SERIES_KEY, ReportInputs, iso, number, pct, pick, present, rounded, utc
from planner.report.model import STATUS_PARTIAL, Chart, Section, Table
from planner.report.period import previous_month_window

QUANTILES = tuple(quantile_column(level) for level in FORECAST_QUANTILES)
HISTORY_TAIL_HOURS = 7 * 24


def forecast_measure(inputs: ReportInputs) -> str:
    return str(pick(pick(inputs.forecast_meta, "parameters", default={}), "measure", default="requests"))


def _fallbacks(meta: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    out = {}
    for entry in pick(meta, "series", default=[]) or []:
        if isinstance(entry, dict) and entry.get("fallback"):
            key = (str(entry.get("region")), str(entry.get("model")), str(entry.get("traffic_class")))
            out[key] = str(entry.get("fallback_reason") or "fallback used")
    return out


def _history_hours(history: pd.DataFrame | None, measure: str) -> pd.DataFrame:
    if not present(history, *SERIES_KEY, "ts", measure):
        return pd.DataFrame(columns=["region", "model", "ts", measure])
    frame = history[["region", "model", "ts", measure]].copy()
    frame["region"], frame["model"] = frame["region"].astype(str), frame["model"].astype(str)
    frame["ts"] = utc(frame["ts"]).dt.floor("h")
    frame[measure] = pd.to_numeric(frame[measure], errors="coerce").astype(float)
    return frame.groupby(["region", "model", "ts"], as_index=False, sort=True)[measure].sum()


def _forecast_hours(forecast: pd.DataFrame) -> pd.DataFrame:
    """The forecast with UTC timestamps and its series key as text."""
    fc = forecast.copy()
    fc["ts"] = utc(fc["ts"])
    for column in SERIES_KEY:
        fc[column] = fc[column].astype(str)
    return fc


def _by_region_model(fc: pd.DataFrame, totals: pd.DataFrame, hist: pd.DataFrame, measure: str,
                     qcols: list[str]) -> pd.DataFrame:
    """Per region and model: forecast total, mean and peak rate, and the change against as many hours of history."""
    unit = f"{measure}_per_hour"
    hours = int(fc["ts"].nunique())
    rows = []
    for (region, model), part in totals.groupby(["region", "model"], sort=True):
        recent = hist[(hist["region"] == region) & (hist["model"] == model)].tail(hours)
        recent_mean = float(recent[measure].mean()) if len(recent) else None
        mean_rate = float(part["mean"].mean())
        rows.append({
            "region": region, "model": model,
            "classes": int(fc[(fc["region"] == region) & (fc["model"] == model)]["traffic_class"].nunique()),
            f"forecast_{measure}_total": float(part["mean"].sum()),
            f"mean_{unit}": mean_rate,
            f"peak_q99_{unit}": float(part["q99"].max()) if "q99" in qcols else None,
            f"recent_{unit}": recent_mean,
            "change_pct": 100.0 * (mean_rate - recent_mean) / recent_mean if recent_mean else None,
        })
    return rounded(pd.DataFrame(rows), default=1)


def _by_series(fc: pd.DataFrame, fallbacks: dict[tuple[str, str, str], str], unit: str,
               qcols: list[str]) -> pd.DataFrame:
    """Per series: mean and peak rate, the forecaster used and why a fallback was taken."""
    rows = []
    for key, part in fc.groupby(list(SERIES_KEY), sort=True):
        rows.append({
            "region": key[0], "model": key[1], "traffic_class": key[2],
            f"mean_{unit}": float(part["mean"].mean()),
            f"peak_q99_{unit}": float(part["q99"].max()) if "q99" in qcols else None,
            "model_used": str(part["model_used"].iloc[0]) if "model_used" in part else "not reported",
            "fallback": fallbacks.get(key, ""),
        })
    return rounded(pd.DataFrame(rows), default=1)


def _chart_data(hist: pd.DataFrame, totals: pd.DataFrame, start: pd.Timestamp, measure: str,
                qcols: list[str]) -> pd.DataFrame:
    """The forecast chart's rows: the last week of history, then the forecast summed over classes."""
    unit = f"{measure}_per_hour"
    tail = hist[hist["ts"] >= start - pd.Timedelta(hours=HISTORY_TAIL_HOURS)].rename(columns={measure: unit})
    tail = tail.assign(source="history")
    ahead = totals.rename(columns={"mean": unit}).assign(source="forecast")
    chart_data = pd.concat([tail, ahead], ignore_index=True)[["region", "model", "ts", "source", unit, *qcols]]
    chart_data = chart_data.sort_values(["region", "model", "ts", "source"], kind="stable").reset_index(drop=True)
    chart_data["ts"] = chart_data["ts"].map(iso)
    return rounded(chart_data, default=1)


def backtest_missing_reason(forecast_meta: dict[str, Any]) -> str:
    """Why no backtest figure is shown: the forecast ran without one, or each series' recorded skip reason."""
    asked = pick(pick(forecast_meta, "parameters", default={}), "backtest")
    series = [s for s in pick(forecast_meta, "series", default=[]) or [] if isinstance(s, dict)]
    skipped: dict[str, list[str]] = {}
    for entry in series:
        block = entry.get("backtest")
        if isinstance(block, dict) and block.get("skipped"):
            name = str(entry.get("series") or "/".join(str(entry.get(c)) for c in SERIES_KEY))
            skipped.setdefault(str(block["skipped"]), []).append(name)
    if skipped:
        reasons = "; ".join(f"{reason} ({len(names)} of {len(series)} series, e.g. {names[0]})"
                            for reason, names in sorted(skipped.items(), key=lambda kv: (-len(kv[1]), kv[0])))
        return f"skipped, not run: {reasons}"
    if asked is False:
        return "not reported (the forecast ran without --backtest)"
    return "not reported (the forecast metadata holds no backtest figures)"


def _backtest_paragraph(forecast_meta: dict[str, Any]) -> str:
    overall = pick(forecast_meta, "backtest_overall", default={})
    backtest = pick(overall, "model", default={})
    mase = number(pick(backtest, "mase"))
    if mase is None:
        return "Backtest: " + backtest_missing_reason(forecast_meta) + "."
    ratio = number(pick(overall, "mase_ratio_vs_best_naive"))
    coverage = number(pick(backtest, "coverage90"))
    series = [s for s in pick(forecast_meta, "series", default=[]) or [] if isinstance(s, dict)]
    skipped = [s for s in series if isinstance(s.get("backtest"), dict) and s["backtest"].get("skipped")]
    if skipped:  # the figures cover only the series that were backtested: say which were not, and why
        coverage_text = "; " + backtest_missing_reason(forecast_meta).replace("skipped, not run: ", "not backtested: ")
    else:
        coverage_text = ""
    return (f"Backtest (rolling origin): MASE {mase:.3f}"
            + (f", {ratio:.3f} times the better seasonal naive" if ratio is not None else "")
            + (f"; {100 * coverage:.1f} % of hours inside the 90 % interval" if coverage is not None else "")
            + coverage_text + ".")


def _compared_hours(hist: pd.DataFrame, hours: int) -> str:
    """The history the forecast is compared with: as many hours as it forecasts, or all there is when less."""
    counts = hist.groupby(["region", "model"]).size().clip(upper=hours) if len(hist) else pd.Series([0])
    low, high = int(counts.min()), int(counts.max())
    span = f"the {low:,}" if low == high else f"the {low:,} to {high:,}"
    return span + " hours of history before it" + ("" if low == hours else
                                                   f" (all there is; the forecast covers {hours:,})")


def forecast_section(inputs: ReportInputs, as_of: pd.Timestamp) -> Section:
    section = Section("forecast", "Demand forecast")
    if not present(inputs.forecast, *SERIES_KEY, "ts", "mean"):
        return section.no_data("no demand forecast was given to this report run, so there is nothing to show "
                               "for the coming month; run `planner forecast` (or `planner plan`) first.")
    measure = forecast_measure(inputs)
    unit = f"{measure}_per_hour"
    fc = _forecast_hours(inputs.forecast)
    qcols = [q for q in QUANTILES if q in fc.columns]
    start, end = fc["ts"].min(), fc["ts"].max()
    hours = int(fc["ts"].nunique())
    totals = fc.groupby(["region", "model", "ts"], as_index=False, sort=True)[["mean", *qcols]].sum()
    hist = _history_hours(inputs.history, measure)
    hist = hist[hist["ts"] < min(start, as_of)]
    by_rm = _by_region_model(fc, totals, hist, measure, qcols)
    fallbacks = _fallbacks(inputs.forecast_meta)

    total = float(fc["mean"].sum())
    recent_total = by_rm[f"recent_{unit}"].sum() if by_rm[f"recent_{unit}"].notna().all() else None
    change = 100.0 * (by_rm[f"mean_{unit}"].sum() - recent_total) / recent_total if recent_total else None
    section.paragraphs.append(
        f"Forecast of {measure} per hour for {fc.groupby(list(SERIES_KEY)).ngroups} series, {hours} hours from "
        f"{iso(start)} to {iso(end)}: {total:,.0f} {measure} in total, {pct(change, signed=True)} per hour "
        f"against {_compared_hours(hist, hours)}.")
    section.paragraphs.append(_backtest_paragraph(inputs.forecast_meta))
    if fallbacks:
        section.paragraphs.append(f"{len(fallbacks)} series use a seasonal-naive fallback (listed under risks).")
    section.paragraphs.append("Bands in the chart add the class quantiles, which assumes the classes peak "
                              "together: an upper bound on each quantile of the total.")
    section.tables += [
        Table("forecast_by_region_model", "Forecast per region and model", by_rm,
              f"{measure} per hour, summed over traffic classes; change against the {hours} hours before."),
        Table("forecast_by_series", "Forecast per series", _by_series(fc, fallbacks, unit, qcols),
              "model_used names the fitted forecaster."),
        Table("forecast_chart", "Forecast chart data", _chart_data(hist, totals, start, measure, qcols),
              "history: the last 7 days observed; forecast: mean and quantiles summed over classes.", show=False),
    ]
    section.charts.append(Chart("forecast", "Demand forecast per region and model", "forecast_bands",
                                "forecast_chart", {"y": unit, "bands": qcols},
                                f"{measure} per hour: last 7 days of history and the forecast with bands"))
    section.facts = {"measure": measure, "forecast_start": iso(start), "forecast_end": iso(end),
                     "horizon_hours": hours, f"forecast_{measure}_total": round(total, 1),
                     "change_vs_recent_pct": round(float(change), 2) if change is not None else None,
                     "n_fallbacks": len(fallbacks)}
    return section


def accuracy_section(inputs: ReportInputs, as_of: pd.Timestamp) -> Section:
    section = Section("accuracy", "Last month's forecast against actuals")
    previous = inputs.previous_forecast
    if not present(previous, *SERIES_KEY, "ts", "mean"):
        return section.no_data("the run history holds no forecast from last month. Each report run stores the "
                               "forecast it shows; next month's report compares that one with what happened.")
    measure = forecast_measure(inputs)
    month = previous_month_window(inputs.month)
    month_name = f"{month.start:%Y-%m}"
    table = forecast_accuracy(previous, inputs.history, as_of, measure, month)
    prev_ts = utc(previous["ts"])
    if table.empty:
        hist_end = iso(utc(inputs.history["ts"]).max()) if present(inputs.history, "ts") else "no history given"
        return section.no_data(f"last month's forecast covers {iso(prev_ts.min())} to {iso(prev_ts.max())}, but "
                               f"no actual demand is recorded for the hours of {month_name} it forecast before "
                               f"{iso(as_of)} (history ends {hist_end}).")
    table = rounded(table.rename(columns={"actual": f"actual_{measure}", "forecast": f"forecast_{measure}"}))
    overall = overall_accuracy(table.rename(columns={f"actual_{measure}": "actual", f"forecast_{measure}": "forecast"}))
    wape = wape_pct(previous, inputs.history, as_of, measure, month)
    covered = hours_compared(previous, inputs.history, as_of, measure, month)
    if covered < month.hours:
        section.status = STATUS_PARTIAL
    section.paragraphs.append(
        f"Covers {covered} of the {month.hours} hours of {month_name} ({iso(month.start)} to "
        f"{iso(month.last_hour)}): the hours with both last month's forecast (which ran from {iso(prev_ts.min())} "
        f"to {iso(prev_ts.max())}) and actual demand.")
    section.paragraphs.append(
        f"Over {overall['series_compared']} series and {overall['hours_compared']:,} series-hours, last month's "
        f"forecast was {pct(overall['bias_pct'], signed=True)} on total {measure} (WAPE of the hourly total "
        f"{pct(wape)}).")
    median = overall.get("median_mase")
    section.paragraphs.append(
        (f"Median MASE {median:.3f}; {overall['series_mase_below_1']} of {overall['series_compared']} series beat "
         "the seasonal naive in-sample error (MASE < 1). " if median is not None else
         "MASE not computed: too little history before last month's forecast. ")
        + f"Actuals fell at or below q90 in {pct(overall['below_q90_pct'])} of hours (90 % if calibrated) and at "
          f"or below q99 in {pct(overall['below_q99_pct'])} (99 %).")
    metric = "mase" if table["mase"].notna().any() else "mape_pct"
    section.tables.append(Table("forecast_accuracy", "Accuracy per series", table,
                                "bias and MAPE in percent; MASE scaled by the seasonal naive named in mase_scale."))
    section.charts.append(Chart("forecast_accuracy", f"Last month's forecast: {metric.upper().replace('_PCT', ' %')} "
                                                     "per series", "bars", "forecast_accuracy",
                                {"label": list(SERIES_KEY), "value": metric,
                                 "reference": 1.0 if metric == "mase" else None},
                                f"{metric} per series; 1.0 marks the seasonal naive"))
    section.facts = {**{k: (round(v, 3) if isinstance(v, float) else v) for k, v in overall.items()},
                     "wape_pct": round(wape, 3) if wape is not None else None,
                     "month_compared": month_name, "hours_covered": covered, "hours_in_month": month.hours}
    return section

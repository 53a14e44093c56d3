"""Serving-region demand for one hour of a forecast, for plans that carry no routed flows.

``planner place`` writes the flows it routed, and ``planner simulate`` uses them. A plan
written by hand (today's fleet, say) has none; then the forecast's demand per (origin,
model, class) at the chosen hour is sent where the scenario allows it to go:

    rps(r, m, k) = Σ_o  d(o, m, k) · G(r, m) / Σ_{r' ∈ E(o,k)} G(r', m)     for r ∈ E(o, k)

where d is the forecast quantile at that hour (req/h / 3600), E(o, k) the serving regions
that residency and class k's latency budget allow for origin o, and G(r, m) the GPUs of
model m's replicas that the plan has in r. Splitting in proportion to GPUs is what a
capacity-weighted global load balancer does. Demand with no eligible region holding the
model goes to the nearest eligible region, where the simulator reports it as rejected
(``no_replicas``) rather than dropping it; an origin with no eligible region at all is an
input error, since the scenario itself forbids serving it.
"""

from __future__ import annotations

import pandas as pd

from planner.contracts import FORECAST_KEY as FORECAST_KEYS
from planner.contracts import quantile_column
from planner.errors import InputError
from planner.scenario import Scenario
from planner.sim.windows import PEAK, TROUGH, WINDOW_CHOICES, trough_period


def provisioned_column(scenario: Scenario, forecast: pd.DataFrame) -> str:
    """The forecast column the scenario provisions for (``q95`` for 0.95), checked to exist."""
    column = quantile_column(scenario.capacity.forecast_quantile)
    if column not in forecast.columns:
        raise InputError(f"the forecast has no column {column!r}", where="forecast",
                         fix=f"forecast with --quantiles including {scenario.capacity.forecast_quantile}")
    return column


def forecast_hour(forecast: pd.DataFrame, column: str, window: str, scenario: Scenario) -> str:
    """The hour to simulate: the hour of largest (``peak``) or least non-zero (``trough``) total demand over the
    scenario's series, or the hour ``window`` names."""
    missing = [c for c in FORECAST_KEYS if c not in forecast.columns]
    if missing:
        raise InputError(f"the forecast lacks column(s) {', '.join(missing)}", where="forecast",
                         fix="pass a forecast written by `planner forecast`")
    mine = forecast[forecast["region"].isin(scenario.origin_names) & forecast["model"].isin(scenario.model_names)]
    if mine.empty:
        raise InputError("the forecast has no series for this scenario's origins and models", where="forecast",
                         fix=f"forecast origins {', '.join(scenario.origin_names)}")
    if window in (PEAK, TROUGH):
        totals = mine.groupby("ts", sort=True)[column].sum()
        if window == PEAK:
            return str(totals.idxmax())
        hour = trough_period(totals)
        if hour is None:
            raise InputError("the forecast has no demand in any hour, so there is no trough to simulate",
                             where="forecast", fix="pass a forecast of this scenario's demand")
        return hour
    stamp = pd.to_datetime(window, utc=True, errors="coerce")
    if pd.isna(stamp):
        raise InputError(f"cannot read the window {window!r}", where="--window", fix=f"use {WINDOW_CHOICES}")
    label = f"{stamp.floor('h'):%Y-%m-%dT%H:%M:%SZ}"
    if label not in set(mine["ts"].astype(str)):
        raise InputError(f"the forecast has no hour {label}", where="--window",
                         fix=f"pick an hour between {mine['ts'].min()} and {mine['ts'].max()}")
    return label


def route_forecast(scenario: Scenario, plan_rows: pd.DataFrame, forecast: pd.DataFrame, column: str,
                   hour: str) -> pd.DataFrame:
    """Demand per (serving region, model, class) in req/s at ``hour`` (see the module docstring)."""
    gpus = plan_rows.groupby(["region", "model"])["gpus"].sum().to_dict()
    rows = forecast[(forecast["ts"].astype(str) == hour) & forecast["region"].isin(scenario.origin_names)
                    & forecast["model"].isin(scenario.model_names)
                    & forecast["traffic_class"].isin(scenario.class_names)]
    demand: dict[tuple[str, str, str], float] = {}
    for row in rows.itertuples(index=False):
        rps = float(getattr(row, column)) / 3600.0
        if rps <= 0:  # no demand to route: it must not open a pool of its own
            continue
        eligible = scenario.eligible_serving(row.region, row.traffic_class)
        if not eligible:
            raise InputError(f"origin {row.region} class {row.traffic_class} has no eligible serving region",
                             where="scenario", fix="check residency and the class's latency_budget_ms")
        weights = {key: float(gpus.get((key, row.model), 0.0)) for key in eligible}
        total = sum(weights.values())
        if total <= 0:  # nowhere holds the model: the nearest region reports it as rejected
            weights, total = {eligible[0]: 1.0}, 1.0
        for key, weight in weights.items():
            if weight > 0:
                slot = (key, row.model, row.traffic_class)
                demand[slot] = demand.get(slot, 0.0) + rps * weight / total
    frame = pd.DataFrame([(r, m, k, v) for (r, m, k), v in sorted(demand.items())],
                         columns=["region", "model", "traffic_class", "rps"])
    return frame

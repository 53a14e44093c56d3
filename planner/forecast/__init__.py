"""Demand forecasting: per-series quantile forecasts from a pluggable model, with backtests.

Modules, one concept each: ``quality`` (clean one series and report what was done),
``forecaster`` (the interface every forecast model offers), ``registry`` (the models by
name, and the default), ``model`` (the harmonic regression with ARMA errors, the default),
``baselines`` (seasonal naive), ``fallback`` (which forecast a series gets, visibly),
``backtest`` (rolling-origin metrics), ``run`` (the whole history: fan-out and assembly),
``plots`` (PNGs), ``synthetic`` (known-structure series for tests and benchmarks).
"""

from planner.forecast.run import ForecastResult, forecast_history, parse_horizon, parse_quantiles

__all__ = ["ForecastResult", "forecast_history", "parse_horizon", "parse_quantiles"]

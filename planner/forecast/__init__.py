"""Demand forecasting: per-series harmonic regression with ARMA errors, quantiles, backtests.

Modules, one concept each: ``quality`` (clean one series and report what was done),
``model`` (fit and forecast one series), ``baselines`` (seasonal naive),
``fallback`` (which forecaster a series gets, visibly), ``backtest`` (rolling-origin
metrics), ``run`` (the whole history: fan-out and assembly), ``plots`` (PNGs),
``synthetic`` (known-structure series for tests and benchmarks).
"""

from planner.forecast.run import ForecastResult, forecast_history, parse_horizon, parse_quantiles

__all__ = ["ForecastResult", "forecast_history", "parse_horizon", "parse_quantiles"]

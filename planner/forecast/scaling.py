"""``--demand-scale``: multiply the forecast demand, for "what if demand grows 2×?".

``--demand-scale 2`` scales every series; ``--demand-scale region=eu-west:1.5`` scales the
series of one origin region (``model=`` and ``class=`` select by model and traffic class).
Several scales multiply where they overlap. The mean and every quantile column are scaled
alike: a scaled series keeps its shape and its relative uncertainty, which is what a
planner means by "the same traffic, more of it".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from planner.contracts.quantiles import quantile_columns
from planner.errors import InputError

OPTION = "--demand-scale"
SELECTORS = {"region": "region", "model": "model", "class": "traffic_class", "traffic_class": "traffic_class"}
_EXAMPLE = "write e.g. --demand-scale 2 or --demand-scale region=eu-west:1.5"


@dataclass(frozen=True)
class DemandScale:
    """One ``--demand-scale``: a factor for every series, or for those whose ``column`` equals ``value``."""

    factor: float
    column: str | None
    value: str | None
    text: str

    def selects(self, frame: pd.DataFrame, column: str | None) -> pd.Series:
        if column is None:
            return pd.Series(True, index=frame.index)
        return frame[column].astype(str) == self.value


def parse_demand_scale(text: str, option: str = OPTION, example: str = _EXAMPLE) -> DemandScale:
    """``X`` or ``KEY=VALUE:X`` as a :class:`DemandScale`, or an InputError naming ``option`` (``planner sweep
    --vary demand-scale=...`` takes the same values) and saying what is wrong, with ``example`` as the fix."""
    selector, sep, factor_text = text.rpartition(":")
    if not sep:
        selector, factor_text = "", text
    column = value = None
    if selector:
        key, eq, value = selector.partition("=")
        column = SELECTORS.get(key.strip())
        if not eq or column is None or not value.strip():
            raise InputError(f"'{text}' selects no series", where=option,
                             fix=f"select with {', '.join(k + '=NAME' for k in ('region', 'model', 'class'))}; "
                                 + example)
        value = value.strip()
    try:
        factor = float(factor_text)
    except ValueError:
        raise InputError(f"'{text}': '{factor_text}' is not a number", where=option, fix=example) from None
    if not math.isfinite(factor) or factor <= 0:
        # A factor of 0 would plan no capacity for demand the scenario declares, with nothing said about it.
        raise InputError(f"'{text}': the factor must be a finite number > 0", where=option,
                         fix=f"{example}; to plan without a class, model or region, remove it from the scenario")
    return DemandScale(factor, column, value, text)


def parse_demand_scales(texts: Iterable[str]) -> tuple[DemandScale, ...]:
    return tuple(parse_demand_scale(t) for t in texts)


def scale_forecast(forecast: pd.DataFrame, scales: Sequence[DemandScale]) -> pd.DataFrame:
    """A copy of ``forecast`` with its mean and quantile columns multiplied (see :func:`_scaled`)."""
    return _scaled(forecast, scales, ["mean", *quantile_columns(forecast.columns)], {}, "forecast series")


def scale_flows(flows: pd.DataFrame, scales: Sequence[DemandScale]) -> pd.DataFrame:
    """A copy of routed demand (``origin`` to serving ``region``) with its req/s multiplied; ``region=`` selects
    the origin, as it does in the forecast."""
    return _scaled(flows, scales, ["rps"], {"region": "origin"}, "flow")


def _scaled(frame: pd.DataFrame, scales: Sequence[DemandScale], demand: list[str], renamed: dict[str, str],
            what: str) -> pd.DataFrame:
    """``frame`` with each ``demand`` column times the product of the scales that select its row; a selector
    that matches no row is an InputError naming the values that exist."""
    if not scales:
        return frame
    factor = pd.Series(1.0, index=frame.index)
    for scale in scales:
        column = None if scale.column is None else renamed.get(scale.column, scale.column)
        chosen = scale.selects(frame, column)
        if column is not None and not chosen.any():
            names = sorted(frame[column].astype(str).unique())
            raise InputError(f"'{scale.text}': no {what} has {column} '{scale.value}'", where=OPTION,
                             fix=f"use one of: {', '.join(names)}")
        factor = factor.where(~chosen, factor * scale.factor)
    scaled = frame.copy()
    for column in demand:
        scaled[column] = frame[column] * factor
    return scaled

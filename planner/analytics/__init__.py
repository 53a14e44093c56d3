"""Closed-form queueing results the simulator is checked against and the planner reasons with."""

from planner.analytics.erlang import (
    erlang_b,
    erlang_c,
    erlang_c_mean_wait,
    halfin_whitt_beta,
    halfin_whitt_wait_probability,
    min_servers_erlang_c,
    sqrt_staffing,
)
from planner.analytics.mg1 import cobham_mean_waits, pk_mean_wait, ps_mean_sojourn

__all__ = [
    "cobham_mean_waits",
    "erlang_b",
    "erlang_c",
    "erlang_c_mean_wait",
    "halfin_whitt_beta",
    "halfin_whitt_wait_probability",
    "min_servers_erlang_c",
    "pk_mean_wait",
    "ps_mean_sojourn",
    "sqrt_staffing",
]

"""Scenario variants the tests build from a loaded scenario."""

from __future__ import annotations

from planner.scenario import Scenario, parse_scenario


def with_tps(scenario: Scenario, tps: tuple[int, ...], model: str = "llama-3.1-8b") -> Scenario:
    """The scenario with ``model`` restricted to the tensor-parallel degrees ``tps``."""
    raw = scenario.model_dump()
    for spec in raw["models"]:
        if spec["name"] == model:
            spec["tp"] = list(tps)
    return parse_scenario(raw)


def without_reuse(scenario: Scenario) -> Scenario:
    """The scenario with no class declaring prefix reuse: plain Poisson traffic, as the sampler's own tests need."""
    raw = scenario.model_dump()
    for klass in raw["classes"]:
        klass["reuse"] = None
    return parse_scenario(raw)

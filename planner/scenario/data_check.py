"""Cross-check a valid scenario against the catalog offers and the model profiles.

A scenario can be well-formed and still unusable: a serving region the catalog
has no GPUs for, a model with no step-time profile, or a model whose allowed SKUs
are offered nowhere it may run. Each such problem is returned as one sentence;
an empty list means the scenario fits the data. Pure: DataFrames in, strings out.

Offers need the columns ``region_key, sku, tier``; an optional boolean
``available`` column drops unavailable rows, and an optional ``geo`` column
(residency zone) is compared with each serving region's declared zone, since a
wrong zone would silently break residency. Profiles need ``model, sku, tp_degree, engine``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from planner.contracts import OFFER_KEY, PROFILE_KEY
from planner.errors import InputError
from planner.scenario.model import Scenario

OFFER_COLUMNS = OFFER_KEY
PROFILE_COLUMNS = PROFILE_KEY


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise InputError(
            f"the {what} table lacks the column(s) {', '.join(missing)}",
            where=what,
            fix=f"provide a table with the columns {', '.join(columns)}",
        )


def _truthy(column: pd.Series) -> pd.Series:
    """A boolean mask from a bool column or from text such as 'true'/'False' read from CSV."""
    if pd.api.types.is_bool_dtype(column):
        return column.fillna(False).astype(bool)
    return column.astype(str).str.strip().str.lower().isin({"true", "1", "yes"})


def _usable_offers(scenario: Scenario, offers: pd.DataFrame) -> pd.DataFrame:
    frame = offers.loc[:, [c for c in (*OFFER_COLUMNS, "available") if c in offers.columns]]
    if "available" in frame.columns:
        frame = frame[_truthy(frame["available"])]
    return frame[frame["tier"].astype(str).isin(scenario.capacity.tiers)]


def _catalog_zones(offers: pd.DataFrame) -> dict[str, set[str]]:
    """Residency zone(s) the catalog gives each region key (its optional ``geo`` column)."""
    if "geo" not in offers.columns:
        return {}
    pairs = offers.loc[:, ["region_key", "geo"]].dropna().astype(str).drop_duplicates()
    zones: dict[str, set[str]] = {}
    for key, zone in pairs.itertuples(index=False):
        zones.setdefault(key, set()).add(zone)
    return zones


def _offer_problems(scenario: Scenario, offers: pd.DataFrame) -> tuple[list[str], dict[str, set[str]]]:
    """Problems with the offers, and the SKUs offered per serving region on the enabled tiers."""
    _require(offers, OFFER_COLUMNS, "catalog offers")
    problems: list[str] = []
    all_keys = set(offers["region_key"].astype(str))
    usable = _usable_offers(scenario, offers)
    offered: dict[str, set[str]] = {
        key: set(usable.loc[usable["region_key"] == key, "sku"].astype(str)) for key in scenario.serving_keys
    }
    wanted = {sku for model in scenario.model_names for sku in scenario.allowed_skus(model)}
    tiers = ", ".join(scenario.capacity.tiers)
    geo = _catalog_zones(offers)
    for region in scenario.regions.serving:
        if region.key in geo and region.zone not in geo[region.key]:
            problems.append(
                f"serving region {region.key} is declared in zone {region.zone!r}, but the catalog places it in "
                f"{', '.join(repr(z) for z in sorted(geo[region.key]))}; residency rules would be wrong"
            )
    for key in scenario.serving_keys:
        if key not in all_keys:
            problems.append(f"serving region {key} has no offers in the catalog")
        elif not offered[key]:
            problems.append(f"serving region {key} has no available offers on the enabled tiers ({tiers})")
        elif not offered[key] & wanted:
            problems.append(
                f"serving region {key} offers none of the SKUs the scenario's models may use "
                f"(offered: {', '.join(sorted(offered[key]))})"
            )
    return problems, offered


def usable_profiles(scenario: Scenario, profiles: pd.DataFrame) -> pd.DataFrame:
    """The profile rows the scenario may deploy: its models, on their allowed SKUs, under each
    model's engine, at its allowed tensor-parallel degrees; in key order."""
    _require(profiles, PROFILE_COLUMNS, "model profiles")
    keep = pd.Series(False, index=profiles.index)
    for model in scenario.model_names:
        spec = scenario.model(model)
        keep |= ((profiles["model"].astype(str) == model)
                 & profiles["sku"].astype(str).isin(scenario.allowed_skus(model))
                 & (profiles["engine"].astype(str) == spec.engine)
                 & profiles["tp_degree"].astype(int).isin(scenario.allowed_tps(model)))
    out = profiles[keep].sort_values(list(PROFILE_COLUMNS), kind="stable")
    out.attrs.update(profiles.attrs)
    return out


def check_against_data(
    scenario: Scenario,
    catalog_offers: pd.DataFrame | None,
    profiles: pd.DataFrame | None,
) -> list[str]:
    """Problems that make the scenario unusable with this data; empty when it fits.

    Checks, in order: serving regions whose declared zone differs from the catalog's
    ``geo``; serving regions without (usable) offers; models without any
    profile; models whose allowed SKUs have no profile; models with no SKU that is
    allowed, profiled (when profiles are given) and offered in a serving region
    (when offers are given). Either table may be None to skip its checks.
    """
    problems: list[str] = []
    offered: dict[str, set[str]] | None = None
    if catalog_offers is not None:
        offer_problems, offered = _offer_problems(scenario, catalog_offers)
        problems += offer_problems
    profiled: dict[str, set[str]] | None = None
    if profiles is not None:
        _require(profiles, PROFILE_COLUMNS, "model profiles")
        model_column = profiles["model"].astype(str)
        usable = usable_profiles(scenario, profiles)
        profiled = {model: set(usable.loc[usable["model"] == model, "sku"].astype(str))
                    for model in scenario.model_names}
        for model in scenario.model_names:
            spec = scenario.model(model)
            mine = profiles[model_column == model]
            if mine.empty:
                problems.append(f"model {model} has no profile (no row in the profile table)")
            elif not profiled[model]:
                profiled_as = sorted({f"{s} TP{t} ({e})" for s, t, e in mine[["sku", "tp_degree", "engine"]]
                                      .itertuples(index=False)})
                problems.append(
                    f"model {model} has no profile under engine {spec.engine} on its allowed SKUs "
                    f"({', '.join(scenario.allowed_skus(model))}) and tensor-parallel degrees "
                    f"({', '.join(map(str, scenario.allowed_tps(model)))}); profiled: {', '.join(profiled_as)}"
                )
    if offered is not None:
        offered_anywhere = set().union(*offered.values()) if offered else set()
        for model in scenario.model_names:
            candidates = set(scenario.allowed_skus(model))
            if profiled is not None:
                if not profiled[model] & candidates:
                    continue  # already reported above
                candidates &= profiled[model]
            if not candidates & offered_anywhere:
                problems.append(
                    f"model {model} cannot be placed: none of its usable SKUs "
                    f"({', '.join(sorted(candidates))}) is offered in any serving region"
                )
    return problems


def check_fits_data(scenario: Scenario, catalog_offers: pd.DataFrame | None, profiles: pd.DataFrame | None,
                    where: str | Path) -> None:
    """Every problem :func:`check_against_data` finds, as one input error naming ``where`` (the scenario file).

    ``planner validate`` checks offers and profiles; the commands that place replicas check the profiles too,
    so a model without a step-time profile is the same input error there, not an infeasible placement."""
    problems = check_against_data(scenario, catalog_offers, profiles)
    if problems:
        raise InputError("the scenario does not match the bundled data:\n  - " + "\n  - ".join(problems),
                         where=where,
                         fix="use serving regions listed by `planner catalog` and models listed by `planner profiles`")

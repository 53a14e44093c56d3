"""The GPU catalog: SKU specifications and priced offers, validated once at the front door.

Two files make a catalog (data dictionary: data/README.md, section "catalog"):

- ``skus.csv``: one row per GPU SKU, with memory (GB), memory bandwidth (GB/s), dense
  BF16/FP8 TFLOP/s, GPU-to-GPU bandwidth (GB/s), TDP (W) and GPUs per node.
- ``offers.csv``: one row per (region_key, sku, tier): the price in USD per GPU-hour,
  the instance it comes from, a planning quota in GPUs, and any assumption behind it.

Each file is checked by its schema (:mod:`planner.contracts.schemas.catalog`), and every
problem found is reported at once, with the file, the 1-based data row (the header is
line 1 of the file, so data row N is file line N + 1, as a spreadsheet shows it), the
column and a fix. The loaded frames are typed (floats, ints, bools) and are meant to
be read, not mutated: placement and reports take them as values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from planner import paths
from planner.contracts import OFFER_COLUMNS, OFFER_KEY, OFFER_TABLE_COLUMNS, SKU_COLUMNS, TIER_NAMES, ZONE_NAMES
from planner.contracts.schemas import (
    SKU_UNITS,
    FileSchema,
    Problem,
    offer_schema,
    parse_count,
    parse_number,
    raise_problems,
    sku_schema,
)
from planner.errors import InputError

TIERS = TIER_NAMES
GEOS = ZONE_NAMES
TABLE_COLUMNS = OFFER_TABLE_COLUMNS
REBUILD_HINT = "or rebuild the bundled catalog with `python data/build/build_catalog.py`"


@dataclass(frozen=True, eq=False)
class Catalog:
    """SKU specifications and offers. ``eq=False``: DataFrames have no single truth value."""

    skus: pd.DataFrame
    offers: pd.DataFrame

    def sku(self, name: str) -> pd.Series:
        """The specification row of one SKU."""
        match = self.skus[self.skus["sku"] == name]
        if match.empty:
            raise InputError(
                f"unknown GPU SKU {name!r}",
                where="skus.csv",
                fix=f"use one of: {', '.join(self.skus['sku'])}",
            )
        return match.iloc[0]

    def offers_for(
        self, region_key: str | None = None, sku: str | None = None, tier: str | None = None
    ) -> pd.DataFrame:
        """Offers matching every given filter exactly (None = any), in file order."""
        mask = pd.Series(True, index=self.offers.index)
        for column, value in zip(OFFER_KEY, (region_key, sku, tier), strict=True):
            if value is not None:
                mask &= self.offers[column] == value
        return self.offers[mask].reset_index(drop=True)

    def regions(self) -> list[str]:
        """Every serving region key that has at least one offer, sorted."""
        return sorted(self.offers["region_key"].unique().tolist())

    def price(self, region_key: str, sku: str, tier: str) -> float | None:
        """USD per GPU-hour of one offer, or None when there is no such offer."""
        match = self.offers_for(region_key, sku, tier)
        return None if match.empty else float(match["usd_per_gpu_hour"].iloc[0])


# ----------------------------------------------------------------------------- validation
def _locate(problem: Problem) -> str:
    """Rows 1-based as a spreadsheet shows them, the header being file line 1."""
    if problem.row is None:
        return f"header (file line 1), column '{problem.column}'"
    return f"row {problem.row + 1} (file line {problem.row + 2}; line 1 is the header), column '{problem.column}'"


def _read_raw(path: Path) -> pd.DataFrame:
    """Every cell as text (empty cells as ''), so problems can quote exactly what the user wrote."""
    if not path.is_file():
        raise InputError(
            "catalog file not found",
            where=path,
            fix=f"point PLANNER_DATA_DIR at a data folder whose catalog/ holds {path.name}, {REBUILD_HINT}",
        )
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=False)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise InputError(
            f"cannot read CSV: {exc}", where=path, fix=f"save the file as comma-separated text, {REBUILD_HINT}"
        ) from exc
    return frame.apply(lambda column: column.str.strip())


def _validated(path: Path, schema: FileSchema, columns: tuple[str, ...], *, empty: Problem | None = None
               ) -> pd.DataFrame:
    """The file's cells as text, after every problem the schema finds is reported at once;
    ``empty`` is the problem of a file with no rows, if that is one."""
    raw = _read_raw(path)
    problems = schema.problems(
        raw, header_fix=lambda column: f"add a '{column}' column (expected: {', '.join(columns)})"
    )
    if not problems and raw.empty and empty is not None:
        problems = [empty]
    raise_problems(problems, str(path), _locate, fix_suffix=f", {REBUILD_HINT}")
    return raw.reset_index(drop=True)


def _typed(raw: pd.DataFrame, columns: tuple[str, ...], floats: tuple[str, ...], counts: tuple[str, ...]
           ) -> pd.DataFrame:
    """The contract columns in contract order, typed; extra columns in the file are not carried."""
    frame = raw.loc[:, list(columns)].copy()
    for column in floats:  # an empty cell (an optional figure) is NaN
        frame[column] = frame[column].map(lambda text: math.nan if text == "" else parse_number(text)).astype(float)
    for column in counts:
        frame[column] = frame[column].map(parse_count).astype("int64")
    if "available" in frame.columns:
        frame["available"] = (frame["available"].str.lower() == "true").astype(bool)
    return frame


def load_catalog(directory: Path | None = None) -> Catalog:
    """Read and validate ``skus.csv`` and ``offers.csv`` from ``directory`` (default: the bundled catalog)."""
    folder = Path(directory) if directory is not None else paths.catalog_dir()
    no_skus = Problem(None, "sku", "the file has no SKU rows", "add at least one SKU row")
    skus = _typed(_validated(folder / "skus.csv", sku_schema(), SKU_COLUMNS, empty=no_skus), SKU_COLUMNS,
                  floats=(*SKU_UNITS, "fp8_tflops"), counts=("max_gpus_per_node",))
    offers = _typed(_validated(folder / "offers.csv", offer_schema(set(skus["sku"])), OFFER_COLUMNS), OFFER_COLUMNS,
                    floats=("usd_per_gpu_hour",), counts=("gpus_per_instance", "quota_gpus"))
    return Catalog(skus=skus, offers=offers)


# ----------------------------------------------------------------------------- display
def _region_matcher(catalog: Catalog, region: str) -> Callable[[pd.DataFrame], pd.Series]:
    """The first rule that matches anything wins: exact region key, the cloud's region name,
    a residency zone (us, eu, ...), then any region key containing the text."""
    offers = catalog.offers
    rules: list[Callable[[pd.DataFrame], pd.Series]] = [
        lambda f: f["region_key"] == region,
        lambda f: f["region"] == region,
        lambda f: f["geo"] == region.lower(),
        lambda f: f["region_key"].str.contains(region.lower(), regex=False),
    ]
    for rule in rules:
        if rule(offers).any():
            return rule
    return rules[0]


def check_region(catalog: Catalog, region: str, where: str = "--region") -> str:
    """``region`` if it matches at least one offer (by :func:`_region_matcher`'s rules); else an input error
    naming the region keys and zones that exist, since an empty table would not say whether the filter was
    mistyped or the region has no GPUs."""
    if not _region_matcher(catalog, region)(catalog.offers).any():
        raise InputError(f"no catalog region matches {region!r}", where=where,
                         fix=f"pass a region key ({', '.join(catalog.regions())}), a cloud's region name "
                             f"(us-east-1), a zone ({', '.join(sorted(catalog.offers['geo'].unique()))}) or part "
                             "of a region key")
    return region


def skus_table(
    catalog: Catalog, region: str | None = None, sku: str | None = None, tier: str | None = None
) -> list[dict[str, Any]]:
    """SKU specifications for display, in ``skus.csv`` order: every SKU, or with any filter only the SKUs of the
    offers :func:`offers_table` gives for it (the SKUs offered in ``region``, on ``tier``)."""
    specs = catalog.skus
    if region is not None or sku is not None or tier is not None:
        offered = {row["sku"] for row in offers_table(catalog, region=region, sku=sku, tier=tier)}
        specs = specs[specs["sku"].isin(offered)]
    rows: list[dict[str, Any]] = specs.to_dict("records")
    return rows


def offers_table(
    catalog: Catalog, region: str | None = None, sku: str | None = None, tier: str | None = None
) -> list[dict[str, Any]]:
    """Rows for display, sorted by region key, SKU and tier (reserved, on_demand, spot).

    ``region`` may be a region key (aws:us-east-1), a cloud's region name (us-east-1),
    a residency zone (eu) or a fragment of a region key (eu-west). An unknown SKU or
    tier is an input error; a region that matches nothing gives no rows.
    """
    if tier is not None and tier not in TIERS:
        raise InputError(f"unknown tier {tier!r}", fix=f"use one of {', '.join(TIERS)}")
    if sku is not None and sku not in set(catalog.skus["sku"]):
        raise InputError(f"unknown GPU SKU {sku!r}", fix=f"use one of {', '.join(catalog.skus['sku'])}")
    frame = catalog.offers
    if region is not None:
        frame = frame[_region_matcher(catalog, region)(frame)]
    if sku is not None:
        frame = frame[frame["sku"] == sku]
    if tier is not None:
        frame = frame[frame["tier"] == tier]
    order = {name: rank for rank, name in enumerate(TIERS)}
    frame = frame.assign(_tier_rank=frame["tier"].map(order)).sort_values(
        ["region_key", "sku", "_tier_rank"], kind="stable"
    )
    return [
        {
            "region_key": row.region_key,
            "sku": row.sku,
            "tier": row.tier,
            "usd_per_gpu_hour": float(row.usd_per_gpu_hour),
            "quota_gpus": int(row.quota_gpus),
            "assumption": row.assumption,
        }
        for row in frame.itertuples(index=False)
    ]

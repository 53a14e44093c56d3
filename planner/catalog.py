"""The GPU catalog: SKU specifications and priced offers, validated once at the front door.

Two files make a catalog (data dictionary: data/README.md, section "catalog"):

- ``skus.csv``: one row per GPU SKU, with memory (GB), memory bandwidth (GB/s), dense
  BF16/FP8 TFLOP/s, GPU-to-GPU bandwidth (GB/s), TDP (W) and GPUs per node.
- ``offers.csv``: one row per (region_key, sku, tier): the price in USD per GPU-hour,
  the instance it comes from, a planning quota in GPUs, and any assumption behind it.

Every problem found is reported with the file, the 1-based data row (the header is
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
from planner.errors import InputError

SKU_COLUMNS: tuple[str, ...] = (
    "sku", "vendor", "hbm_gb", "hbm_bandwidth_gb_per_s", "bf16_tflops", "fp8_tflops",
    "intranode_bandwidth_gb_per_s", "tdp_w", "max_gpus_per_node", "source",
)
OFFER_COLUMNS: tuple[str, ...] = (
    "cloud", "region", "region_key", "geo", "sku", "tier", "usd_per_gpu_hour", "gpus_per_instance",
    "instance_type", "quota_gpus", "available", "assumption", "source",
)
TIERS: tuple[str, ...] = ("reserved", "on_demand", "spot")
GEOS: tuple[str, ...] = ("us", "ca", "eu", "apac", "me", "sa")
SKU_POSITIVE_COLUMNS = ("hbm_gb", "hbm_bandwidth_gb_per_s", "bf16_tflops", "intranode_bandwidth_gb_per_s", "tdp_w")
TABLE_COLUMNS = ("region_key", "sku", "tier", "usd_per_gpu_hour", "quota_gpus", "assumption")
REBUILD_HINT = "or rebuild the bundled catalog with `python data/build/build_catalog.py`"
MAX_PROBLEMS_SHOWN = 20


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
        for column, value in (("region_key", region_key), ("sku", sku), ("tier", tier)):
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
class _Problems:
    """Collects every problem in one file, so a broken file is reported in one pass."""

    def __init__(self, path: Path):
        self.path = path
        self.items: list[tuple[str, str, str]] = []  # (location, problem, fix)

    def cell(self, row: int, column: str, problem: str, fix: str) -> None:
        """``row`` is the 0-based frame index; users see it 1-based, the header being file line 1."""
        location = f"row {row + 1} (file line {row + 2}; line 1 is the header), column '{column}'"
        self.items.append((location, problem, fix))

    def header(self, column: str, problem: str, fix: str) -> None:
        self.items.append((f"header (file line 1), column '{column}'", problem, fix))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        if len(self.items) == 1:
            location, problem, fix = self.items[0]
            raise InputError(problem, where=f"{self.path}, {location}", fix=f"{fix}, {REBUILD_HINT}")
        shown = self.items[:MAX_PROBLEMS_SHOWN]
        lines = [f"{location}: {problem} (fix: {fix})" for location, problem, fix in shown]
        more = len(self.items) - len(shown)
        if more:
            lines.append(f"... and {more} more")
        raise InputError(
            f"{len(self.items)} problems:\n  - " + "\n  - ".join(lines),
            where=self.path,
            fix=f"correct the cells listed above, {REBUILD_HINT}",
        )


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


def _check_columns(frame: pd.DataFrame, columns: tuple[str, ...], problems: _Problems) -> None:
    for column in columns:
        if column not in frame.columns:
            problems.header(
                column, f"missing column '{column}'", f"add a '{column}' column (expected: {', '.join(columns)})"
            )
    problems.raise_if_any()  # row checks need every column


def _parse_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _parse_int(text: str) -> int | None:
    value = _parse_float(text)
    return int(value) if value is not None and value.is_integer() else None


def _positive_float(problems: _Problems, row: int, column: str, text: str, unit: str) -> float:
    value = _parse_float(text)
    if value is None or value <= 0:
        problem = f"{column} is empty" if text == "" else f"{text!r} is not a positive number"
        problems.cell(row, column, problem, f"write a number > 0 in {unit}")
        return math.nan
    return value


def _count(problems: _Problems, row: int, column: str, text: str, minimum: int) -> int:
    value = _parse_int(text)
    if value is None or value < minimum:
        problems.cell(row, column, f"{text!r} is not an integer >= {minimum}", f"write a whole number >= {minimum}")
        return minimum
    return value


def _required_text(problems: _Problems, row: int, column: str, text: str, fix: str) -> None:
    if text == "":
        problems.cell(row, column, f"{column} is empty", fix)


def _validate_skus(path: Path) -> pd.DataFrame:
    raw = _read_raw(path)
    problems = _Problems(path)
    _check_columns(raw, SKU_COLUMNS, problems)
    records: list[dict[str, Any]] = []
    first_row: dict[str, int] = {}
    for i, cells in enumerate(raw.to_dict("records")):
        name = cells["sku"]
        _required_text(problems, i, "sku", name, "name the SKU, e.g. H100")
        if name and name in first_row:
            problems.cell(
                i, "sku", f"duplicate SKU {name!r} (first on row {first_row[name] + 1})", "keep one row per SKU"
            )
        first_row.setdefault(name, i)
        record: dict[str, Any] = {"sku": name, "vendor": cells["vendor"], "source": cells["source"]}
        _required_text(problems, i, "vendor", cells["vendor"], "name the vendor, e.g. NVIDIA")
        for column in SKU_POSITIVE_COLUMNS:
            record[column] = _positive_float(problems, i, column, cells[column], _unit(column))
        fp8 = cells["fp8_tflops"]
        record["fp8_tflops"] = math.nan if fp8 == "" else _positive_float(problems, i, "fp8_tflops", fp8, "TFLOP/s")
        record["max_gpus_per_node"] = _count(problems, i, "max_gpus_per_node", cells["max_gpus_per_node"], 1)
        _required_text(
            problems, i, "source", cells["source"],
            "say where the figures came from, e.g. 'epoch:NVIDIA H100 SXM5 80GB'",
        )
        records.append(record)
    if not records:
        problems.header("sku", "the file has no SKU rows", "add at least one SKU row")
    problems.raise_if_any()
    return _typed(records, SKU_COLUMNS)


def _unit(column: str) -> str:
    return {"hbm_gb": "GB", "tdp_w": "W", "bf16_tflops": "TFLOP/s"}.get(column, "GB/s")


def _validate_offers(path: Path, known_skus: set[str]) -> pd.DataFrame:
    raw = _read_raw(path)
    problems = _Problems(path)
    _check_columns(raw, OFFER_COLUMNS, problems)
    records: list[dict[str, Any]] = []
    first_row: dict[tuple[str, str, str], int] = {}
    for i, cells in enumerate(raw.to_dict("records")):
        record: dict[str, Any] = {key: cells[key] for key in OFFER_COLUMNS}
        _required_text(problems, i, "cloud", cells["cloud"], "name the cloud, e.g. aws")
        _required_text(problems, i, "region", cells["region"], "name the cloud's region, e.g. us-east-1")
        expected_key = f"{cells['cloud']}:{cells['region']}"
        if cells["region_key"] != expected_key:
            problems.cell(i, "region_key", f"{cells['region_key']!r} does not match cloud and region",
                          f"write '{expected_key}' (\"<cloud>:<region>\")")
        _check_choice(problems, i, "geo", cells["geo"], GEOS)
        _check_choice(problems, i, "tier", cells["tier"], TIERS)
        if cells["sku"] not in known_skus:
            problems.cell(i, "sku", f"unknown SKU {cells['sku']!r} (not in skus.csv)",
                          f"use one of {', '.join(sorted(known_skus))}, or add the SKU to skus.csv")
        record["usd_per_gpu_hour"] = _positive_float(
            problems, i, "usd_per_gpu_hour", cells["usd_per_gpu_hour"], "USD per GPU-hour"
        )
        record["gpus_per_instance"] = _count(problems, i, "gpus_per_instance", cells["gpus_per_instance"], 1)
        record["quota_gpus"] = _count(problems, i, "quota_gpus", cells["quota_gpus"], 0)
        available = cells["available"].lower()
        if available not in ("true", "false"):
            problems.cell(i, "available", f"{cells['available']!r} is not true or false", "write true or false")
        record["available"] = available == "true"
        _required_text(
            problems, i, "source", cells["source"],
            "say where the price came from, e.g. 'skypilot-catalog v8 aws/vms.csv p5.48xlarge'",
        )
        key = (cells["region_key"], cells["sku"], cells["tier"])
        if key in first_row:
            problems.cell(i, "tier", f"duplicate offer {'/'.join(key)} (first on row {first_row[key] + 1})",
                          "keep one row per (region_key, sku, tier)")
        first_row.setdefault(key, i)
        records.append(record)
    problems.raise_if_any()
    return _typed(records, OFFER_COLUMNS)


def _check_choice(problems: _Problems, row: int, column: str, text: str, allowed: tuple[str, ...]) -> None:
    if text not in allowed:
        problems.cell(row, column, f"{text!r} is not a valid {column}", f"use one of {', '.join(allowed)}")


def _typed(records: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    """The contract columns in contract order, typed; extra columns in the file are not carried."""
    frame = pd.DataFrame.from_records(records, columns=list(columns))
    for column in columns:
        if frame[column].dtype == object:
            frame[column] = frame[column].astype(str)
    return frame


def load_catalog(directory: Path | None = None) -> Catalog:
    """Read and validate ``skus.csv`` and ``offers.csv`` from ``directory`` (default: the bundled catalog)."""
    folder = Path(directory) if directory is not None else paths.catalog_dir()
    skus = _validate_skus(folder / "skus.csv")
    offers = _validate_offers(folder / "offers.csv", set(skus["sku"]))
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

"""The schemas of the catalog's two files, ``skus.csv`` and ``offers.csv``.

Both are checked as text (every cell as the user wrote it, stripped), so a problem can
quote the cell; :func:`parse_number` is how a cell becomes a number, here and when the
catalog types its frames.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import TYPE_CHECKING

import pandas as pd

from planner.contracts.columns import OFFER_KEY, SKU_COLUMNS
from planner.contracts.names import CLOUD_NAMES, TIER_NAMES, ZONE_NAMES, region_key
from planner.contracts.schemas.base import FileSchema, cell_check, row_check

if TYPE_CHECKING:
    import pandera.pandas as pa

SKU_UNITS = {"hbm_gb": "GB", "hbm_bandwidth_gb_per_s": "GB/s", "bf16_tflops": "TFLOP/s",
             "intranode_bandwidth_gb_per_s": "GB/s", "tdp_w": "W"}
"""The positive figures of a SKU and their units."""


def parse_number(text: str) -> float | None:
    """A finite number as Python reads it ('8', '8.0', '1e3'), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_count(text: str) -> int | None:
    value = parse_number(text)
    return int(value) if value is not None and value.is_integer() else None


def _positive(column: str, unit: str, *, optional: bool = False) -> pa.Check:
    def passes(cells: pd.Series) -> pd.Series:
        good = cells.map(lambda text: (parse_number(text) or 0.0) > 0).astype(bool)
        return good | (cells == "") if optional else good

    def problem(frame: pd.DataFrame, row: int) -> str:
        text = frame[column].iloc[row]
        return f"{column} is empty" if text == "" else f"{text!r} is not a positive number"

    return cell_check("positive", passes, problem, f"write a number > 0 in {unit}")


def _count(column: str, minimum: int) -> pa.Check:
    def at_least(text: str) -> bool:
        value = parse_count(text)
        return value is not None and value >= minimum

    def passes(cells: pd.Series) -> pd.Series:
        return cells.map(at_least).astype(bool)

    return cell_check("count", passes, lambda f, r: f"{f[column].iloc[r]!r} is not an integer >= {minimum}",
                      f"write a whole number >= {minimum}")


def _text(column: str, fix: str) -> pa.Check:
    return cell_check("required", lambda cells: cells != "", f"{column} is empty", fix)


def _choice(column: str, allowed: Collection[str], fix: str | None = None) -> pa.Check:
    return cell_check("choice", lambda cells: cells.isin(list(allowed)),
                      lambda f, r: f"{f[column].iloc[r]!r} is not a valid {column}",
                      fix or f"use one of {', '.join(allowed)}")


def _first_rows(keys: pd.DataFrame) -> pd.Series:
    """For each row, the 0-based position of the first row with the same key."""
    positions = pd.Series(range(len(keys)), index=keys.index)
    return positions.groupby([keys[c] for c in keys.columns], sort=False).transform("min")


def sku_schema() -> FileSchema:
    """``skus.csv``: one row per SKU, its memory, bandwidths, TFLOP/s, TDP and GPUs per node."""

    def unique_name(frame: pd.DataFrame) -> pd.Series:
        return ~((frame["sku"] != "") & frame["sku"].duplicated(keep="first"))

    def duplicate(frame: pd.DataFrame, row: int) -> str:
        first = int(_first_rows(frame[["sku"]]).iloc[row])
        return f"duplicate SKU {frame['sku'].iloc[row]!r} (first on row {first + 1})"

    columns: dict[str, list[pa.Check]] = {name: [] for name in SKU_COLUMNS}
    columns["sku"] = [_text("sku", "name the SKU, e.g. H100")]
    columns["vendor"] = [_text("vendor", "name the vendor, e.g. NVIDIA")]
    for name, unit in SKU_UNITS.items():
        columns[name] = [_positive(name, unit)]
    columns["fp8_tflops"] = [_positive("fp8_tflops", "TFLOP/s", optional=True)]
    columns["max_gpus_per_node"] = [_count("max_gpus_per_node", 1)]
    columns["source"] = [_text("source", "say where the figures came from, e.g. 'epoch:NVIDIA H100 SXM5 80GB'")]
    return FileSchema(columns, rows=[row_check("sku", "unique", unique_name, duplicate, "keep one row per SKU")])


def offer_schema(known_skus: Collection[str]) -> FileSchema:
    """``offers.csv``: one priced offer per (region_key, sku, tier), from a SKU of ``skus.csv``."""
    skus = sorted(known_skus)

    def key_matches(frame: pd.DataFrame) -> pd.Series:
        return frame["region_key"] == frame["cloud"] + ":" + frame["region"]

    def expected_key(frame: pd.DataFrame, row: int) -> str:
        return region_key(frame["cloud"].iloc[row], frame["region"].iloc[row])

    def unique_offer(frame: pd.DataFrame) -> pd.Series:
        return ~frame.duplicated(subset=list(OFFER_KEY), keep="first")

    def duplicate(frame: pd.DataFrame, row: int) -> str:
        first = int(_first_rows(frame[list(OFFER_KEY)]).iloc[row])
        key = "/".join(frame[c].iloc[row] for c in OFFER_KEY)
        return f"duplicate offer {key} (first on row {first + 1})"

    def cloud_problem(frame: pd.DataFrame, row: int) -> str:
        text = frame["cloud"].iloc[row]
        return "cloud is empty" if text == "" else f"{text!r} is not a known cloud"

    columns: dict[str, list[pa.Check]] = {
        "cloud": [cell_check("choice", lambda c: c.isin(list(CLOUD_NAMES)), cloud_problem,
                             f"name the cloud, one of {', '.join(CLOUD_NAMES)} (a new cloud is added to "
                             "planner.contracts.Cloud)")],
        "region": [_text("region", "name the cloud's region, e.g. us-east-1")],
        "region_key": [],
        "geo": [_choice("geo", ZONE_NAMES)],
        "sku": [cell_check("known", lambda c: c.isin(skus),
                           lambda f, r: f"unknown SKU {f['sku'].iloc[r]!r} (not in skus.csv)",
                           f"use one of {', '.join(skus)}, or add the SKU to skus.csv")],
        "tier": [_choice("tier", TIER_NAMES)],
        "usd_per_gpu_hour": [_positive("usd_per_gpu_hour", "USD per GPU-hour")],
        "gpus_per_instance": [_count("gpus_per_instance", 1)],
        "instance_type": [],
        "quota_gpus": [_count("quota_gpus", 0)],
        "available": [cell_check("boolean", lambda c: c.str.lower().isin(["true", "false"]),
                                 lambda f, r: f"{f['available'].iloc[r]!r} is not true or false",
                                 "write true or false")],
        "assumption": [],
        "source": [_text("source", "say where the price came from, e.g. "
                                   "'skypilot-catalog v8 aws/vms.csv p5.48xlarge'")],
    }
    rows = [
        row_check("region_key", "region_key", key_matches,
                  lambda f, r: f"{f['region_key'].iloc[r]!r} does not match cloud and region",
                  lambda f, r: f"write '{expected_key(f, r)}' (\"<cloud>:<region>\")"),
        row_check("tier", "unique", unique_offer, duplicate, "keep one row per (region_key, sku, tier)"),
    ]
    return FileSchema(columns, rows=rows)

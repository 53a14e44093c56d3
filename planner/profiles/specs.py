"""GPU SKU specifications the profiles need, read from the catalog's ``skus.csv``.

Six columns matter here: ``sku``, ``hbm_gb`` (GB = 1e9 bytes), ``hbm_bandwidth_gb_per_s``
(GB/s), ``bf16_tflops`` (dense BF16 tensor TFLOP/s), ``intranode_bandwidth_gb_per_s`` (GB/s
per GPU over NVLink, Infinity Fabric or PCIe: what a tensor-parallel all-reduce crosses) and
``max_gpus_per_node`` (the largest tensor-parallel group that stays on one node's interconnect).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.storage import read_table

PCIE_CEILING_GB_PER_S = 200.0
"""Above PCIe Gen5 x16 (128 GB/s both ways): an interconnect this fast is a GPU fabric (NVLink, Infinity Fabric)."""
SPEC_COLUMNS = ("sku", "hbm_gb", "hbm_bandwidth_gb_per_s", "bf16_tflops", "intranode_bandwidth_gb_per_s",
                "max_gpus_per_node")


@dataclass(frozen=True)
class SkuSpec:
    sku: str
    hbm_gb: float
    hbm_bandwidth_gb_per_s: float
    bf16_tflops: float
    intranode_bandwidth_gb_per_s: float
    max_gpus_per_node: int
    vendor: str = "NVIDIA"

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gb * 1e9

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_gb_per_s * 1e9

    @property
    def bf16_flops_per_s(self) -> float:
        return self.bf16_tflops * 1e12

    @property
    def link_bytes_per_s(self) -> float:
        return self.intranode_bandwidth_gb_per_s * 1e9

    @property
    def pcie_only(self) -> bool:
        """No GPU-to-GPU fabric: tensor-parallel traffic crosses PCIe (L4, L40S)."""
        return self.intranode_bandwidth_gb_per_s < PCIE_CEILING_GB_PER_S


def specs_from_frame(frame: pd.DataFrame, where: str | Path) -> dict[str, SkuSpec]:
    """Validate a SKU table and return its specs keyed by SKU name, in file order."""
    missing = [column for column in SPEC_COLUMNS if column not in frame.columns]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}",
            where=where,
            fix=f"the SKU table needs columns {', '.join(SPEC_COLUMNS)}",
        )
    specs: dict[str, SkuSpec] = {}
    for position, row in enumerate(frame.itertuples(index=False)):
        location = f"{where}, row {position + 1} (line {position + 2})"
        sku = str(row.sku).strip()
        if not sku or sku == "nan":
            raise InputError("empty SKU name", where=f"{location}, column 'sku'", fix="name the SKU")
        if sku in specs:
            raise InputError(f"duplicate SKU {sku!r}", where=f"{location}, column 'sku'", fix="keep one row per SKU")
        values: dict[str, float] = {}
        for column in SPEC_COLUMNS[1:]:
            value = pd.to_numeric(getattr(row, column), errors="coerce")
            if not np.isfinite(value) or value <= 0:
                raise InputError(
                    f"{column} must be a positive number, got {getattr(row, column)!r}",
                    where=f"{location}, column '{column}'",
                    fix=f"give SKU {sku} a positive {column}",
                )
            values[column] = float(value)
        specs[sku] = SkuSpec(
            sku=sku,
            hbm_gb=values["hbm_gb"],
            hbm_bandwidth_gb_per_s=values["hbm_bandwidth_gb_per_s"],
            bf16_tflops=values["bf16_tflops"],
            intranode_bandwidth_gb_per_s=values["intranode_bandwidth_gb_per_s"],
            max_gpus_per_node=int(values["max_gpus_per_node"]),
            vendor=str(getattr(row, "vendor", "NVIDIA")),
        )
    return specs


def read_sku_specs(path: Path) -> dict[str, SkuSpec]:
    """Read and validate the catalog's SKU table."""
    return specs_from_frame(read_table(path), path)

"""GPU SKU specifications for the catalog: Epoch AI figures, with vendor datasheet fills for gaps.

Convention: every FLOP figure is DENSE (no 2:4 structured sparsity). Epoch lists dense
figures (its notes say "without sparsity", and for the L4 it halves NVIDIA's sparse
number). Vendor datasheets print the sparse figure with an asterisk; a fill below
quotes the dense one, i.e. the sparse figure / 2.

Units: hbm_gb = bytes / 1e9 (decimal GB, as Epoch and the vendors print them);
hbm_bandwidth_gb_per_s and intranode_bandwidth_gb_per_s = bytes/s / 1e9;
*_tflops = FLOP/s / 1e12; tdp_w in watts. Intranode bandwidth is the per-GPU total
(both directions) of the GPU-to-GPU link: NVLink, AMD Infinity Fabric, or PCIe when the
part has no GPU link.
"""

from __future__ import annotations

import pandas as pd

SKU_COLUMNS = [
    "sku", "vendor", "hbm_gb", "hbm_bandwidth_gb_per_s", "bf16_tflops", "fp8_tflops",
    "intranode_bandwidth_gb_per_s", "tdp_w", "max_gpus_per_node", "source",
]

# Epoch column -> (catalog column, divisor to the catalog unit)
EPOCH_FIELDS = {
    "Memory (bytes)": ("hbm_gb", 1e9),
    "Memory bandwidth (byte/s)": ("hbm_bandwidth_gb_per_s", 1e9),
    "Tensor-FP16/BF16 performance (FLOP/s)": ("bf16_tflops", 1e12),
    "FP8 performance (FLOP/s)": ("fp8_tflops", 1e12),
    "Intranode bandwidth (byte/s)": ("intranode_bandwidth_gb_per_s", 1e9),
    "TDP (W)": ("tdp_w", 1.0),
}

# sku -> Epoch "Hardware name" (None: Epoch has no row for it)
EPOCH_ROW = {
    "A100-40GB": "NVIDIA A100 SXM4 40 GB",
    "A100-80GB": "NVIDIA A100 SXM4 80 GB",
    "H100": "NVIDIA H100 SXM5 80GB",
    "H200": "NVIDIA H200 SXM",
    "B200": "NVIDIA B200",
    "B300": "NVIDIA B300 (Blackwell Ultra)",
    "L40S": None,
    "L4": "NVIDIA L4",
    "MI300X": "AMD Instinct MI300X",
}

# Vendor datasheet figures for Epoch gaps: sku -> column -> (value in catalog unit, citation).
DATASHEET_FILLS: dict[str, dict[str, tuple[float | None, str]]] = {
    "A100-40GB": {"fp8_tflops": (None, "none: the A100 has no FP8 tensor cores (NVIDIA A100 datasheet)")},
    "A100-80GB": {"fp8_tflops": (None, "none: the A100 has no FP8 tensor cores (NVIDIA A100 datasheet)")},
    "H100": {"fp8_tflops": (1979.0, "vendor datasheet (NVIDIA H100 SXM: 3958 sparse / 2, dense)")},
    "H200": {"intranode_bandwidth_gb_per_s": (900.0, "vendor datasheet (NVIDIA H200 SXM: NVLink 900 GB/s)")},
    "B200": {"intranode_bandwidth_gb_per_s": (1800.0, "vendor datasheet (NVIDIA HGX B200: NVLink 5 1.8 TB/s per GPU)")},
    "L4": {
        "fp8_tflops": (242.5, "vendor datasheet (NVIDIA L4: 485 sparse / 2, dense)"),
        "intranode_bandwidth_gb_per_s": (64.0, "vendor datasheet (NVIDIA L4: PCIe Gen4 x16 64 GB/s, no NVLink)"),
    },
    "L40S": {
        "hbm_gb": (48.0, "vendor datasheet (NVIDIA L40S: 48 GB GDDR6)"),
        "hbm_bandwidth_gb_per_s": (864.0, "vendor datasheet (NVIDIA L40S: 864 GB/s)"),
        "bf16_tflops": (362.05, "vendor datasheet (NVIDIA L40S: 733 sparse, 362.05 dense)"),
        "fp8_tflops": (733.0, "vendor datasheet (NVIDIA L40S: 1466 sparse, 733 dense)"),
        "intranode_bandwidth_gb_per_s": (64.0, "vendor datasheet (NVIDIA L40S: PCIe Gen4 x16 64 GB/s, no NVLink)"),
        "tdp_w": (350.0, "vendor datasheet (NVIDIA L40S: max power 350 W)"),
    },
    "MI300X": {
        "fp8_tflops": (2614.9, "vendor datasheet (AMD Instinct MI300X: 5229.8 sparse / 2, dense)"),
        "intranode_bandwidth_gb_per_s": (
            896.0, "vendor datasheet (AMD Instinct MI300X: 7 Infinity Fabric links x 128 GB/s)"
        ),
    },
}

VENDOR_WITHOUT_EPOCH = {"L40S": "NVIDIA"}

# Largest common single-node configuration (GPUs on one baseboard or in one server).
MAX_GPUS_PER_NODE = {
    "A100-40GB": (8, "HGX A100 8-GPU"), "A100-80GB": (8, "HGX A100 8-GPU"), "H100": (8, "HGX H100 8-GPU"),
    "H200": (8, "HGX H200 8-GPU"), "B200": (8, "HGX B200 8-GPU"), "B300": (8, "HGX B300 8-GPU"),
    "L40S": (8, "8-GPU PCIe servers, e.g. AWS g6e.48xlarge"), "L4": (8, "8-GPU PCIe servers, e.g. GCP g2-standard-96"),
    "MI300X": (8, "AMD Instinct MI300X 8-GPU platform"),
}


def _epoch_value(row: pd.Series | None, column: str) -> float | None:
    if row is None:
        return None
    text = str(row[column]).strip()
    return float(text) if text else None


def build_skus(epoch: pd.DataFrame) -> pd.DataFrame:
    """One row per SKU, values formatted as text so the CSV is byte-stable."""
    by_name = {str(r["Hardware name"]): r for _, r in epoch.iterrows()}
    rows = []
    for sku in sorted(EPOCH_ROW):
        name = EPOCH_ROW[sku]
        if name is not None and name not in by_name:
            raise SystemExit(f"catalog_sku_specs: Epoch table has no row named {name!r} for {sku}")
        row = by_name.get(name) if name else None
        record: dict[str, str] = {"sku": sku}
        record["vendor"] = str(row["Manufacturer"]) if row is not None else VENDOR_WITHOUT_EPOCH[sku]
        notes = [f"epoch:{name}" if name else "epoch: no row"]
        fills = DATASHEET_FILLS.get(sku, {})
        for epoch_column, (column, divisor) in EPOCH_FIELDS.items():
            value = _epoch_value(row, epoch_column)
            if value is not None:
                value /= divisor
            elif column in fills:
                value, citation = fills[column]
                notes.append(f"{column}={citation}")
            else:
                raise SystemExit(f"catalog_sku_specs: {sku} has no {column} in Epoch and no datasheet fill")
            record[column] = "" if value is None else _fmt(value)
        gpus, why = MAX_GPUS_PER_NODE[sku]
        record["max_gpus_per_node"] = str(gpus)
        notes.append(f"max_gpus_per_node={why}")
        record["source"] = "; ".join(notes)
        rows.append(record)
    return pd.DataFrame(rows, columns=SKU_COLUMNS)


def _fmt(value: float) -> str:
    value = round(value, 4)
    return str(int(value)) if value.is_integer() else repr(value)

"""Build the bundled GPU catalog (data/catalog/skus.csv and offers.csv) from public sources.

Inputs (read-only, under a sources folder; by default the vendored copies in data/sources/):
  gpu_specs_epoch/ml_hardware.csv      Epoch AI ML hardware table (CC-BY-4.0)
  gpu_pricing_skypilot/*.csv           SkyPilot catalog v8 rows, USD per instance-hour

Run from the repository root:
  python data/build/build_catalog.py [SOURCES_DIR] [--out data/catalog]

The output is deterministic: every choice below is a fixed rule, rows are sorted, and
floats are written with a fixed rounding, so two runs give byte-identical files.

The maths, per offer row:
  usd_per_gpu_hour = instance_usd_per_hour / gpus_per_instance
  AWS      instance price per region: on-demand = max over availability zones (they agree in
           this snapshot; a disagreement is flagged); spot = median over the zones that list one.
  GCP      instance price per zone = accelerator row + host-VM row of the same zone, then the
           same per-region aggregation as AWS.
  reserved = on_demand x (1 - d_cloud), d_cloud from RESERVED_DISCOUNT (an assumption).
Where several instance types price the same (cloud, region, sku, tier) the cheapest per
GPU-hour (compared to a tenth of a cent) is kept; ties go to the larger instance (a full
node serves every tensor-parallel degree), then to the instance-type name.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCES_DIR = REPO_ROOT / "data" / "sources"
sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]
from planner.storage import write_table_atomic  # noqa: E402

from catalog_sku_specs import SKU_COLUMNS, build_skus  # noqa: E402  (sibling module)

SOURCE_TAG = "skypilot-catalog v8"
PRICE_DECIMALS = 6  # USD per GPU-hour, well below a cent
RANK_DECIMALS = 3  # prices within a tenth of a cent rank as tied (8 x 1-GPU list prices differ in the 5th decimal)
EQUAL_TOLERANCE_USD = 0.0005  # SkyPilot rounds spot prices to 4 decimals: closer than this is "equal"
OUTLIER_RATIO = 1.5  # on-demand price this many times away from the cloud's median for the SKU
OFFER_COLUMNS = [
    "cloud", "region", "region_key", "geo", "sku", "tier", "usd_per_gpu_hour", "gpus_per_instance",
    "instance_type", "quota_gpus", "available", "assumption", "source",
]
TIER_ORDER = {"reserved": 0, "on_demand": 1, "spot": 2}

# Assumed 1-year commitment discounts off on-demand list price (public list-level, not quotes).
RESERVED_DISCOUNT = {
    "aws": (0.35, "35% aws 1-yr commitment discount"),
    "gcp": (0.37, "37% gcp 1-yr committed-use discount"),
    "nebius": (0.30, "30% nebius long-term commitment discount"),
    "lambda": (0.20, "20% lambda 1-yr reserved discount"),
}
# Planning quota in GPUs per (region, sku, tier). Real quotas are per account; see the README.
QUOTA_GPUS = {"B200": 32, "B300": 16, "L4": 128, "L40S": 128}
DEFAULT_QUOTA_GPUS = 64

AWS_INSTANCE_SKU = {
    "p4d.24xlarge": "A100-40GB", "p4de.24xlarge": "A100-80GB", "p5.48xlarge": "H100",
    "p5.4xlarge": "H100", "p5e.48xlarge": "H200", "p5en.48xlarge": "H200",
    "p6-b200.48xlarge": "B200", "p6-b300.48xlarge": "B300", "g6e.xlarge": "L40S",
}
# GCP (AcceleratorName, AcceleratorCount) -> (sku, host instance type, host priced in the subset?)
GCP_ACCELERATORS = {
    ("H100", 8): ("H100", "a3-highgpu-8g", True),
    ("H100", 1): ("H100", "a3-highgpu-1g", True),
    ("H100-MEGA", 8): ("H100", "a3-megagpu-8g", True),
    ("H200", 8): ("H200", "a3-ultragpu-8g", True),
    ("B200", 8): ("B200", "a4-highgpu-8g", True),
    ("A100", 1): ("A100-40GB", "a2-highgpu-1g", False),
    ("A100", 8): ("A100-40GB", "a2-highgpu-8g", False),
    ("A100-80GB", 1): ("A100-80GB", "a2-ultragpu-1g", False),
    ("A100-80GB", 8): ("A100-80GB", "a2-ultragpu-8g", False),
    ("L4", 1): ("L4", "g2-standard-4", False),
}
LAMBDA_INSTANCE_SKU = {
    "gpu_1x_a100_sxm4": "A100-40GB", "gpu_8x_a100_80gb_sxm4": "A100-80GB", "gpu_8x_h100_sxm5": "H100",
    "gpu_1x_b200_sxm6": "B200", "gpu_2x_b200_sxm6": "B200", "gpu_8x_b200_sxm6": "B200",
}
# PCIe parts differ from the SXM rows in skus.csv (lower bandwidth and FLOPs), so they are not priced as them.
LAMBDA_PCIE = {"gpu_1x_a100": "A100 40GB PCIe", "gpu_1x_h100_pcie": "H100 PCIe"}
LAMBDA_REGION = "us"
NEBIUS_SKU = {"H100": "H100", "H200": "H200", "B200": "B200", "L40S": "L40S"}

# Residency zone by region-name prefix, longest prefix first wins.
GEO_PREFIXES = {
    "aws": {"us-": "us", "ca-": "ca", "eu-": "eu", "ap-": "apac", "me-": "me", "sa-": "sa", "il-": "me"},
    "gcp": {"us-": "us", "northamerica-": "ca", "europe-": "eu", "asia-": "apac", "australia-": "apac",
            "me-": "me", "southamerica-": "sa"},
    "nebius": {"us-": "us", "eu-": "eu", "me-": "me"},
    "lambda": {"us": "us"},
}


@dataclass
class Candidate:
    """One priced way to rent a SKU in a region on a tier, before the cheapest is chosen."""

    cloud: str
    region: str
    sku: str
    tier: str
    usd_per_gpu_hour: float
    gpus_per_instance: int
    instance_type: str
    source: str
    notes: list[str] = field(default_factory=list)


@dataclass
class BuildLog:
    """What the build dropped or chose, printed so every judgement call is visible."""

    lines: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.lines.append(text)


def _num(text: str) -> float | None:
    text = str(text).strip()
    return float(text) if text else None


def _lookup(table: dict, key: object, what: str) -> object:
    """A mapping entry, or a build failure that says which table to extend."""
    if key not in table:
        raise SystemExit(f"build_catalog: unknown {what} {key!r}; add it to the mapping tables at the top")
    return table[key]


def _read(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise SystemExit(f"build_catalog: missing input {path}")
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _equal(a: float, b: float) -> bool:
    return abs(a - b) <= EQUAL_TOLERANCE_USD


@dataclass
class RegionPrice:
    """One instance type's price in one region, aggregated over its zones."""

    on_demand: float | None
    spot: float | None
    spot_zones: int
    on_demand_notes: list[str]
    spot_notes: list[str]


def aggregate_zones(zones: list[tuple[float | None, float | None]]) -> RegionPrice:
    """(on-demand, spot) per zone -> on-demand = max over zones, spot = median over zones listing one."""
    on_demand = [od for od, _ in zones if od is not None]
    spot = [sp for _, sp in zones if sp is not None]
    od_notes, spot_notes = [], []
    if on_demand and max(on_demand) - min(on_demand) > EQUAL_TOLERANCE_USD:
        od_notes.append(f"zones disagree on on-demand ({min(on_demand)}..{max(on_demand)}): max kept")
    equal = sum(1 for od, sp in zones if od is not None and sp is not None and _equal(od, sp))
    if equal:
        spot_notes.append(f"spot equals on-demand in {equal} of {len(spot)} zones (kept in the median)")
    return RegionPrice(max(on_demand) if on_demand else None, statistics.median(spot) if spot else None,
                       len(spot), od_notes, spot_notes)


def aws_candidates(pricing: Path, log: BuildLog) -> list[Candidate]:
    rows = _read(pricing / "aws_gpu_vms_subset.csv")
    out: list[Candidate] = []
    for (itype, region), group in rows.groupby(["InstanceType", "Region"], sort=True):
        sku = _lookup(AWS_INSTANCE_SKU, itype, "AWS instance type")
        gpus = int(group["AcceleratorCount"].iloc[0])
        price = aggregate_zones([(_num(r.Price), _num(r.SpotPrice)) for r in group.itertuples()])
        src = f"{SOURCE_TAG} aws/vms.csv {itype} {region} ({len(group)} AZ rows"
        if price.on_demand is None:
            log.add(f"aws {itype} {region}: no on-demand price in any AZ -> no on_demand/reserved row")
        else:
            out.append(Candidate("aws", region, sku, "on_demand", price.on_demand / gpus, gpus, itype, src + ")",
                                 price.on_demand_notes))
        if price.spot is None:
            log.add(f"aws {itype} {region}: no spot price in any AZ -> no spot row")
        else:
            notes = price.spot_notes + (["no on-demand price published for this instance"]
                                        if price.on_demand is None else [])
            out.append(Candidate("aws", region, sku, "spot", price.spot / gpus, gpus, itype,
                                 src + f"; spot = median of {price.spot_zones} AZ prices)", notes))
    return out


def gcp_candidates(pricing: Path, log: BuildLog) -> list[Candidate]:
    """Per zone: instance = accelerator row + host row of the same zone; then aggregate per region."""
    accel = _read(pricing / "gcp_gpu_accelerator_rows_subset.csv")
    hosts = _read(pricing / "gcp_gpu_host_vms_subset.csv")
    host_by_zone = {(r.InstanceType, r.AvailabilityZone): (_num(r.Price), _num(r.SpotPrice))
                    for r in hosts.itertuples()}
    out: list[Candidate] = []
    for (name, count, region), group in accel.groupby(["AcceleratorName", "AcceleratorCount", "Region"], sort=True):
        gpus = int(count)
        sku, host_type, host_in_subset = _lookup(GCP_ACCELERATORS, (name, gpus), "GCP accelerator shape")
        zones: list[tuple[float | None, float | None]] = []
        notes: set[str] = set()
        dropped: list[str] = []
        for r in group.itertuples():
            acc_od, acc_spot = _num(r.Price), _num(r.SpotPrice)
            if not host_in_subset:
                zones.append((acc_od, acc_spot))
                notes.add(f"host {host_type} not in the source subset: accelerator-only price, understated")
                continue
            host = host_by_zone.get((host_type, r.AvailabilityZone))
            if host is None:
                dropped.append(r.AvailabilityZone)
                continue
            host_od, host_spot = host
            zones.append((None if acc_od is None or host_od is None else acc_od + host_od,
                          None if acc_spot is None or host_spot is None else acc_spot + host_spot))
            if host_od == 0:
                notes.add(f"host {host_type} listed at $0: price = accelerator row only")
        if dropped:
            log.add(f"gcp {name} x{gpus} {region}: no {host_type} host row in zone(s) {', '.join(dropped)}"
                    + (" -> zone(s) dropped" if zones else " -> region not priced for this shape"))
        if not zones:
            continue
        price = aggregate_zones(zones)
        label = f"{name} x{gpus}" + (f" + {host_type}" if host_in_subset else "")
        src = f"{SOURCE_TAG} gcp/vms.csv {label} {region} ({len(zones)} zone rows"
        if price.on_demand is not None:
            out.append(Candidate("gcp", region, sku, "on_demand", price.on_demand / gpus, gpus, host_type,
                                 src + ")", sorted(notes) + price.on_demand_notes))
        if price.spot is None:
            log.add(f"gcp {label} {region}: no spot price -> no spot row")
        else:
            out.append(Candidate("gcp", region, sku, "spot", price.spot / gpus, gpus, host_type,
                                 src + f"; spot = median of {price.spot_zones} zone prices)",
                                 sorted(notes) + price.spot_notes))
    return out


def nebius_candidates(pricing: Path, log: BuildLog) -> list[Candidate]:
    out: list[Candidate] = []
    for r in _read(pricing / "nebius_vms.csv").itertuples():
        sku, gpus = _lookup(NEBIUS_SKU, r.AcceleratorName, "Nebius accelerator"), int(r.AcceleratorCount)
        src = f"{SOURCE_TAG} nebius/vms.csv {r.InstanceType} {r.Region}"
        out.append(Candidate("nebius", r.Region, sku, "on_demand", float(r.Price) / gpus, gpus, r.InstanceType, src))
        spot = _num(r.SpotPrice)
        if spot is None:
            log.add(f"nebius {r.InstanceType} {r.Region}: no spot price -> no spot row")
        else:
            out.append(Candidate("nebius", r.Region, sku, "spot", spot / gpus, gpus, r.InstanceType, src))
    return out


def lambda_candidates(pricing: Path, log: BuildLog) -> list[Candidate]:
    out: list[Candidate] = []
    for r in _read(pricing / "lambda_vms_partial.csv").itertuples():
        sku = LAMBDA_INSTANCE_SKU.get(r.InstanceType)
        if sku is None:
            why = (f"{LAMBDA_PCIE[r.InstanceType]} is not the SXM part in skus.csv" if r.InstanceType in LAMBDA_PCIE
                   else f"{r.AcceleratorName} is not a catalog SKU")
            log.add(f"lambda {r.InstanceType}: {why} -> skipped")
            continue
        gpus = int(r.AcceleratorCount)
        note = f"lambda lists one price for all regions ({r.Regions}): modelled as lambda:{LAMBDA_REGION}, geo us"
        src = f"{SOURCE_TAG} lambda/vms.csv {r.InstanceType} {r.Regions}"
        out.append(Candidate("lambda", LAMBDA_REGION, sku, "on_demand", float(r.Price) / gpus, gpus,
                             r.InstanceType, src, [note]))
    return out


def choose_cheapest(candidates: list[Candidate], log: BuildLog) -> list[Candidate]:
    """Keep one candidate per (cloud, region, sku, tier): lowest price, then larger instance, then name."""
    groups: dict[tuple[str, str, str, str], list[Candidate]] = defaultdict(list)
    for c in candidates:
        c.usd_per_gpu_hour = round(c.usd_per_gpu_hour, PRICE_DECIMALS)
        if not c.usd_per_gpu_hour > 0:  # also catches NaN
            log.add(f"{c.cloud}:{c.region} {c.instance_type} {c.tier}: "
                    f"price {c.usd_per_gpu_hour} is not > 0 -> dropped")
            continue
        groups[(c.cloud, c.region, c.sku, c.tier)].append(c)
    chosen = []
    for key in sorted(groups):
        ranked = sorted(groups[key], key=lambda c: (round(c.usd_per_gpu_hour, RANK_DECIMALS),
                                                    -c.gpus_per_instance, c.instance_type))
        chosen.append(ranked[0])
        for loser in ranked[1:]:
            log.add(f"{':'.join(key)}: kept {ranked[0].instance_type} ({ranked[0].usd_per_gpu_hour}) over "
                    f"{loser.instance_type} ({loser.usd_per_gpu_hour})")
    return chosen


def flag_offers(offers: list[Candidate]) -> None:
    """Flag spot not below on-demand, and on-demand prices far from the cloud's median for the SKU."""
    by_key = {(c.cloud, c.region, c.sku, c.tier): c for c in offers}
    for c in offers:
        od = by_key.get((c.cloud, c.region, c.sku, "on_demand"))
        if c.tier == "spot" and od is not None and c.usd_per_gpu_hour >= od.usd_per_gpu_hour - EQUAL_TOLERANCE_USD:
            c.notes.append("spot not below on-demand as published (no spot saving)")
    peers: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for c in offers:
        if c.tier == "on_demand":
            peers[(c.cloud, c.sku)].append(c)
    for (cloud, sku), group in peers.items():
        if len(group) < 3:
            continue
        median = statistics.median(c.usd_per_gpu_hour for c in group)
        for c in group:
            ratio = c.usd_per_gpu_hour / median
            if ratio >= OUTLIER_RATIO or ratio <= 1 / OUTLIER_RATIO:
                c.notes.append(f"price outlier: {ratio:.2f}x the {cloud} {sku} median ({median:.2f} over "
                               f"{len(group)} regions), list price kept")


def derive_reserved(offers: list[Candidate]) -> list[Candidate]:
    """reserved = on_demand x (1 - d_cloud); inherits the on-demand row's notes."""
    reserved = []
    for c in offers:
        if c.tier != "on_demand":
            continue
        discount, what = RESERVED_DISCOUNT[c.cloud]
        note = f"reserved = on_demand x {1 - discount:.2f}: assumed {what}, not a quote"
        reserved.append(Candidate(c.cloud, c.region, c.sku, "reserved", c.usd_per_gpu_hour * (1 - discount),
                                  c.gpus_per_instance, c.instance_type, f"derived from on_demand: {c.source}",
                                  [note] + c.notes))
    return reserved


def geo_of(cloud: str, region: str) -> str:
    for prefix in sorted(GEO_PREFIXES[cloud], key=len, reverse=True):
        if region.startswith(prefix):
            return GEO_PREFIXES[cloud][prefix]
    raise SystemExit(f"build_catalog: no residency zone for {cloud}:{region}; add it to GEO_PREFIXES")


def fmt_number(value: float) -> str:
    """Shortest round-trip text for a float, without a trailing '.0' on whole numbers."""
    value = round(float(value), PRICE_DECIMALS)
    return str(int(value)) if value.is_integer() else repr(value)


def offers_frame(offers: list[Candidate]) -> pd.DataFrame:
    rows = []
    for c in sorted(offers, key=lambda c: (c.cloud, c.region, c.sku, TIER_ORDER[c.tier])):
        rows.append({
            "cloud": c.cloud, "region": c.region, "region_key": f"{c.cloud}:{c.region}",
            "geo": geo_of(c.cloud, c.region), "sku": c.sku, "tier": c.tier,
            "usd_per_gpu_hour": fmt_number(c.usd_per_gpu_hour), "gpus_per_instance": str(c.gpus_per_instance),
            "instance_type": c.instance_type, "quota_gpus": str(QUOTA_GPUS.get(c.sku, DEFAULT_QUOTA_GPUS)),
            "available": "true", "assumption": "; ".join(dict.fromkeys(c.notes)), "source": c.source,
        })
    return pd.DataFrame(rows, columns=OFFER_COLUMNS)


def build(sources: Path, out_dir: Path) -> BuildLog:
    log = BuildLog()
    skus = build_skus(_read(sources / "gpu_specs_epoch" / "ml_hardware.csv"))
    pricing = sources / "gpu_pricing_skypilot"
    candidates = (aws_candidates(pricing, log) + gcp_candidates(pricing, log)
                  + nebius_candidates(pricing, log) + lambda_candidates(pricing, log))
    unknown = {c.sku for c in candidates} - set(skus["sku"])
    if unknown:
        raise SystemExit(f"build_catalog: offers name SKUs missing from skus.csv: {sorted(unknown)}")
    offers = choose_cheapest(candidates, log)
    flag_offers(offers)
    offers += derive_reserved(offers)
    for c in offers:
        c.usd_per_gpu_hour = round(c.usd_per_gpu_hour, PRICE_DECIMALS)
        if not c.usd_per_gpu_hour > 0:
            raise SystemExit(f"build_catalog: non-positive price for {c}")
    write_table_atomic(out_dir / "skus.csv", skus[SKU_COLUMNS])
    write_table_atomic(out_dir / "offers.csv", offers_frame(offers))
    return log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="?", type=Path, default=SOURCES_DIR,
                        help="folder holding gpu_specs_epoch/ and gpu_pricing_skypilot/ (default: data/sources)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "catalog", help="output folder")
    parser.add_argument("--quiet", action="store_true", help="do not print the build log")
    args = parser.parse_args(argv)
    log = build(args.sources, args.out)
    if not args.quiet:
        print("\n".join(log.lines))
        print(f"wrote {args.out / 'skus.csv'} and {args.out / 'offers.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

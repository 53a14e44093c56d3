"""The bundled GPU catalog: coverage, traceability to the raw sources, oddity flags, and
one InputError (file, row, column, fix) per kind of broken input."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO_ROOT, sources_dir

from planner.catalog import (
    OFFER_COLUMNS,
    REBUILD_HINT,
    SKU_COLUMNS,
    Catalog,
    check_region,
    load_catalog,
    offers_table,
    skus_table,
)
from planner.errors import InputError

BUILD_SCRIPT = REPO_ROOT / "data" / "build" / "build_catalog.py"
REQUIRED_SKUS = {"A100-40GB", "A100-80GB", "H100", "H200", "B200", "L40S", "L4", "MI300X"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def pricing_dir() -> Path:
    return sources_dir() / "gpu_pricing_skypilot"


def _raw(pricing_dir: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(pricing_dir / name)


def _offer(catalog: Catalog, region_key: str, sku: str, tier: str) -> pd.Series:
    rows = catalog.offers_for(region_key, sku, tier)
    assert len(rows) == 1, (region_key, sku, tier)
    return rows.iloc[0]


# ----------------------------------------------------------------------------- coverage
def test_bundled_catalog_meets_the_coverage_contract(catalog):
    assert REQUIRED_SKUS <= set(catalog.skus["sku"])
    assert list(catalog.skus.columns) == list(SKU_COLUMNS)
    assert list(catalog.offers.columns) == list(OFFER_COLUMNS)
    assert len(catalog.regions()) >= 8
    assert catalog.offers["cloud"].nunique() >= 2
    assert set(catalog.offers["tier"]) == {"reserved", "on_demand", "spot"}
    assert (catalog.offers["source"].str.len() > 0).all()
    assert (catalog.skus["source"].str.len() > 0).all()
    assert (catalog.offers["usd_per_gpu_hour"] > 0).all()
    assert catalog.offers["usd_per_gpu_hour"].notna().all()
    assert catalog.offers["available"].all()
    assert not catalog.offers.duplicated(["region_key", "sku", "tier"]).any()


def test_region_keys_are_cloud_colon_region(catalog):
    offers = catalog.offers
    assert (offers["region_key"] == offers["cloud"] + ":" + offers["region"]).all()
    assert catalog.regions() == sorted(set(offers["region_key"]))
    assert {"aws:us-east-1", "gcp:europe-west4", "nebius:eu-north1", "lambda:us"} <= set(catalog.regions())


def test_sku_specs_are_dense_epoch_figures_with_datasheet_fills(catalog):
    h100 = catalog.sku("H100")
    assert h100["bf16_tflops"] == pytest.approx(989.4)  # Epoch, without sparsity
    assert h100["fp8_tflops"] == pytest.approx(1979.0)  # datasheet 3958 sparse / 2
    assert "epoch:NVIDIA H100 SXM5 80GB" in h100["source"] and "fp8_tflops=vendor datasheet" in h100["source"]
    h200 = catalog.sku("H200")
    assert (h200["hbm_gb"], h200["hbm_bandwidth_gb_per_s"], h200["bf16_tflops"]) == (141, 4800, 989.5)
    l40s = catalog.sku("L40S")
    assert l40s["bf16_tflops"] == pytest.approx(362.05) and "epoch: no row" in l40s["source"]
    assert pd.isna(catalog.sku("A100-80GB")["fp8_tflops"])  # no FP8 tensor cores: empty, not zero
    with pytest.raises(InputError, match="unknown GPU SKU"):
        catalog.sku("V100")


# ----------------------------------------------------------------------------- traceability
def test_aws_on_demand_is_instance_price_over_gpus(catalog, pricing_dir):
    aws = _raw(pricing_dir, "aws_gpu_vms_subset.csv")
    rows = aws[(aws.InstanceType == "p5.48xlarge") & (aws.Region == "us-east-1")]
    offer = _offer(catalog, "aws:us-east-1", "H100", "on_demand")
    assert offer["usd_per_gpu_hour"] == pytest.approx(rows.Price.max() / 8, abs=1e-6)
    assert offer["instance_type"] == "p5.48xlarge" and offer["gpus_per_instance"] == 8
    assert "aws/vms.csv p5.48xlarge us-east-1" in offer["source"]


def test_aws_spot_is_the_median_over_availability_zones(catalog, pricing_dir):
    aws = _raw(pricing_dir, "aws_gpu_vms_subset.csv")
    rows = aws[(aws.InstanceType == "p5.48xlarge") & (aws.Region == "us-east-1")]
    offer = _offer(catalog, "aws:us-east-1", "H100", "spot")
    assert offer["usd_per_gpu_hour"] == pytest.approx(statistics.median(rows.SpotPrice.dropna()) / 8, abs=1e-6)
    assert "median" in offer["source"]


def test_gcp_price_is_host_plus_accelerator(catalog, pricing_dir):
    accel = _raw(pricing_dir, "gcp_gpu_accelerator_rows_subset.csv")
    hosts = _raw(pricing_dir, "gcp_gpu_host_vms_subset.csv")
    acc = accel[(accel.AcceleratorName == "H100") & (accel.AcceleratorCount == 8) & (accel.Region == "us-central1")]
    host = hosts[(hosts.InstanceType == "a3-highgpu-8g") & (hosts.Region == "us-central1")]
    offer = _offer(catalog, "gcp:us-central1", "H100", "on_demand")
    assert offer["instance_type"] == "a3-highgpu-8g"
    assert offer["usd_per_gpu_hour"] == pytest.approx((acc.Price.max() + host.Price.max()) / 8, abs=1e-6)


def test_reserved_is_the_documented_discount_off_on_demand(catalog):
    discounts = {"aws": 0.35, "gcp": 0.37, "nebius": 0.30, "lambda": 0.20}
    offers = catalog.offers
    reserved = offers[offers.tier == "reserved"]
    assert len(reserved) == (offers.tier == "on_demand").sum()
    for row in reserved.itertuples():
        on_demand = catalog.price(row.region_key, row.sku, "on_demand")
        assert row.usd_per_gpu_hour == pytest.approx(on_demand * (1 - discounts[row.cloud]), abs=1e-6)
        assert "not a quote" in row.assumption


# ----------------------------------------------------------------------------- oddities
def test_gcp_a4_host_at_zero_is_flagged(catalog):
    b200 = catalog.offers_for(sku="B200")
    gcp = b200[b200.cloud == "gcp"]
    assert len(gcp) > 0
    assert gcp["assumption"].str.contains("listed at $0", regex=False).all()


def test_spot_not_below_on_demand_is_kept_and_flagged(catalog):
    offer = _offer(catalog, "aws:ap-south-1", "A100-40GB", "spot")  # all three AZs list spot == on-demand
    assert offer["usd_per_gpu_hour"] == pytest.approx(catalog.price("aws:ap-south-1", "A100-40GB", "on_demand"))
    assert "spot equals on-demand" in offer["assumption"]
    offers = catalog.offers
    for row in offers[offers.tier == "spot"].itertuples():
        on_demand = catalog.price(row.region_key, row.sku, "on_demand")
        if on_demand is not None and row.usd_per_gpu_hour >= on_demand - 0.0005:
            assert "not below on-demand" in row.assumption, row.region_key


def test_p5e_without_on_demand_price_has_no_on_demand_row(catalog):
    p5e = catalog.offers[catalog.offers.instance_type == "p5e.48xlarge"]
    assert not p5e["tier"].isin(["on_demand", "reserved"]).any()


def test_missing_spot_price_means_no_spot_row(catalog):
    assert catalog.price("aws:ap-northeast-2", "H100", "spot") is None  # p5.48xlarge lists no spot there
    assert catalog.price("aws:ap-northeast-2", "H100", "on_demand") is not None
    assert catalog.price("nebius:eu-north1", "L40S", "spot") is None


def test_gcp_h100_regional_outliers_are_kept_and_flagged(catalog):
    gcp = catalog.offers_for(sku="H100", tier="on_demand")
    gcp = gcp[gcp.cloud == "gcp"]
    assert gcp.usd_per_gpu_hour.max() / gcp.usd_per_gpu_hour.min() > 2.5
    assert "price outlier" in _offer(catalog, "gcp:europe-west4", "H100", "on_demand")["assumption"]
    assert "outlier" not in _offer(catalog, "gcp:us-central1", "H100", "on_demand")["assumption"]


def test_lambda_all_regions_is_one_flagged_region(catalog):
    lam = catalog.offers[catalog.offers.cloud == "lambda"]
    assert set(lam.region_key) == {"lambda:us"}
    assert lam["assumption"].str.contains("one price for all regions").all()
    assert "gpu_1x_h100_pcie" not in set(lam.instance_type)  # PCIe part, not the SXM H100 in skus.csv


# ----------------------------------------------------------------------------- display
def test_offers_table_filters_and_region_matching(catalog):
    rows = offers_table(catalog, sku="H100", tier="on_demand")
    assert rows and all(r["sku"] == "H100" and r["tier"] == "on_demand" for r in rows)
    assert list(rows[0]) == ["region_key", "sku", "tier", "usd_per_gpu_hour", "quota_gpus", "assumption"]
    assert {r["region_key"] for r in offers_table(catalog, region="aws:us-east-1")} == {"aws:us-east-1"}
    assert {r["region_key"] for r in offers_table(catalog, region="us-east-1")} == {"aws:us-east-1"}
    eu = {r["region_key"] for r in offers_table(catalog, region="eu-west")}
    assert eu and all("eu-west" in key for key in eu)
    eu_zone = {r["region_key"] for r in offers_table(catalog, region="eu")}
    assert set(catalog.offers[catalog.offers.region_key.isin(eu_zone)]["geo"]) == {"eu"}
    assert offers_table(catalog, region="mars-north1") == []
    tiers = [r["tier"] for r in offers_table(catalog, region="aws:us-east-1", sku="H100")]
    assert tiers == ["reserved", "on_demand", "spot"]
    with pytest.raises(InputError, match="unknown tier"):
        offers_table(catalog, tier="weekly")
    with pytest.raises(InputError, match="unknown GPU SKU"):
        offers_table(catalog, sku="NO-SUCH-GPU")


def test_skus_table_lists_the_skus_offered_where_the_filters_say(catalog):
    assert [r["sku"] for r in skus_table(catalog)] == list(catalog.skus["sku"])
    offered = {r["sku"] for r in offers_table(catalog, region="aws:us-east-1")}
    listed = [r["sku"] for r in skus_table(catalog, region="aws:us-east-1")]
    assert set(listed) == offered and len(listed) < len(catalog.skus)
    assert list(skus_table(catalog, region="aws:us-east-1")[0]) == list(catalog.skus.columns)
    assert [r["sku"] for r in skus_table(catalog, sku="H100")] == ["H100"]
    with pytest.raises(InputError) as caught:
        check_region(catalog, "mars-north1")
    assert caught.value.where == "--region" and "aws:us-east-1" in caught.value.fix


# ----------------------------------------------------------------------------- rebuild
def test_rebuilding_gives_byte_identical_files(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("build_catalog", BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "build_catalog", module)  # dataclasses look their module up here
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script prepends its own folder
    spec.loader.exec_module(module)
    assert module.SOURCES_DIR == sources_dir()  # the script's default input is the vendored copy
    assert module.main(["--out", str(tmp_path), "--quiet"]) == 0
    for name in ("skus.csv", "offers.csv"):
        assert (tmp_path / name).read_bytes() == (REPO_ROOT / "data" / "catalog" / name).read_bytes(), name


# ----------------------------------------------------------------------------- bad input
SKUS_CSV = ("sku,vendor,hbm_gb,hbm_bandwidth_gb_per_s,bf16_tflops,fp8_tflops,intranode_bandwidth_gb_per_s,tdp_w,"
            """max_gpus_per_node,source
H100,NVIDIA,80,3350,989.4,1979,900,700,8,epoch:NVIDIA H100 SXM5 80GB
A100-80GB,NVIDIA,80,2039,312,,600,400,8,epoch:NVIDIA A100 SXM4 80 GB
""")
OFFERS_HEADER = ",".join(OFFER_COLUMNS)
GOOD_OFFERS = [
    "aws,us-east-1,aws:us-east-1,us,H100,on_demand,6.88,8,p5.48xlarge,64,true,,"
        "skypilot-catalog v8 aws/vms.csv p5.48xlarge",
    "aws,us-east-1,aws:us-east-1,us,H100,spot,2.64,8,p5.48xlarge,64,true,,skypilot-catalog v8 aws/vms.csv p5.48xlarge",
    "gcp,us-central1,gcp:us-central1,us,A100-80GB,on_demand,1.85,8,a2-ultragpu-8g,64,true,host not priced,"
        "skypilot-catalog v8 gcp/vms.csv",
]


def _write_catalog(folder: Path, offers: list[str], skus: str = SKUS_CSV, header: str = OFFERS_HEADER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "skus.csv").write_text(skus)
    (folder / "offers.csv").write_text("\n".join([header, *offers]) + "\n")
    return folder


def _with_cell(row: str, column: str, value: str) -> str:
    cells = row.split(",")
    cells[OFFER_COLUMNS.index(column)] = value
    return ",".join(cells)


def test_small_valid_catalog_loads(tmp_path):
    loaded = load_catalog(_write_catalog(tmp_path, GOOD_OFFERS))
    assert loaded.regions() == ["aws:us-east-1", "gcp:us-central1"]
    assert loaded.price("aws:us-east-1", "H100", "spot") == pytest.approx(2.64)
    assert loaded.price("aws:us-east-1", "H100", "reserved") is None
    assert loaded.offers["gpus_per_instance"].dtype.kind == "i" and loaded.offers["available"].dtype == bool


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("usd_per_gpu_hour", "abc", "not a positive number"),
        ("usd_per_gpu_hour", "nan", "not a positive number"),
        ("usd_per_gpu_hour", "", "usd_per_gpu_hour is empty"),
        ("usd_per_gpu_hour", "0", "not a positive number"),
        ("usd_per_gpu_hour", "-1.5", "not a positive number"),
        ("tier", "weekly", "not a valid tier"),
        ("sku", "V100", "not in skus.csv"),
        ("geo", "europe", "not a valid geo"),
        ("gpus_per_instance", "2.5", "not an integer"),
        ("gpus_per_instance", "eight", "not an integer"),
        ("source", "", "source is empty"),
        ("region_key", "aws-us-east-1", "does not match cloud and region"),
        ("available", "yes", "not true or false"),
        ("quota_gpus", "-8", "not an integer"),
    ],
)
def test_each_bad_offer_cell_names_file_row_and_column(tmp_path, column, value, expected):
    offers = [GOOD_OFFERS[0], _with_cell(GOOD_OFFERS[1], column, value), GOOD_OFFERS[2]]
    with pytest.raises(InputError) as caught:
        load_catalog(_write_catalog(tmp_path, offers))
    text = str(caught.value)
    assert "offers.csv" in text and "row 2 (file line 3" in text and f"column '{column}'" in text, text
    assert expected in text and "To fix:" in text


def test_duplicate_offer_names_both_rows(tmp_path):
    with pytest.raises(InputError) as caught:
        load_catalog(_write_catalog(tmp_path, [*GOOD_OFFERS, GOOD_OFFERS[1]]))
    text = str(caught.value)
    assert "offers.csv" in text and "row 4" in text and "column 'tier'" in text
    assert "duplicate offer aws:us-east-1/H100/spot (first on row 2)" in text


def test_missing_column_names_the_header(tmp_path):
    header = OFFERS_HEADER.replace(",geo,", ",zone,")
    with pytest.raises(InputError) as caught:
        load_catalog(_write_catalog(tmp_path, GOOD_OFFERS, header=header))
    text = str(caught.value)
    assert "offers.csv" in text and "header (file line 1)" in text and "column 'geo'" in text


@pytest.mark.parametrize("name", ["skus.csv", "offers.csv"])
def test_missing_file_is_named(tmp_path, name):
    folder = _write_catalog(tmp_path, GOOD_OFFERS)
    (folder / name).unlink()
    with pytest.raises(InputError) as caught:
        load_catalog(folder)
    assert name in str(caught.value) and "not found" in str(caught.value) and "To fix:" in str(caught.value)


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("hbm_gb", "eighty", "not a positive number"),
        ("bf16_tflops", "0", "not a positive number"),
        ("fp8_tflops", "-1", "not a positive number"),
        ("max_gpus_per_node", "8.5", "not an integer"),
        ("source", "", "source is empty"),
        ("sku", "H100", "duplicate SKU"),
    ],
)
def test_each_bad_sku_cell_names_file_row_and_column(tmp_path, column, value, expected):
    lines = SKUS_CSV.strip().split("\n")
    cells = lines[2].split(",")
    cells[SKU_COLUMNS.index(column)] = value
    lines[2] = ",".join(cells)
    with pytest.raises(InputError) as caught:
        load_catalog(_write_catalog(tmp_path, GOOD_OFFERS[:2], skus="\n".join(lines) + "\n"))
    text = str(caught.value)
    assert "skus.csv" in text and "row 2 (file line 3" in text and f"column '{column}'" in text, text
    assert expected in text


def test_several_problems_are_reported_together(tmp_path):
    offers = [_with_cell(GOOD_OFFERS[0], "tier", "weekly"), _with_cell(GOOD_OFFERS[1], "geo", "mars")]
    with pytest.raises(InputError) as caught:
        load_catalog(_write_catalog(tmp_path, offers))
    text = str(caught.value)
    assert "2 problems" in text and "row 1 (file line 2" in text and "row 2 (file line 3" in text


def test_several_bad_cells_in_different_rows_and_columns_are_all_reported_in_one_error(tmp_path):
    offers = [
        _with_cell(GOOD_OFFERS[0], "usd_per_gpu_hour", "abc"),
        _with_cell(_with_cell(GOOD_OFFERS[1], "quota_gpus", "-8"), "available", "yes"),
        _with_cell(GOOD_OFFERS[2], "tier", "weekly"),
    ]
    with pytest.raises(InputError) as caught:
        load_catalog(_write_catalog(tmp_path, offers))
    text = str(caught.value)
    assert "4 problems" in text and "offers.csv" in text, text
    assert text.count(REBUILD_HINT) == 1 and "To fix: correct the cells listed above" in text, text
    for row, column, problem in [(1, "usd_per_gpu_hour", "'abc' is not a positive number"),
                                 (2, "quota_gpus", "'-8' is not an integer >= 0"),
                                 (2, "available", "'yes' is not true or false"),
                                 (3, "tier", "'weekly' is not a valid tier")]:
        assert f"row {row} (file line {row + 1}; line 1 is the header), column '{column}': {problem}" in text, text


def test_an_unknown_cloud_is_refused_naming_the_known_ones(tmp_path):
    with pytest.raises(InputError) as caught:
        load_catalog(_write_catalog(tmp_path, [GOOD_OFFERS[0], _with_cell(GOOD_OFFERS[1], "cloud", "azure")]))
    text = str(caught.value)
    assert "row 2 (file line 3" in text and "column 'cloud'" in text and "aws, gcp, nebius, lambda" in text

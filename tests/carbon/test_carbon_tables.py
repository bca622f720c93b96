"""Bundled grid-intensity table: look-ups and provenance of every row."""

import csv

from slurm_energy.carbon import tables


def test_country_by_alpha2_and_alpha3():
    fr = tables.lookup_country("FR")
    # owid/derived_latest_by_country.csv: FR,FRA,France,2024,44.18
    assert (fr.g_per_kwh, fr.year, fr.basis, fr.licence) == (44.18, 2024, "lifecycle", "CC BY 4.0")
    assert tables.lookup_country("fra") == fr
    assert tables.lookup_country("ZZ") is None
    assert tables.lookup_country("US-CA") is None  # a region is not a country


def test_region_and_cloud():
    ca = tables.lookup_zone("US-CA")
    # green-algorithms/CI_aggregated.csv: US-CA ... 216.43, data from 2020
    assert (ca.g_per_kwh, ca.year, ca.kind) == (216.43, 2020, "region")
    ew = tables.lookup_zone("europe-west1")
    # gcp-region-carbon-info/2024.csv is the latest year holding europe-west1
    assert ew.kind == "cloud" and ew.year == 2024 and ew.licence == "Apache-2.0"
    assert tables.lookup_zone("FR") is None


def test_every_row_has_source_year_licence():
    with open(tables.GRID_TABLE, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) > 300
    for r in rows:
        assert r["source"] and r["licence"], r
        assert 0 <= float(r["g_per_kwh"]) <= 2000, r
        if r["kind"] in ("country", "cloud"):
            assert r["year"], r


def test_notice_has_attribution_texts():
    import os

    text = open(os.path.join(tables.DATA_DIR, "NOTICE")).read()
    assert "with major processing by Our World in Data" in text
    assert "doi:10.1002/advs.202100707" in text
    assert "Google LLC" in text


def test_azure_region_takes_its_grid_locations_intensity():
    from slurm_energy.carbon.tables import lookup_country, lookup_zone

    row = lookup_zone("azure:westeurope")  # Green Algorithms maps West Europe to NL
    assert row.g_per_kwh == 253.31 and row.year == 2024  # OWID/Ember NL 2024, gCO2e/kWh
    assert row.g_per_kwh == lookup_country("NL").g_per_kwh
    assert "Green Algorithms" in row.source and row.licence == "CC BY 4.0"

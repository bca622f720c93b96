"""Hourly intensity: splitting energy over UTC hours, CO2e hour by hour, CSV validation, ci-import."""

import calendar
import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from slurm_energy.carbon import hourly as h
from slurm_energy.cli.main import main as cli_main
from slurm_energy.config.carbon import hourly_intensity_for, resolve_carbon


def utc(s):
    return calendar.timegm(dt.datetime.fromisoformat(s).utctimetuple())


def test_hour_key():
    assert h.hour_key(utc("2026-11-30T10:59:59")) == "2026-11-30T10:00:00Z"
    assert h.hour_key(utc("2026-11-30T11:00:00")) == "2026-11-30T11:00:00Z"


def test_split_across_hour_boundary():
    # 10:45 -> 11:15 (1800 s), 3600 J spread uniformly: 900 s in each hour -> 1800 J each
    out = h.split_interval_by_hour(utc("2026-11-30T10:45:00"), utc("2026-11-30T11:15:00"), 3600.0)
    assert out == {"2026-11-30T10:00:00Z": pytest.approx(1800.0), "2026-11-30T11:00:00Z": pytest.approx(1800.0)}
    with pytest.raises(ValueError, match="before t0"):
        h.split_interval_by_hour(10.0, 5.0, 1.0)


def test_co2e_hourly_arithmetic():
    kwh = {"2026-11-30T10:00:00Z": 2.0, "2026-11-30T11:00:00Z": 1.0}
    ci = {"2026-11-30T10:00:00Z": 100.0, "2026-11-30T11:00:00Z": 400.0, "2026-11-30T12:00:00Z": 999.0}
    # (2 kWh x 100 g/kWh + 1 kWh x 400 g/kWh) = 600 g; x alpha 0.5 = 300 g = 0.3 kg
    assert h.co2e_kg_hourly(kwh, ci, 0.5) == pytest.approx(0.3)


def test_missing_hour_raises_or_uses_fallback():
    kwh = {"2026-11-30T10:00:00Z": 2.0, "2026-11-30T11:00:00Z": 1.0}
    ci = {"2026-11-30T10:00:00Z": 100.0}
    with pytest.raises(KeyError, match="2026-11-30T11:00:00Z"):
        h.co2e_kg_hourly(kwh, ci, 1.0)
    # 2 x 100 + 1 x 250 (fallback) = 450 g = 0.45 kg
    assert h.co2e_kg_hourly(kwh, ci, 1.0, fallback_g_per_kwh=250.0) == pytest.approx(0.45)


def test_facility_kwh_by_hour_applies_pue_once():
    # 7.2e6 J = 2 kWh IT; x PUE 1.5 = 3 kWh facility
    assert h.facility_kwh_by_hour({"2026-11-30T10:00:00Z": 7.2e6}, 1.5) == {"2026-11-30T10:00:00Z": pytest.approx(3.0)}


def test_dst_change_in_site_timezone():
    # Europe/Paris springs forward on 2026-03-29 at 01:00 UTC (02:00 CET -> 03:00 CEST).
    paris = ZoneInfo("Europe/Paris")
    t0 = dt.datetime(2026, 3, 29, 1, 30, tzinfo=paris).timestamp()  # 01:30 CET = 00:30 UTC
    t1 = dt.datetime(2026, 3, 29, 3, 30, tzinfo=paris).timestamp()  # 03:30 CEST = 01:30 UTC
    assert t1 - t0 == 3600.0  # one real hour, though the wall clock moved two
    out = h.split_interval_by_hour(t0, t1, 3.6e6)  # 1 kWh over 00:30-01:30 UTC
    assert out == {"2026-03-29T00:00:00Z": pytest.approx(1.8e6), "2026-03-29T01:00:00Z": pytest.approx(1.8e6)}
    # 1.8e6 J = 0.5 kWh in each UTC hour; no local hour is doubled or lost
    assert h.facility_kwh_by_hour(out, 1.0) == {"2026-03-29T00:00:00Z": pytest.approx(0.5),
                                                "2026-03-29T01:00:00Z": pytest.approx(0.5)}


def test_csv_with_offsets_across_dst(tmp_path):
    p = tmp_path / "fr.csv"
    p.write_text("timestamp,gco2e_per_kwh\n"
                 "2026-03-29T01:00:00+01:00,50\n"  # = 00:00 UTC
                 "2026-03-29T03:00:00+02:00,70\n")  # = 01:00 UTC (02:00 local does not exist)
    ci = h.load_hourly_csv(p)
    assert ci == {"2026-03-29T00:00:00Z": 50.0, "2026-03-29T01:00:00Z": 70.0}
    kwh = {"2026-03-29T00:00:00Z": 0.5, "2026-03-29T01:00:00Z": 0.5}
    # 0.5 x 50 + 0.5 x 70 = 60 g = 0.06 kg
    assert h.co2e_kg_hourly(kwh, ci, 1.0) == pytest.approx(0.06)


@pytest.mark.parametrize("body, match", [
    ("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00,100\n", "no UTC offset"),
    ("timestamp,gco2e_per_kwh\n2026-11-30T10:30:00Z,100\n", "not on the hour"),
    ("timestamp,gco2e_per_kwh\nyesterday,100\n", "not ISO 8601"),
    ("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00Z,abc\n", "not a number"),
    ("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00Z,2500\n", "above the plausible maximum"),
    ("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00Z,-5\n", ">= 0"),
    ("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00Z,1\n2026-11-30T10:00:00Z,2\n", "appears twice"),
    ("when,value\n2026-11-30T10:00:00Z,1\n", "lacks a timestamp column"),
    ("timestamp,gco2e_per_kwh\n", "no data rows"),
])
def test_csv_validation(tmp_path, body, match):
    p = tmp_path / "bad.csv"
    p.write_text(body)
    with pytest.raises(h.HourlyDataError, match=match):
        h.load_hourly_csv(p)


def test_zone_names_cannot_escape_the_store():
    with pytest.raises(h.HourlyDataError, match="zone"):
        h.zone_path("/tmp/x", "../etc")


def test_ci_import_cli_and_lookup(tmp_path, capsys):
    spool = tmp_path / "spool"
    cfgp = tmp_path / "site.yaml"
    cfgp.write_text(f"paths: {{spool_dir: {spool}}}\n"
                    "datacenters:\n  west: {location: {country: US, region: US-CA}, partitions: [w]}\n")
    src = tmp_path / "caiso.csv"
    src.write_text("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00Z,210\n2026-11-30T11:00:00Z,190.5\n")
    assert cli_main(["ci-import", str(src), "--zone", "US-CA", "--config", str(cfgp)]) == 0
    assert "imported 2 hours" in capsys.readouterr().out
    # re-import one hour with a new value: merged, the new value wins
    src.write_text("timestamp,gco2e_per_kwh\n2026-11-30T11:00:00Z,180\n")
    assert cli_main(["ci-import", str(src), "--zone", "US-CA", "--config", str(cfgp)]) == 0

    from slurm_energy.config import load_site_config

    cfg = load_site_config(cfgp)
    facts = resolve_carbon(cfg, partition="w")
    assert hourly_intensity_for(cfg, facts) == {"2026-11-30T10:00:00Z": 210.0, "2026-11-30T11:00:00Z": 180.0}
    assert hourly_intensity_for(cfg, resolve_carbon(cfg, partition="other", offline=True)) is None

    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00,1\n")
    assert cli_main(["ci-import", str(bad), "--zone", "US-CA", "--config", str(cfgp)]) == 1
    assert "no UTC offset" in capsys.readouterr().err


def test_ci_import_refuses_kg_values_and_zero_without_allow_zero(tmp_path, capsys):
    spool = tmp_path / "spool"
    cfgp = tmp_path / "site.yaml"
    cfgp.write_text(f"paths: {{spool_dir: {spool}}}\n")
    src = tmp_path / "kg.csv"
    src.write_text("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00Z,0.21\n")  # kg/kWh: 0.21 x 1000 = 210 g/kWh
    assert cli_main(["ci-import", str(src), "--zone", "FR", "--config", str(cfgp)]) == 1
    assert (f"{src} line 2 gco2e_per_kwh: 0.21 gCO2e/kWh is below 1 gCO2e/kWh, lower than any real grid (the "
            "cleanest, hydro and nuclear, are about 5-30 gCO2e/kWh lifecycle); 0.21 looks like kgCO2e/kWh: did you "
            "mean 210 gCO2e/kWh? Fix: the column is in gCO2e/kWh: write 210; if the whole file is in kgCO2e/kWh "
            "(or tCO2e/MWh), multiply every value by 1000") in capsys.readouterr().err
    assert not (spool / "carbon-intensity" / "FR.csv").exists()  # nothing imported

    src.write_text("timestamp,gco2e_per_kwh\n2026-11-30T10:00:00Z,0\n2026-11-30T11:00:00Z,3\n")
    assert cli_main(["ci-import", str(src), "--zone", "FR", "--config", str(cfgp)]) == 1
    assert "said explicitly with `slurm-energy ci-import --allow-zero`" in capsys.readouterr().err
    assert cli_main(["ci-import", str(src), "--zone", "FR", "--config", str(cfgp), "--allow-zero"]) == 0
    cap = capsys.readouterr()
    assert "imported 2 hours" in cap.out
    assert cap.err.startswith(f"warning: 1 of 2 hours below 5 gCO2e/kWh; first: {src} hour 2026-11-30T11:00:00Z: "
                              "3 gCO2e/kWh is below 5")
    assert h.load_zone(str(spool / "carbon-intensity"), "FR") == {"2026-11-30T10:00:00Z": 0.0,
                                                                  "2026-11-30T11:00:00Z": 3.0}

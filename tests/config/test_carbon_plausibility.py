"""Implausible carbon intensities in site.yaml and hourly files: below 1 gCO2e/kWh (a unit slip,
0.056 for 56) and 0 without ``allow_zero`` are errors naming the field and the fix; 1-5 warns; the
hooks keep every other key, so a job's record is never lost (docs/CARBON.md)."""

import os

import pytest

from slurm_energy.cli.config_check import check_carbon
from slurm_energy.config import ConfigError, last_good_path, site_config_from_dict
from slurm_energy.config.carbon import resolve_carbon


def _dc(ci, **more):
    return {"datacenters": {"paris": {"pue": 1.3, "location": {"country": "FR"}, "carbon_intensity": ci,
                                      "partitions": ["cpu"], **more}}}


def test_intensity_in_kg_written_as_g_is_an_error_naming_the_field_and_the_value_meant():
    with pytest.raises(ConfigError) as e:
        site_config_from_dict(_dc({"value": 0.056, "unit": "gCO2e/kWh"}), origin="site.yaml")
    assert str(e.value) == (
        "site.yaml: datacenters.paris.carbon_intensity: bad value {'value': 0.056, 'unit': 'gCO2e/kWh'}: "
        "Value error, carbon_intensity: 0.056 gCO2e/kWh is below 1 gCO2e/kWh, lower than any real grid "
        "(the cleanest, hydro and nuclear, are about 5-30 gCO2e/kWh lifecycle); 0.056 looks like kgCO2e/kWh: "
        "did you mean 56 gCO2e/kWh? Fix: write value: 56 (unit gCO2e/kWh), or keep 0.056 with unit: kgCO2e/kWh")
    # the same number with the unit it was written in: 0.056 kg/kWh x 1000 = 56 g/kWh
    cfg = site_config_from_dict(_dc({"value": 0.056, "unit": "kgCO2e/kWh"}))
    assert cfg.datacenters["paris"].carbon_intensity.g_per_kwh == pytest.approx(56.0)


def test_zero_needs_allow_zero_and_the_error_offers_the_grid_figure():
    with pytest.raises(ConfigError) as e:
        site_config_from_dict(_dc({"value": 0}), origin="site.yaml")
    msg = str(e.value)
    assert msg.startswith("site.yaml: datacenters.paris.carbon_intensity: bad value {'value': 0}: Value error, "
                          "carbon_intensity: 0 gCO2e/kWh means the electricity emits nothing at all")
    # FR 2024 grid average in the bundled table: 44.18 gCO2e/kWh
    assert "Fix: write datacenters.paris.carbon_intensity: {value: 44.18, unit: gCO2e/kWh} (FR 2024" in msg
    assert ("0 only if the site really counts this supply as emitting nothing, said explicitly with allow_zero: "
            "true in this mapping ({value: 0, unit: gCO2e/kWh, allow_zero: true})") in msg
    cfg = site_config_from_dict(_dc({"value": 0, "unit": "gCO2e/kWh", "allow_zero": True}))
    f = resolve_carbon(cfg, partition="cpu")
    assert (f.ci_g_per_kwh, f.pue) == (0.0, 1.3)
    with pytest.raises(ConfigError, match="0.5 gCO2e/kWh is below 1"):  # allow_zero is for 0 only
        site_config_from_dict(_dc({"value": 0.5, "allow_zero": True}))


def test_check_config_warns_for_one_to_five_and_exits_0(tmp_path, capsys):
    from slurm_energy.cli.main import main

    p = tmp_path / "site.yaml"
    p.write_text(f"paths: {{spool_dir: {tmp_path}/spool, log_dir: {tmp_path}/log}}\n"
                 "datacenters:\n  paris: {location: {country: FR}, carbon_intensity: {value: 1.5}, partitions: [cpu]}\n")
    assert main(["check-config", str(p), "--offline"]) == 0
    cap = capsys.readouterr()
    assert (f"warning: {p}: datacenters.paris.carbon_intensity: 1.5 gCO2e/kWh is below 5 gCO2e/kWh, lower than "
            "even hydro and nuclear lifecycle figures (about 5-30); check the value and its unit; if it was "
            "kgCO2e/kWh (or tCO2e/MWh) it is 1500 gCO2e/kWh") in cap.err
    assert cap.out.rstrip().endswith("OK")


def test_check_config_exits_1_on_a_kg_value_written_as_g(tmp_path, capsys):
    from slurm_energy.cli.main import main

    p = tmp_path / "site.yaml"
    p.write_text("datacenters:\n  paris: {carbon_intensity: {value: 0.056, unit: gCO2e/kWh}}\n")
    assert main(["check-config", str(p), "--offline"]) == 1
    err = capsys.readouterr().err
    assert f"{p}: datacenters.paris.carbon_intensity: bad value" in err
    assert "did you mean 56 gCO2e/kWh? Fix: write value: 56" in err


def test_hooks_keep_the_job_record_settings_when_the_intensity_is_a_unit_slip(tmp_path, monkeypatch):
    from slurm_energy.slurm import config_cache as hookconfig

    site = tmp_path / "site.yaml"
    site.write_text(f"paths: {{spool_dir: {tmp_path}/spool, store_url: 'sqlite:///{tmp_path}/jobs.db'}}\n"
                    "datacenters:\n  paris: {pue: 1.3, location: {country: FR}, partitions: [cpu],\n"
                    "          carbon_intensity: {value: 0.056}}\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    cfg, problems = hookconfig.load_hook_config()
    # the store (where the job's record goes) and the datacenter's partitions and PUE stay in force
    assert cfg.paths.store_url == f"sqlite:///{tmp_path}/jobs.db"
    assert problems[0].startswith(f"{site}: datacenters.paris.carbon_intensity: bad value {{'value': 0.056}}")
    assert "did you mean 56 gCO2e/kWh? Fix: write value: 56" in problems[0]
    assert problems[1] == (f"{site}: every other key of this file is in force; in place of the bad keys: "
                           "datacenters.paris.carbon_intensity unset (its documented fallback applies)")
    f = resolve_carbon(cfg, partition="cpu")
    # the intensity then comes from the datacenter's country: FR 2024 in the bundled table, 44.18 g/kWh
    assert (f.datacenter, f.pue, f.ci_g_per_kwh) == ("paris", 1.3, 44.18)
    assert not os.path.exists(last_good_path(site))  # a file with a problem is not the last good copy


def test_stored_hourly_file_below_1_is_a_check_config_error(tmp_path):
    from slurm_energy.carbon import hourly

    cfg = site_config_from_dict({"paths": {"hourly_ci_dir": str(tmp_path)},
                                 "location": {"country": "FR"}}).model_copy(update={"source_path": "site.yaml"})
    hourly.write_zone(str(tmp_path), "FR", {"2026-11-30T10:00:00Z": 0.5, "2026-11-30T11:00:00Z": 40.0})
    warnings: list[str] = []
    errors = check_carbon(cfg, warnings)
    assert warnings == [] and len(errors) == 1
    assert errors[0].startswith(f"hourly carbon intensity of zone FR cannot be used (jobs there use the single "
                                f"intensity instead): {tmp_path}/FR.csv line 2 g_per_kwh: 0.5 gCO2e/kWh is below 1")
    assert errors[0].endswith(f"To replace the stored file: remove {tmp_path}/FR.csv, then `slurm-energy ci-import "
                              f"CORRECTED.csv --zone FR`")
    # 0 hours were stored only by ci-import --allow-zero: accepted; 2 g/kWh warns
    hourly.write_zone(str(tmp_path), "FR", {"2026-11-30T10:00:00Z": 0.0, "2026-11-30T11:00:00Z": 2.0})
    assert check_carbon(cfg, warnings) == []
    assert warnings == [f"1 of 2 hours below 5 gCO2e/kWh; first: {tmp_path}/FR.csv hour 2026-11-30T11:00:00Z: "
                        "2 gCO2e/kWh is below 5 gCO2e/kWh, lower than even hydro and nuclear lifecycle figures "
                        "(about 5-30); check the value and its unit; if it was kgCO2e/kWh (or tCO2e/MWh) it is "
                        "2000 gCO2e/kWh"]

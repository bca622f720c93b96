"""check-config gaps found in testing: rated powers written in kW, a store in a directory that does
not exist, a silent catch-all datacenter, a bare carbon_intensity number."""

import os

import pytest

from slurm_energy.cli.main import main
from slurm_energy.config import ConfigError


def _check(site_config, capsys, **overrides):
    """check-config of a site config without a cluster name, its paths under tmp_path, plus ``overrides``."""
    p = str(site_config.write(cluster_name=None, **overrides))
    rc = main(["check-config", p, "--offline"])
    out, err = capsys.readouterr()
    return p, rc, out, err


def test_cpu_tdp_in_kw_is_an_error_with_the_watts_meant(site_config, capsys):
    p, rc, _out, err = _check(site_config, capsys, hardware={"cpu_tdp_w": {"Xeon Gold 6130": 0.125}})
    assert rc == 1
    # 0.125 kW x 1000 = 125 W
    assert (f"{p}: hardware.cpu_tdp_w: bad value {{'Xeon Gold 6130': 0.125}}: Value error, the TDP of "
            "'Xeon Gold 6130' is 0.125 W, below 1 W: watts written as kW? Did you mean 125 W?") in err


@pytest.mark.parametrize("hardware, field, what, meant", [
    ({"cpu_tdp_default_w": 0.15}, "hardware.cpu_tdp_default_w", "the default CPU TDP", "150"),
    ({"gpu_fallback_w": 0.3}, "hardware.gpu_fallback_w", "the GPU fallback power", "300"),
    ({"gpu": {"L40S": {"rated_w": 0.35}}}, "hardware.gpu.L40S.rated_w", "the GPU's rated power", "350"),
])
def test_other_rated_powers_below_1_w_are_errors(site_config, hardware, field, what, meant):
    with pytest.raises(ConfigError) as e:
        site_config(cluster_name=None, hardware=hardware)
    assert f"{field}: bad value " in str(e.value)
    assert f"{what} is " in str(e.value) and f"below 1 W: watts written as kW? Did you mean {meant} W?" in str(e.value)


def test_rated_powers_above_a_device_are_warnings(site_config, capsys):
    p, rc, out, err = _check(site_config, capsys, hardware={"cpu_tdp_w": {"X": 1200}, "gpu": {"L40S": {"rated_w": 3500}},
                                                            "cpu_tdp_default_w": 350})
    assert rc == 0 and out.rstrip().endswith("OK")
    assert err.splitlines() == [
        f"warning: {p}: hardware.cpu_tdp_w['X']: 1200 W is more than any one CPU package (socket) is rated for "
        "(> 1000 W); check it is the rating of one device in W, not a whole node's",
        f"warning: {p}: hardware.gpu['L40S'].rated_w: 3500 W is more than any one GPU is rated for (> 1500 W); "
        "check it is the rating of one device in W, not a whole node's"]  # 350 W: no warning


def test_sqlite_store_in_a_missing_directory_is_an_error_and_nothing_is_created(tmp_path, site_config, capsys):
    d = tmp_path / "nonexistent" / "dir"
    p = site_config.write(cluster_name=None, paths={"store_url": f"sqlite:///{d}/jobs.db"})
    assert main(["check-config", str(p), "--offline"]) == 1
    err = capsys.readouterr().err
    assert (f"{p}: paths.store_url: bad value 'sqlite:///{d}/jobs.db': its directory {d} does not exist. Fix: "
            f"create it (as root: mkdir -p -m 0755 {d}) if this is the store you mean, or correct the path in "
            "paths.store_url") in err
    assert not os.path.exists(tmp_path / "nonexistent")


def test_datacenter_without_partitions_or_nodes_is_noted_as_the_catch_all(site_config, capsys):
    p, rc, out, _err = _check(site_config, capsys, datacenters={"room": {"pue": 1.3}, "gpu": {"pue": 1.2, "partitions": ["gpu"]}})
    assert rc == 0
    notes = [x for x in out.splitlines() if x.startswith("note: ")]
    assert notes == [f"note: {p}: datacenters.room has neither partitions nor nodes: it is the catch-all, used for "
                     "every job whose partition and node match no other datacenter (instead of location.country). "
                     "If that is not meant, give datacenters.room.partitions or .nodes"]


def test_bare_carbon_intensity_number_suggests_the_value_with_a_unit_first(site_config):
    with pytest.raises(ConfigError) as e:
        site_config(cluster_name=None,
                    datacenters={"room": {"carbon_intensity": 56, "location": {"country": "FR"}, "partitions": ["cpu"]}})
    fix = str(e.value).split("Fix: ", 1)[1]
    assert fix.startswith("write datacenters.room.carbon_intensity: {value: 56, unit: gCO2e/kWh} if 56 is in "
                          "gCO2e/kWh (other units: ")
    assert "; otherwise write datacenters.room.carbon_intensity: {value: " in fix  # then the table's figure
    with pytest.raises(ConfigError) as e:  # 0.056 is no grid in g/kWh: kg/kWh meant (0.056 kg = 56 g)
        site_config(cluster_name=None, datacenters={"room": {"carbon_intensity": 0.056, "partitions": ["cpu"]}})
    assert str(e.value).split("Fix: ", 1)[1].startswith(
        "write datacenters.room.carbon_intensity: {value: 0.056, unit: kgCO2e/kWh} if 0.056 is in kgCO2e/kWh")

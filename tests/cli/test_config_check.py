"""check-config on the real file system: unusable paths are errors (exit 1), no config says so."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from slurm_energy.cli.config_check import check_paths
from slurm_energy.cli.main import main
from slurm_energy.config import ConfigError, site_config_from_dict

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def paths_cfg(site_config, tmp_path):
    """check_paths' input: a site config of ``paths:`` alone, spool_dir and log_dir under tmp_path
    unless given (the others at their defaults), read through the loader from tmp_path/site.yaml."""
    def make(**paths):
        return site_config(bare=True, paths={"spool_dir": str(tmp_path / "spool"), "log_dir": str(tmp_path / "log"),
                                             **paths})
    return make


def test_usable_paths_give_no_error_and_create_nothing(tmp_path, paths_cfg):
    (tmp_path / "log").mkdir()  # one existing directory, the others to be created under tmp_path
    assert check_paths(paths_cfg()) == []
    # the site config itself and the one existing dir: nothing created, the probe removed
    assert sorted(os.listdir(tmp_path)) == ["log", "site.yaml"] and os.listdir(tmp_path / "log") == []


def test_spool_dir_that_is_a_file_is_an_error_naming_field_path_and_fix(tmp_path, paths_cfg):
    f = tmp_path / "notadir"
    f.write_text("x")
    errors = check_paths(paths_cfg(spool_dir=str(f)))
    # spool_dir itself and the 3 dirs derived from it (results, hourly_ci, geo); the store is not
    # under the spool (it lives in /var/lib/slurm-energy, readable by users)
    fields = [e.split(": ")[1] for e in errors]
    assert fields == ["paths.spool_dir", "paths.results_dir", "paths.hourly_ci_dir", "paths.geo_cache_dir"]
    assert errors[0] == (f"{tmp_path}/site.yaml: paths.spool_dir: bad value {str(f)!r}: exists but is not a directory "
                         f"(it is a file). Fix: point it at a directory, or move that file away")
    assert f"{f} is not a directory" in errors[1]


def test_log_dir_under_proc_is_an_error(tmp_path, paths_cfg):
    if not os.path.isdir("/proc"):
        pytest.skip("no /proc")
    errors = check_paths(paths_cfg(log_dir="/proc/nope"))
    assert len(errors) == 1 and errors[0].startswith(f"{tmp_path}/site.yaml: paths.log_dir: bad value '/proc/nope': ")
    assert "cannot be created under its nearest existing directory /proc" in errors[0] and "Fix:" in errors[0]


def test_relative_path_and_bad_store_url(tmp_path, paths_cfg):
    errors = check_paths(paths_cfg(results_dir="results", store_url="notaurl"))
    assert "paths.results_dir: bad value 'results': is not an absolute path" in errors[0]
    assert "paths.store_url: bad value 'notaurl': cannot be parsed" in errors[1]
    assert len(errors) == 2


def test_store_db_path_that_is_a_directory(tmp_path, paths_cfg):
    (tmp_path / "db").mkdir()
    errors = check_paths(paths_cfg(store_url=f"sqlite:///{tmp_path}/db"))
    assert len(errors) == 1 and "paths.store_url" in errors[0] and "not a regular file" in errors[0]
    # PostgreSQL stores are not file-system paths: nothing to check here
    assert check_paths(paths_cfg(store_url="postgresql+psycopg://u:p@db:5432/se")) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a check as another user")
def test_permission_denied_is_a_note_for_non_root_and_fine_for_root():
    base = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(base, 0o755)
        locked = os.path.join(base, "locked")
        os.mkdir(locked, 0o700)  # root-only: root can create spool/ in it, nobody (65534) cannot
        os.mkdir(os.path.join(base, "open"))
        os.chmod(os.path.join(base, "open"), 0o777)  # anyone may create log/ here
        cfg = {"paths": {"spool_dir": f"{locked}/spool", "log_dir": f"{base}/open/log"}}
        assert check_paths(site_config_from_dict(cfg)) == []  # as root: usable
        code = ("import json,sys; from slurm_energy.config import site_config_from_dict as f; "
                "from slurm_energy.cli.config_check import check_paths; n=[]; "
                f"e=check_paths(f({cfg!r}), n); print(json.dumps([e, n]))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                             env={"PYTHONPATH": REPO}, user=65534, group=65534, timeout=60)
        assert out.returncode == 0, out.stderr
        errors, notes = json.loads(out.stdout)
        # spool_dir, results_dir, hourly_ci_dir, geo_cache_dir and the store's directory (all under
        # locked/): 5 notes; log_dir under open/ is usable by nobody too
        assert errors == [] and len(notes) == 5 and not any("paths.log_dir" in n for n in notes)
        assert "Permission denied" in notes[0] and "rerun check-config as root" in notes[0]
        assert f"make {locked} writable by root" in notes[0]
    finally:
        shutil.rmtree(base)


def _write(site_config, text):
    """A site.yaml of ``text`` as it is (the text is what these tests check); its path."""
    return str(site_config.write(text=text))


def test_check_config_cli_exits_1_on_unusable_paths(tmp_path, site_config, capsys):
    from slurm_energy.cli.main import main

    (tmp_path / "notadir").write_text("x")
    p = _write(site_config, f"paths:\n  spool_dir: {tmp_path}/notadir\n  log_dir: /proc/nope\n")
    assert main(["check-config", p, "--offline"]) == 1
    cap = capsys.readouterr()
    assert f"{p}: paths.spool_dir: bad value '{tmp_path}/notadir': exists but is not a directory" in cap.err
    assert f"{p}: paths.log_dir: bad value '/proc/nope'" in cap.err
    assert not cap.out.rstrip().endswith("OK")


def test_check_config_cli_ok_for_usable_paths(tmp_path, site_config, capsys):
    from slurm_energy.cli.main import main

    p = _write(site_config, f"paths:\n  spool_dir: {tmp_path}/spool\n  log_dir: {tmp_path}/log\n")
    assert main(["check-config", p, "--offline"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("OK") and "NO SITE CONFIG" not in out


def test_check_config_without_any_file_says_defaults_are_in_force(tmp_path, monkeypatch, capsys):
    from slurm_energy.cli.main import main

    monkeypatch.delenv("SLURM_ENERGY_CONFIG", raising=False)
    monkeypatch.setattr("slurm_energy.config.schema.DEFAULT_PATH", str(tmp_path / "absent.yaml"))
    assert main(["check-config", "--offline"]) == 0
    out = capsys.readouterr().out
    assert f"NO SITE CONFIG FOUND: no FILE given, $SLURM_ENERGY_CONFIG unset and {tmp_path}/absent.yaml absent" in out
    assert "PUE 1.58: industry average" in out  # Uptime Institute 2023
    assert "carbon intensity 475 gCO2e/kWh, world average" in out  # IEA 2019
    assert out.rstrip().endswith("OK: documented defaults in force (no site config found)")


def test_unsupported_store_backend_is_an_error_naming_field_value_and_fix(tmp_path, paths_cfg):
    errors = check_paths(paths_cfg(store_url="mysql://x/db"))
    assert errors == [f"{tmp_path}/site.yaml: paths.store_url: bad value 'mysql://x/db': backend 'mysql' is not "
                      "supported; use sqlite:////abs/path/jobs.db or "
                      "postgresql+psycopg://user:password@host:port/dbname"]


def test_store_url_password_is_hidden_and_relative_sqlite_refused(tmp_path, paths_cfg):
    errors = check_paths(paths_cfg(store_url="postgresql+psycopg2://u:secret@db/se"))
    assert len(errors) == 1 and "secret" not in errors[0]
    assert "bad value 'postgresql+psycopg2://u:***@db/se': PostgreSQL driver 'psycopg2' is not supported" in errors[0]
    errors = check_paths(paths_cfg(store_url="sqlite:///jobs.db"))  # three slashes: relative path
    assert len(errors) == 1 and "SQLite path 'jobs.db' is relative" in errors[0]
    assert not os.path.exists("jobs.db")  # nothing created in the working directory


def test_check_config_cli_exits_1_on_mysql_store(tmp_path, site_config, capsys):
    from slurm_energy.cli.main import main

    p = _write(site_config, f"paths:\n  spool_dir: {tmp_path}/spool\n  log_dir: {tmp_path}/log\n"
                         f"  store_url: mysql://x/db\n")
    assert main(["check-config", p, "--offline"]) == 1
    cap = capsys.readouterr()
    assert f"{p}: paths.store_url: bad value 'mysql://x/db': backend 'mysql' is not supported" in cap.err
    assert not cap.out.rstrip().endswith("OK")


def test_check_config_cli_exits_1_on_duplicate_key(tmp_path, site_config, capsys):
    from slurm_energy.cli.main import main

    p = _write(site_config, "sampling: {interval_s: 2}\nsampling: {interim_s: 30}\n")
    assert main(["check-config", p, "--offline"]) == 1
    assert "duplicate key 'sampling' at line 1 and again at line 2" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["", "# nothing set yet\n"])
def test_check_config_warns_that_an_empty_file_sets_nothing(tmp_path, site_config, capsys, text):
    from slurm_energy.cli.main import main

    p = _write(site_config, text)
    main(["check-config", p, "--offline"])  # the default paths may or may not be usable on this machine
    cap = capsys.readouterr()
    assert f"warning: {p} sets nothing (empty, or only comments)." in cap.err
    # the defaults in force are named, each with its source
    assert "PUE 1.58: industry average PUE 1.58 (Uptime Institute" in cap.out
    assert "carbon intensity 475 gCO2e/kWh, world average (IEA" in cap.out
    assert "store sqlite:////var/lib/slurm-energy/jobs.db" in cap.out


def test_check_config_no_empty_warning_when_a_key_is_set(tmp_path, site_config, capsys):
    from slurm_energy.cli.main import main

    p = _write(site_config, f"paths:\n  spool_dir: {tmp_path}/spool\n  log_dir: {tmp_path}/log\n")
    assert main(["check-config", p, "--offline"]) == 0
    assert "sets nothing" not in capsys.readouterr().err


def test_bad_carbon_intensity_hint_is_the_datacenters_own_grid(tmp_path, site_config, capsys):
    from slurm_energy.carbon.tables import lookup_country, lookup_zone
    from slurm_energy.cli.main import main

    # the bundled table's grid averages that the hint must offer (not one number for every site)
    assert lookup_country("FR").g_per_kwh == 44.18 and lookup_zone("US-CA").g_per_kwh == 216.43
    p = _write(site_config, "datacenters:\n  paris:\n    location: {country: FR}\n"
                         "    carbon_intensity: {value: 5000, unit: gCO2e/kWh}\n")
    assert main(["check-config", p, "--offline"]) == 1
    err = capsys.readouterr().err
    assert ("Fix: write datacenters.paris.carbon_intensity: {value: 44.18, unit: gCO2e/kWh} (FR 2024 grid average, "
            "bundled table: Ember") in err
    assert "233" not in err
    # the site's location (here a sub-national zone) when the datacenter has none
    p = _write(site_config, "location: {country: US, region: US-CA}\ndatacenters:\n  dc:\n    carbon_intensity: 56\n")
    assert main(["check-config", p, "--offline"]) == 1
    err = capsys.readouterr().err  # a bare number: its own value with a unit first, then the table's
    assert ("Fix: write datacenters.dc.carbon_intensity: {value: 56, unit: gCO2e/kWh} if 56 is in gCO2e/kWh" in err
            and "; otherwise write datacenters.dc.carbon_intensity: {value: 216.43, unit: gCO2e/kWh} (US-CA 2020" in err)


def test_bad_carbon_intensity_without_location_says_how_to_find_one(tmp_path, site_config, capsys):
    from slurm_energy.cli.main import main

    p = _write(site_config, "datacenters:\n  dc:\n    carbon_intensity: {value: abc}\n")
    assert main(["check-config", p, "--offline"]) == 1
    err = capsys.readouterr().err
    assert "datacenters.dc.carbon_intensity.value: bad value 'abc'" in err
    assert ("Fix: write datacenters.dc.carbon_intensity: {value: <number>, unit: gCO2e/kWh} with your grid's "
            "intensity (your electricity supplier's figure") in err
    assert "set location.country (ISO code)" in err and "233" not in err


# --------------------------------------------------------------------------------------------------
# check-config gaps found in testing: rated powers written in kW, a store in a directory that does
# not exist, a silent catch-all datacenter, a bare carbon_intensity number.

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

"""Lenient loading for the Slurm hooks: a typo keeps every valid part of site.yaml (paths above all)."""

import os
import textwrap

import pytest

from slurm_energy.config import (
    DEFAULT_PUE,
    ConfigError,
    load_site_config,
    load_site_config_lenient,
    site_config_from_dict_lenient,
)
from slurm_energy.config.carbon import resolve_carbon


def _write(site_config, text):
    """tmp_path/site.yaml of ``text`` (dedented) as it is: the loader's input under test."""
    return site_config.write(text=textwrap.dedent(text))


GOOD_PATHS = textwrap.dedent("""\
    paths:
      spool_dir: /srv/se/spool
      store_url: sqlite:////srv/se/lib/jobs.db
      log_dir: /srv/se/log
    location: {country: SE}
    datacenters:
      north: {pue: 1.1, carbon_intensity: {value: 20}, partitions: [p1]}
    """)


def test_top_level_bad_pue_keeps_paths_and_datacenters(tmp_path, site_config):
    p = _write(site_config, "pue: 0.5\n" + GOOD_PATHS)
    cfg, msgs = load_site_config_lenient(p)
    # the configured store and logs, not /var/lib/slurm-energy/jobs.db and /var/log/slurm-energy
    assert cfg.paths.store_url == "sqlite:////srv/se/lib/jobs.db"
    assert cfg.paths.log_dir == "/srv/se/log"
    assert cfg.paths.results_dir == "/srv/se/spool/results"  # derived from spool_dir
    assert cfg.source_path == str(p)
    f = resolve_carbon(cfg, partition="p1")
    assert (f.datacenter, f.pue, f.ci_g_per_kwh) == ("north", 1.1, 20.0)  # PUE 1.1, 20 gCO2e/kWh
    site = resolve_carbon(cfg, partition="other", offline=True)
    # the bad site-wide pue falls back to the documented default 1.58; Sweden (OWID 2024) 35.82 g/kWh
    assert site.pue == DEFAULT_PUE == 1.58 and site.ci_g_per_kwh == pytest.approx(35.82)
    assert "pue" in cfg.defaults_used
    # same wording as ConfigError: file, dotted field, bad value, fix
    assert any(m.startswith(f"{p}: pue: bad value 0.5") and "Fix: PUE = facility energy" in m for m in msgs)
    # the message says what is in force, not just what was ignored
    assert msgs[-1] == (f"{p}: every other key of this file is in force; in place of the bad keys: "
                        f"pue unset (its documented fallback applies)")
    with pytest.raises(ConfigError, match="pue: bad value 0.5"):  # the strict loader still refuses the file
        load_site_config(p)


def test_typo_inside_section_drops_only_that_key(tmp_path):
    cfg, msgs = site_config_from_dict_lenient({"sampling": {"intervl_s": 2, "interim_s": 10}})
    assert cfg.sampling.interval_s == 5.0  # s, documented default (the typo'd key is ignored)
    assert cfg.sampling.interim_s == 10.0  # s, the valid sibling is kept
    assert "sampling.intervl_s: bad value 2" in msgs[0] and "fix its spelling" in msgs[0]
    assert "sampling.intervl_s" in cfg.defaults_used


def test_bad_path_falls_back_to_that_path_only():
    cfg, msgs = site_config_from_dict_lenient({"paths": {"spool_dir": "/srv/se", "log_dir": ["a", "b"]}})
    assert cfg.paths.log_dir == "/var/log/slurm-energy"  # the one bad path: its default
    assert cfg.paths.spool_dir == "/srv/se"
    assert cfg.paths.store_url == "sqlite:////var/lib/slurm-energy/jobs.db"  # the default, not under the spool
    assert len(msgs) == 2 and "paths.log_dir: bad value ['a', 'b']" in msgs[0]


def test_bad_datacenter_is_dropped_alone():
    cfg, msgs = site_config_from_dict_lenient({"datacenters": {
        "bad": {"pue": 0.8, "partitions": ["x"]},
        "good": {"pue": 1.2, "carbon_intensity": {"value": 30}, "partitions": ["y"]}}})
    assert list(cfg.datacenters) == ["good"]
    assert resolve_carbon(cfg, partition="y").pue == 1.2
    assert resolve_carbon(cfg, partition="x", offline=True).pue == 1.58  # no datacenter: documented default
    assert "datacenters.bad.pue: bad value 0.8" in msgs[0]
    assert msgs[-1].endswith("in place of the bad keys: datacenters.bad not defined")


def test_partition_in_two_datacenters_keeps_the_first_listed():
    cfg, msgs = site_config_from_dict_lenient({"datacenters": {
        "a": {"pue": 1.1, "partitions": ["gpu"]}, "b": {"pue": 1.9, "partitions": ["gpu", "cpu"]}}})
    assert list(cfg.datacenters) == ["a"] and resolve_carbon(cfg, partition="gpu").pue == 1.1
    assert "partition 'gpu' is listed in datacenters 'a' and 'b'" in msgs[0]
    assert msgs[-1].endswith("in place of the bad keys: datacenters.b not defined")


def test_one_bad_gpu_override_keeps_the_others():
    cfg, msgs = site_config_from_dict_lenient({"hardware": {
        "gpu": {"A100": {"rated_w": -1}, "L40S": {"rated_w": 350}}, "ram_w_per_gb": 0.5}})
    assert list(cfg.hardware.gpu) == ["L40S"] and cfg.hardware.ram_w_per_gb == 0.5  # W/GB kept
    assert "hardware.gpu.A100.rated_w: bad value -1" in msgs[0]


def test_bad_nested_location_drops_the_whole_location():
    cfg, msgs = site_config_from_dict_lenient({"location": {"country": "XX"}, "cluster_name": "c"})
    assert cfg.location is None and cfg.cluster_name == "c"
    assert "location.country: bad value 'XX'" in msgs[0] and "ISO 3166" in msgs[0]


def test_valid_file_gives_no_messages():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cfg, msgs = load_site_config_lenient(os.path.join(repo, "site_config", "site.yaml"))
    assert msgs == [] and resolve_carbon(cfg, partition="cpu").pue == 1.35  # site.yaml main-room


def test_unreadable_missing_and_non_yaml_give_defaults_and_a_message(tmp_path, site_config, monkeypatch):
    cfg, msgs = load_site_config_lenient(tmp_path / "nope.yaml")
    assert cfg.paths.spool_dir == "/var/spool/slurm-energy" and len(msgs) == 1
    assert "cannot read the site config" in msgs[0]
    assert ("documented defaults are in force for every setting (store "
            "sqlite:////var/lib/slurm-energy/jobs.db, logs /var/log/slurm-energy") in msgs[0]
    assert cfg.defaults_used[0] == "config_file"
    cfg, msgs = load_site_config_lenient(_write(site_config, "datacenters: [unclosed\n"))
    assert len(msgs) == 1 and "not valid YAML" in msgs[0]
    cfg, msgs = load_site_config_lenient(_write(site_config, "- a\n- b\n"))
    assert len(msgs) == 1 and "top level must be a mapping" in msgs[0] and cfg.sampling.interval_s == 5.0
    monkeypatch.delenv("SLURM_ENERGY_CONFIG", raising=False)
    monkeypatch.setattr("slurm_energy.config.schema.DEFAULT_PATH", str(tmp_path / "absent.yaml"))
    cfg, msgs = load_site_config_lenient()
    assert msgs == [] and cfg.defaults_used[0] == "config_file"  # no file at all is not an error


def test_hooks_load_config_keeps_configured_paths(tmp_path, site_config, monkeypatch):
    from slurm_energy.slurm.config_cache import load_config as _load_config

    p = _write(site_config, "sampling: {intervl_s: 2}\n" + GOOD_PATHS)
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(p))
    errors: list[str] = []
    cfg = _load_config(errors)
    assert cfg.paths.store_url == "sqlite:////srv/se/lib/jobs.db" and cfg.paths.log_dir == "/srv/se/log"
    assert errors and "sampling.intervl_s: bad value 2" in errors[0]

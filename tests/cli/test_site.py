"""The site config as the commands read it (slurm_energy/cli/site.py): one store-URL rule, the
reader's Site lenient (jobenergy) or strict (rollup), the whole config read once per run (predict)."""

import pytest

from slurm_energy.cli.site import LenientSiteConfig, load_site, store_url
from slurm_energy.errors import ConfigError

#: A site config with one invalid key (an interval must be > 0): lenient readers use its default.
BAD_INTERVAL = ("cluster_name: c1\ntimezone: Europe/Paris\nadmins: [alice]\nsampling:\n  interval_s: -5\n"
                "paths:\n  store_url: sqlite:////srv/se/jobs.db\n")


def _site_yaml(tmp_path, monkeypatch, text):
    p = tmp_path / "site.yaml"
    p.write_text(text)
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(p))
    return p


def test_store_url_store_option_then_environment_then_site_config(monkeypatch):
    monkeypatch.delenv("SLURM_ENERGY_STORE", raising=False)
    asked = []

    def from_config() -> str:
        asked.append(1)
        return "sqlite:////site/jobs.db"

    # --store wins, and the site config is not read at all (a reader given --store needs none)
    assert store_url("sqlite:////given/jobs.db", from_config) == ("sqlite:////given/jobs.db", "--store")
    assert asked == []
    monkeypatch.setenv("SLURM_ENERGY_STORE", "/env/jobs.db")  # a plain path becomes a SQLite URL
    assert store_url(None, from_config) == ("sqlite:////env/jobs.db", "$SLURM_ENERGY_STORE")
    assert asked == []
    monkeypatch.setenv("SLURM_ENERGY_STORE", "")  # empty counts as unset (shell habit)
    assert store_url(None, from_config) == ("sqlite:////site/jobs.db", "paths.store_url")
    assert asked == [1]
    with pytest.raises(ValueError, match="--store '' is empty"):
        store_url("", from_config)


def test_reader_site_lenient_warns_strict_refuses(tmp_path, monkeypatch):
    p = _site_yaml(tmp_path, monkeypatch, BAD_INTERVAL)
    site = load_site()  # jobenergy: the bad key's default is used, and said
    assert site.store_url == "sqlite:////srv/se/jobs.db"
    assert site.admins == ["alice"] and site.timezone == "Europe/Paris"
    assert site.origin == f"site config {p}"
    assert any("sampling.interval_s: bad value -5" in w for w in site.warnings)
    with pytest.raises(ConfigError, match="sampling.interval_s"):  # rollup: the key is named, nothing shown
        load_site(strict=True)


def test_whole_config_read_once_per_run_warning_said_once(tmp_path, monkeypatch, capsys):
    p = _site_yaml(tmp_path, monkeypatch, BAD_INTERVAL)
    site = LenientSiteConfig("predict")
    cfg, note = site.get()
    assert note == f"site config {p}" and cfg is not None
    assert cfg.sampling.interval_s == 5.0  # s: the documented default in place of the bad -5
    assert site.get()[0] is cfg  # read once: the second look-up is the same object
    assert site.store_url() == "sqlite:////srv/se/jobs.db"
    err = capsys.readouterr().err
    assert err.count("slurm-energy predict: warning: ") == 2  # the bad key and what is in force, once each
    assert err.count("sampling.interval_s: bad value -5") == 1


def test_unreadable_whole_config_is_a_note_and_a_lookup_error(monkeypatch):
    from slurm_energy import config as C

    def unreadable(*_a, **_kw):
        raise PermissionError(13, "Permission denied", "/etc/slurm-energy/site.yaml")

    monkeypatch.setattr(C, "load_site_config_for_hooks", unreadable)
    site = LenientSiteConfig("calibration")
    cfg, note = site.get()
    assert cfg is None and note.startswith("site config unreadable: [Errno 13] Permission denied")
    with pytest.raises(LookupError, match="site config unreadable"):
        site.store_url()

"""The readers' copy of the site config (<site.yaml>.reader.json): readable by whoever may read
site.yaml, never more; an ordinary user's jobenergy reads it instead of loading site.yaml with
pydantic (the hooks' resolved copy is root-only)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

from slurm_energy.slurm import config_cache as H
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record


def _load(site: str) -> None:
    subprocess.run([sys.executable, "-c", "from slurm_energy.slurm.config_cache import load_hook_config as f; f()"],
                   env=dict(os.environ, SLURM_ENERGY_CONFIG=site), check=True)


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_reader_copy_has_site_yamls_read_bits_and_only_what_readers_use(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("paths: {store_url: 'postgresql+psycopg://u:secret@db/energy'}\nadmins: [ann]\n"
                    "timezone: Europe/Berlin\nsampling: {intervl_s: 2}\n")
    os.chmod(site, 0o644)
    _load(str(site))
    reader = json.loads((tmp_path / "site.yaml.reader.json").read_text())
    assert _mode(tmp_path / "site.yaml.reader.json") == 0o644 and _mode(tmp_path / "site.yaml.resolved.json") == 0o600
    assert reader["config"] == {"paths": {"store_url": "postgresql+psycopg://u:secret@db/energy"}, "admins": ["ann"],
                                "timezone": "Europe/Berlin", "source_path": str(site),
                                "sampling": {"interim_s": 60.0}}  # the documented default
    full = json.loads((tmp_path / "site.yaml.resolved.json").read_text())
    assert reader["key"] == full["key"] and reader["problems"] == full["problems"]
    assert "sampling.intervl_s" in reader["problems"][0]  # the typo is reported to readers too
    # group-readable only: the copy too, with site.yaml's group (one this process may set)
    site.write_text("admins: [bob]\n")
    os.chmod(site, 0o640)
    os.chown(site, -1, os.getgid())
    _load(str(site))
    st = os.stat(tmp_path / "site.yaml.reader.json")
    assert (_mode(tmp_path / "site.yaml.reader.json"), st.st_gid) == (0o640, os.getgid())
    # owner-only: no readers' copy at all (an older one removed)
    site.write_text("admins: [carl]\n")
    os.chmod(site, 0o600)
    _load(str(site))
    assert not (tmp_path / "site.yaml.reader.json").exists()


def test_resolved_config_prefers_the_full_copy_and_ignores_a_stale_reader_copy(tmp_path, monkeypatch):
    from slurm_energy.slurm.config_cache import reader_config as resolved_config

    site = tmp_path / "site.yaml"
    site.write_text("timezone: Asia/Tokyo\n")
    _load(str(site))
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    cfg, problems, path = resolved_config()
    assert (cfg.timezone, problems, path, "hardware" in cfg) == ("Asia/Tokyo", [], str(site), True)
    os.unlink(tmp_path / "site.yaml.resolved.json")  # as an ordinary user, who cannot read it
    cfg, _, _ = resolved_config()
    default_url = "sqlite:////var/lib/slurm-energy/jobs.db"  # paths.store_url's documented default
    assert (cfg.timezone, cfg.paths.store_url, "hardware" in cfg) == ("Asia/Tokyo", default_url, False)
    site.write_text("timezone: Europe/Paris\n")  # edited since: the copy's key no longer matches
    assert resolved_config() is None
    assert H.READER_SUFFIX == ".reader.json"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root to run as nobody")
def test_ordinary_users_jobenergy_imports_no_pydantic():
    d = tempfile.mkdtemp(prefix="je-reader-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        u = f"sqlite:///{d}/jobs.db"
        s = open_store(u)
        s.put(finished(node_record(job_id="41", user="nobody")))  # 3.6e6 J CPU = 1 kWh, 3.6e5 J RAM = 0.1 kWh
        s.close()
        site = os.path.join(d, "site.yaml")
        with open(site, "w") as f:
            f.write(f"paths: {{store_url: '{u}'}}\n")
        os.chmod(site, 0o644)
        _load(site)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_ENERGY_CONFIG": site, "PYTHONPATH": os.getcwd()}
        code = ("import sys; from slurm_energy.cli.jobenergy import main; rc = main(sys.argv[1:]); "
                "print('HEAVY', *[m for m in ('pydantic', 'sqlalchemy', 'yaml') if m in sys.modules]); sys.exit(rc)")
        p = subprocess.run([shutil.which("runuser"), "-u", "nobody", "--", sys.executable, "-c", code, "-P", "-o",
                            "JobID,User,CPU_kWh,RAM_kWh", "-j", "41"], capture_output=True, text=True, env=env, cwd=d)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == ["JobID|User|CPU_kWh|RAM_kWh", "41|nobody|1|0.1", "HEAVY"]
    finally:
        shutil.rmtree(d, ignore_errors=True)

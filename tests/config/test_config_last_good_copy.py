"""Site config for the Slurm hooks: last good copy, duplicate keys, messages that say what is in force.

From a tester's report: a missing ``}`` in site.yaml sent every job's record to the default store;
a second ``sampling:`` block silently replaced the first; messages read "that part ignored ...
documented defaults used".
"""

import os
import stat
import textwrap
from datetime import datetime

import pytest

from slurm_energy.config import (
    ConfigError,
    last_good_path,
    load_site_config,
    load_site_config_for_hooks,
    load_site_config_lenient,
    save_last_good,
    site_config_from_dict_lenient,
)
from slurm_energy.config.carbon import resolve_carbon

GOOD = textwrap.dedent("""\
    paths:
      spool_dir: /srv/se/spool
      store_url: sqlite:////srv/se/lib/jobs.db
      log_dir: /srv/se/log
    datacenters:
      north: {pue: 1.1, carbon_intensity: {value: 20}, partitions: [p1]}
    """)
#: GOOD with the closing brace of the datacenter lost (the tester's typo), on line 6.
BROKEN = GOOD.replace("partitions: [p1]}", "partitions: [p1]")
#: 2024-03-01 12:00:00 UTC as a POSIX timestamp (s): 19783 days * 86400 s + 12 * 3600 s.
MTIME = 19783 * 86400 + 12 * 3600


def _write(tmp_path, text, name="site.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


# --------------------------------------------------------------------------- last good copy
def test_valid_file_is_kept_as_last_good_with_the_files_mode(tmp_path):
    p = _write(tmp_path, GOOD)
    os.chmod(p, 0o600)  # a config holding store credentials
    cfg, msgs = load_site_config_for_hooks(p)
    assert msgs == [] and cfg.paths.store_url == "sqlite:////srv/se/lib/jobs.db"
    lg = tmp_path / "site.yaml.last-good"
    assert last_good_path(p) == str(lg)
    assert lg.read_text() == GOOD
    assert stat.S_IMODE(lg.stat().st_mode) == 0o600  # as private as the config itself
    assert [f.name for f in tmp_path.iterdir() if f.name.endswith(".tmp")] == []  # no temp file left
    os.chmod(p, 0o664)
    open(p, "a").write("# changed\n")
    load_site_config_for_hooks(p)
    assert stat.S_IMODE(lg.stat().st_mode) == 0o644  # readable like site.yaml, never group-writable


def test_readers_do_not_write_the_copy(tmp_path):
    p = _write(tmp_path, GOOD)
    load_site_config_for_hooks(p, save=False)
    assert not os.path.exists(last_good_path(p))


def test_last_good_rewritten_only_when_content_differs(tmp_path):
    p = _write(tmp_path, GOOD)
    load_site_config_for_hooks(p)
    lg = tmp_path / "site.yaml.last-good"
    ino = lg.stat().st_ino
    load_site_config_for_hooks(p)
    assert lg.stat().st_ino == ino  # same content: not replaced (os.replace would give a new inode)
    changed = GOOD.replace("pue: 1.1", "pue: 1.2")
    p.write_text(changed)
    load_site_config_for_hooks(p)
    assert lg.read_text() == changed and lg.stat().st_ino != ino


def test_file_with_problems_does_not_replace_last_good(tmp_path):
    p = _write(tmp_path, GOOD)
    load_site_config_for_hooks(p)
    p.write_text("pue: 0.5\n" + GOOD)  # parsable but PUE < 1: lenient load has a message
    cfg, msgs = load_site_config_for_hooks(p)
    assert cfg.source_path == str(p) and msgs  # the file itself is in force, minus pue
    assert (tmp_path / "site.yaml.last-good").read_text() == GOOD


def test_syntax_error_uses_last_good_copy_and_says_so(tmp_path):
    p = _write(tmp_path, GOOD)
    load_site_config_for_hooks(p)
    lg = tmp_path / "site.yaml.last-good"
    os.utime(lg, (MTIME, MTIME))
    p.write_text(BROKEN)
    cfg, msgs = load_site_config_for_hooks(p)
    # the admin's store and logs stay in force, not /var/lib/slurm-energy/jobs.db
    assert cfg.paths.store_url == "sqlite:////srv/se/lib/jobs.db" and cfg.paths.log_dir == "/srv/se/log"
    assert resolve_carbon(cfg, partition="p1").pue == 1.1  # PUE of datacenter north, from the copy
    assert cfg.source_path == str(lg)
    assert len(msgs) == 1
    m = msgs[0]
    assert m.startswith(f"{p}: not valid YAML: while parsing a flow mapping")
    assert f'in "{p}", line 6, column 10' in m  # the '{' opening north's mapping (1-based)
    assert "expected ',' or '}'" in m
    when = datetime.fromtimestamp(MTIME).astimezone().isoformat(timespec="seconds")
    assert f"The site config {p} is unparsable; the last good copy {lg} from {when} is in force" in m
    assert "ignored" not in m and "defaults" not in m  # only what is in force
    assert lg.read_text() == GOOD  # the broken text never becomes the last good copy


def test_syntax_error_without_last_good_says_documented_defaults(tmp_path):
    p = _write(tmp_path, BROKEN)
    cfg, msgs = load_site_config_for_hooks(p)
    assert cfg.paths.store_url == "sqlite:////var/lib/slurm-energy/jobs.db"  # outside the 0700 spool
    assert len(msgs) == 1 and "not valid YAML" in msgs[0]
    assert f"is unparsable and there is no last good copy ({p}.last-good: No such file" in msgs[0]
    assert "documented defaults are in force for every setting (store sqlite:////var/lib/slurm-energy/" in msgs[0]
    assert not os.path.exists(last_good_path(p))


def test_missing_file_uses_last_good_copy(tmp_path):
    p = _write(tmp_path, GOOD)
    load_site_config_for_hooks(p)
    p.unlink()
    cfg, msgs = load_site_config_for_hooks(p)
    assert cfg.paths.log_dir == "/srv/se/log"
    assert "cannot read the site config (No such file or directory)" in msgs[0]
    assert f"The site config {p} cannot be read; the last good copy" in msgs[0]


def test_top_level_list_uses_last_good_copy(tmp_path):
    p = _write(tmp_path, GOOD)
    load_site_config_for_hooks(p)
    p.write_text("- paths\n- datacenters\n")
    cfg, msgs = load_site_config_for_hooks(p)
    assert cfg.paths.spool_dir == "/srv/se/spool"
    assert "top level must be a mapping" in msgs[0] and "got list" in msgs[0]


def test_last_good_write_failure_never_raises(tmp_path):
    p = _write(tmp_path, GOOD)
    os.mkdir(last_good_path(p))  # a directory where the copy should go: open/replace fail (as root too)
    cfg, msgs = load_site_config_for_hooks(p)
    assert msgs == [] and cfg.paths.store_url == "sqlite:////srv/se/lib/jobs.db"
    assert save_last_good(p, GOOD) is False
    assert os.listdir(tmp_path) == ["site.yaml", "site.yaml.last-good"]  # no temp file left


def test_hooks_load_config_falls_back_to_last_good(tmp_path, monkeypatch):
    from slurm_energy.slurm.config_cache import load_config as _load_config

    p = _write(tmp_path, GOOD)
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(p))
    errors: list[str] = []
    assert _load_config(errors).paths.store_url == "sqlite:////srv/se/lib/jobs.db" and errors == []
    p.write_text(BROKEN)
    cfg = _load_config(errors)
    assert cfg.paths.store_url == "sqlite:////srv/se/lib/jobs.db"
    assert len(errors) == 1 and errors[0].startswith(f"site config problem: {p}: not valid YAML")
    assert "last good copy" in errors[0] and "ignored" not in errors[0]


# --------------------------------------------------------------------------- duplicate keys
def test_duplicate_top_level_key_names_key_and_both_lines(tmp_path):
    p = _write(tmp_path, "sampling:\n  interval_s: 2\ncluster_name: c\nsampling:\n  interim_s: 30\n")
    with pytest.raises(ConfigError) as ei:
        load_site_config(p)
    assert str(ei.value) == (
        f"{p}: not valid YAML: duplicate key 'sampling' at line 1 and again at line 4; YAML keeps only "
        f"the last, so the one at line 1 would be silently lost. Fix: merge the two into one "
        f"'sampling' entry")


def test_duplicate_nested_key_named_with_its_path(tmp_path):
    p = _write(tmp_path, "datacenters:\n  a:\n    pue: 1.1\n    partitions: [x]\n    pue: 1.3\n")
    with pytest.raises(ConfigError, match=r"duplicate key 'datacenters\.a\.pue' at line 3 and again at line 5"):
        load_site_config(p)
    q = _write(tmp_path, "datacenters:\n  a: {pue: 1.1}\n  a: {pue: 1.2}\n", "two.yaml")
    with pytest.raises(ConfigError, match=r"duplicate key 'datacenters\.a' at line 2 and again at line 3"):
        load_site_config(q)


def test_same_key_in_different_mappings_is_fine(tmp_path):
    p = _write(tmp_path, "datacenters:\n  a: {pue: 1.1, partitions: [x]}\n  b: {pue: 1.2, partitions: [y]}\n")
    cfg = load_site_config(p)
    assert (resolve_carbon(cfg, partition="x").pue, resolve_carbon(cfg, partition="y").pue) == (1.1, 1.2)


def test_duplicate_key_in_hooks_keeps_last_good(tmp_path):
    p = _write(tmp_path, GOOD)
    load_site_config_for_hooks(p)
    p.write_text(GOOD + "paths:\n  log_dir: /elsewhere\n")
    cfg, msgs = load_site_config_for_hooks(p)
    assert cfg.paths.log_dir == "/srv/se/log"
    assert "duplicate key 'paths' at line 1 and again at line 7" in msgs[0]


# --------------------------------------------------------------------------- messages say what is in force
def test_lenient_syntax_error_message_says_defaults_in_force(tmp_path):
    p = _write(tmp_path, BROKEN)
    _cfg, msgs = load_site_config_lenient(p)
    assert len(msgs) == 1 and "ignored" not in msgs[0]
    assert f"Nothing from {p} is in force: documented defaults are in force for every setting" in msgs[0]


def test_in_force_message_names_each_value():
    cfg, msgs = site_config_from_dict_lenient(
        {"paths": {"spool_dir": "/srv/se", "log_dir": 7}, "sampling": 5, "cluster_name": "c"}, "f.yaml")
    assert msgs[-1] == (
        "f.yaml: every other key of this file is in force; in place of the bad keys: "
        "sampling = its documented defaults (interval_s 5.0, interim_s 60.0, epilog_wait_s 60.0, sampler 'node'); "
        "paths.log_dir = '/var/log/slurm-energy' (documented default)")
    assert cfg.cluster_name == "c" and cfg.paths.spool_dir == "/srv/se"

"""cli/sudo_caller.py: readers run through sudo (docs/STORE.md: a root-only store offered with a sudoers line) act for
the caller named by SUDO_UID/SUDO_USER, with the system site config's admins; the caller's own
SLURM_ENERGY_CONFIG (where she could name herself admin) is ignored, and said so."""

import os

import pytest

from slurm_energy.cli.jobenergy import main as jobenergy
from slurm_energy.cli.main import main as se_main
from slurm_energy.config import schema
from slurm_energy.slurm import config_cache as hookconfig
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.fixture
def sudo_alice(tmp_path, monkeypatch):
    """A store with alice's job 100 and bob's job 200; the system site config at a tmp path; this
    process is root run by ``sudo`` from alice, whose own SLURM_ENERGY_CONFIG names her admin."""
    url = f"sqlite:///{tmp_path}/jobs.db"
    s = open_store(url)
    s.put(finished(node_record(job_id="100", start=T0, end=T0 + 3600, user="alice")))
    s.put(finished(node_record(job_id="200", start=T0, end=T0 + 3600, user="bob")))
    s.close()
    system = tmp_path / "system-site.yaml"
    system.write_text(f"cluster_name: c1\npaths: {{store_url: '{url}'}}\nadmins: [carol]\n")
    for mod in (hookconfig, schema):
        monkeypatch.setattr(mod, "DEFAULT_PATH", str(system))
    mine = tmp_path / "alice.yaml"
    mine.write_text(f"cluster_name: c1\npaths: {{store_url: '{url}'}}\nadmins: [alice]\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(mine))
    monkeypatch.delenv("SLURM_ENERGY_STORE", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setenv("SUDO_UID", "1000")
    monkeypatch.setenv("SUDO_USER", "alice")
    return system, mine


def _note(mine, prog="jobenergy"):
    return (f"{prog}: note: run through sudo: SLURM_ENERGY_CONFIG={mine} is ignored; the system site config "
            f"{hookconfig.DEFAULT_PATH} is used (its admins, store and time zone)\n")


def test_sudo_jobenergy_shows_only_the_callers_jobs_and_ignores_her_config(sudo_alice, capsys):
    _system, mine = sudo_alice
    assert jobenergy(["-P", "-n", "-o", "JobID,User", "100", "200"]) == 1  # 200 is bob's: not hers
    out, err = capsys.readouterr()
    assert out == "100|alice\n"
    assert err.startswith(_note(mine))
    assert err.count("SLURM_ENERGY_CONFIG") == 1
    assert "200" in err and "among alice's jobs" in err


def test_sudo_jobenergy_u_other_user_is_refused(sudo_alice, capsys):
    assert jobenergy(["-u", "bob", "-S", "2023-11-01"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert ("jobenergy: -u/--user bob: you (alice) can only see your own jobs; nothing shown. "
            "Ask an admin (root or 'admins' in the site config) for other users' jobs\n") in err


def test_sudo_caller_in_the_system_admins_sees_every_job(sudo_alice, capsys, monkeypatch):
    monkeypatch.setenv("SUDO_USER", "carol")
    monkeypatch.setenv("SUDO_UID", "1002")
    assert jobenergy(["-P", "-n", "-o", "JobID,User", "100", "200"]) == 0
    assert capsys.readouterr().out == "100|alice\n200|bob\n"


def test_root_without_sudo_still_sees_every_job(sudo_alice, capsys, monkeypatch):
    monkeypatch.delenv("SUDO_USER")
    monkeypatch.delenv("SUDO_UID")
    assert jobenergy(["-P", "-n", "-o", "JobID,User", "100", "200"]) == 0
    out, err = capsys.readouterr()
    assert out == "100|alice\n200|bob\n" and "ignored" not in err


def test_sudo_root_caller_is_root(sudo_alice, capsys, monkeypatch):
    monkeypatch.setenv("SUDO_USER", "root")
    monkeypatch.setenv("SUDO_UID", "0")
    assert jobenergy(["-P", "-n", "-o", "JobID,User", "100", "200"]) == 0
    assert capsys.readouterr().out == "100|alice\n200|bob\n"


def test_sudo_rollup_is_refused_to_a_non_admin_caller(sudo_alice, capsys):
    _system, mine = sudo_alice
    assert se_main(["rollup", "--month", "2023-11"]) == 1
    err = capsys.readouterr().err
    assert err == (_note(mine, "slurm-energy") + "slurm-energy: rollup shows every user's energy: only root and "
                   "site-config admins may run it (you are alice)\n")

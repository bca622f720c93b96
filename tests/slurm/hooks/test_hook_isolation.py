"""Hardening of the installed hooks (issue 11): slurmd runs the Prolog/Epilog as root in its own
working directory, so nothing may be imported from there (or from PYTHONPATH), and
`slurm-energy install --print` must never print Prolog=/Epilog= lines for hook files that are not
this installation's (pasting them into slurm.conf drains every node)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_energy.cli.install_cmd import hook_text
from slurm_energy.cli.main import main as cli


def _planted(d: Path, marker: Path) -> None:
    """A fake slurm_energy package in ``d`` that leaves ``marker`` behind when imported."""
    pkg = d / "slurm_energy"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('planted package imported')\n")


@pytest.mark.parametrize("which", ["prolog", "epilog"])
def test_hook_never_imports_a_package_from_its_cwd_or_pythonpath(tmp_path, which):
    cwd, pp = tmp_path / "slurmd-cwd", tmp_path / "pythonpath"
    m_cwd, m_pp = tmp_path / "imported-from-cwd", tmp_path / "imported-from-pythonpath"
    _planted(cwd, m_cwd)
    _planted(pp, m_pp)
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\npaths:\n  spool_dir: {tmp_path}/spool\n  log_dir: {tmp_path}/log\n")
    hook = tmp_path / which
    hook.write_text(hook_text(which, sys.executable, str(site)))  # as `slurm-energy install` writes it
    hook.chmod(0o755)
    # no SLURM_JOB_ID: the real package's hook logs that and exits 0
    p = subprocess.run([str(hook)], cwd=cwd, env={"PYTHONPATH": str(pp)}, capture_output=True, timeout=10)
    assert p.returncode == 0
    assert not m_cwd.exists(), "the hook imported slurm_energy from slurmd's working directory"
    assert not m_pp.exists(), "the hook imported slurm_energy from PYTHONPATH"
    logged = (tmp_path / "log" / "hooks.log").read_text()  # the installed package ran instead
    assert "SLURM_JOB_ID is not set" in logged


def test_detached_sampler_and_finalizer_run_isolated(monkeypatch):
    from slurm_energy.slurm import detach

    seen = []
    monkeypatch.setattr(detach, "spawn_detached", lambda argv, logf, env=None, nice=0: seen.append(argv) or 4242)
    assert detach.spawn(["-m", "slurm_energy.slurm.sampler", "sampler", "/x", "n1"], "/dev/null") == 4242
    assert seen[0][:3] == [detach._python(), "-I", "-m"]


def _install(tmp_path, *extra: str) -> int:
    if not (tmp_path / "site.yaml").exists():  # install refuses a missing --config
        (tmp_path / "site.yaml").write_text("cluster_name: t\n")
    return cli(["install", "--hooks-dir", str(tmp_path / "hooks"), "--config", str(tmp_path / "site.yaml"),
                "--marks-tmpfs", "none", *extra])


def test_install_print_without_installed_hooks_warns_and_fails(tmp_path, capsys):
    assert _install(tmp_path, "--print") == 1
    out, err = capsys.readouterr()
    assert out == ""  # nothing an admin could paste into slurm.conf
    assert f"{tmp_path}/hooks/prolog" in err and "install" in err and "--hooks-dir" in err


def test_install_print_after_install_prints_this_installations_hooks(tmp_path, capsys):
    assert _install(tmp_path) == 0
    capsys.readouterr()
    assert _install(tmp_path, "--print") == 0
    out, _err = capsys.readouterr()
    assert f"Prolog={tmp_path}/hooks/prolog" in out.splitlines()
    assert f"Epilog={tmp_path}/hooks/epilog" in out.splitlines()
    # the files are what this package ships, with this interpreter
    assert f"PY={sys.executable}\n" in (tmp_path / "hooks" / "prolog").read_text()


def test_install_print_rejects_hooks_of_another_python_or_not_executable(tmp_path, capsys):
    assert _install(tmp_path) == 0
    pro = tmp_path / "hooks" / "prolog"
    pro.write_text(pro.read_text().replace(f"PY={sys.executable}", "PY=/elsewhere/bin/python"))
    os.chmod(tmp_path / "hooks" / "epilog", 0o644)
    capsys.readouterr()
    assert _install(tmp_path, "--print") == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "PY=/elsewhere/bin/python" in err and "epilog: not executable" in err
    # another --config than the one the hooks were written with is not this installation either
    assert _install(tmp_path) == 0
    assert cli(["install", "--print", "--hooks-dir", str(tmp_path / "hooks"), "--config", "/other.yaml"]) == 1


def test_install_print_says_which_config_the_hooks_read_and_which_settings_differ(tmp_path, capsys):
    (tmp_path / "site.yaml").write_text("cluster_name: t\npaths:\n  store_url: postgresql+psycopg://u:pw@db/se\n")
    assert _install(tmp_path) == 0
    other = tmp_path / "other.yaml"
    other.write_text("cluster_name: t2\nsampling: {interval_s: 2}\n")
    capsys.readouterr()
    assert cli(["install", "--print", "--hooks-dir", str(tmp_path / "hooks"), "--config", str(other)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    site = tmp_path / "site.yaml"
    assert (f"  {tmp_path}/hooks/prolog: not written by this installation: it reads the site config '{site}', "
            f"not '{other}'\n") in err
    # the 3 settings that differ (sorted), the store password hidden; the default store URL on the right
    assert (f"  site config the hooks read vs --config {other}: 3 setting(s) differ: cluster_name: 't' (hooks) vs "
            "'t2' (--config); paths.store_url: 'postgresql+psycopg://u:***@db/se' (hooks) vs "
            "'sqlite:////var/lib/slurm-energy/jobs.db' (--config); sampling.interval_s: 5.0 (hooks) vs 2.0 "
            "(--config)\n") in err
    assert "pw@" not in err and err.count("site config the hooks read") == 1  # once for both hooks
    # a copy of the same file under another path: only the path differs
    same = tmp_path / "copy.yaml"
    same.write_text(site.read_text())
    assert cli(["install", "--print", "--hooks-dir", str(tmp_path / "hooks"), "--config", str(same)]) == 1
    assert f"vs --config {same}: the two files set the same values (only the path differs)" in capsys.readouterr().err


def test_install_print_names_the_first_line_of_a_hook_from_another_version(tmp_path, capsys):
    assert _install(tmp_path) == 0
    epi = tmp_path / "hooks" / "epilog"
    lines = epi.read_text().splitlines(keepends=True)
    n = next(i for i, x in enumerate(lines) if x.startswith("cd /"))
    lines[n] = "cd /tmp || exit 0\n"
    epi.write_text("".join(lines))
    capsys.readouterr()
    assert _install(tmp_path, "--print") == 1
    err = capsys.readouterr().err
    assert (f"{epi}: not written by this installation: its script differs from this version's from line {n + 1} "
            "(another slurm-energy version's, or edited): 'cd /tmp || exit 0', this version writes "
            "'cd / || exit 0'") in err
    assert "prolog" not in err.split("Install them first")[0]  # the untouched prolog is fine


def test_install_print_without_config_prints_the_lines_for_the_config_the_hooks_read(tmp_path, capsys):
    """Issue: --print without --config accepted the hooks' config but printed lines for the default
    one (no SLURM_ENERGY_CONFIG=, logs under /var/log/slurm-energy)."""
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\npaths:\n  spool_dir: {tmp_path}/spool\n  log_dir: {tmp_path}/mylog\n")
    assert _install(tmp_path) == 0
    capsys.readouterr()
    assert cli(["install", "--print", "--hooks-dir", str(tmp_path / "hooks")]) == 0
    out, err = capsys.readouterr()
    assert err == (f"# the hooks in {tmp_path}/hooks read the site config '{site}'; "
                   "the collect/prune lines below use it\n")
    cron = [x for x in out.splitlines() if x.startswith("# */5 ")]
    assert cron == [f"# */5 * * * * mkdir -p -m 0700 {tmp_path}/mylog && SLURM_ENERGY_CONFIG={site} "
                    f"{sys.executable} -I -m slurm_energy.cli.main collect --older-than 5 "
                    f">>{tmp_path}/mylog/collect.log 2>&1"]
    assert any(x.endswith(f"install --config {site} --units /etc/systemd/system") for x in out.splitlines())
    assert "/var/log/slurm-energy" not in out

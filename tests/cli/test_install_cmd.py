"""cli/install_cmd.py: ``slurm-energy install`` into an image (a chroot without /proc, as the cgroup v2 VM's image is
built): the marks tmpfs cannot be mounted there, and the hooks and slurm.conf's lines must still
come (the VM's slurm.conf had no Prolog line when install stopped at the mount)."""

import os

import pytest

from slurm_energy.cli.main import main as se_main


@pytest.mark.skipif(os.geteuid() != 0, reason="install writes the hooks as root")
def test_a_marks_tmpfs_that_cannot_be_mounted_warns_and_the_hooks_and_lines_still_come(tmp_path, site_config, capsys):
    site = site_config.write()
    units = tmp_path / "units"
    units.mkdir()
    rc = se_main(["install", "--hooks-dir", str(tmp_path / "hooks"), "--config", str(site),
                  "--marks-dir", "/proc/se-no-such-dir/marks", "--systemd-dir", str(units)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert sorted(os.listdir(tmp_path / "hooks")) == ["epilog", "mail", "prolog"]
    assert f"Prolog={tmp_path}/hooks/prolog" in out.splitlines()
    assert "warning: the marks tmpfs is not mounted now" in err and "no size or inode limit" in err
    (unit,) = os.listdir(units)  # the .mount unit for the next boot is written before the mount is tried
    assert unit.endswith(".mount")


@pytest.mark.skipif(os.geteuid() != 0, reason="install writes the hooks as root")
def test_units_writes_the_debs_hardened_collect_and_prune_units_run_by_this_python(tmp_path, site_config, capsys):
    """A pip install gets the .deb's four units (packaging/systemd), not a hand-written copy: every
    line the same except ExecStart (this Python, isolated, for /usr/bin/slurm-energy) and the
    site config in the environment (a tester found only a cron line for prune, and an unhardened
    collect unit, on the pip path)."""
    import re
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    site = site_config.write()
    units = tmp_path / "units"
    units.mkdir()
    rc = se_main(["install", "--hooks-dir", str(tmp_path / "hooks"), "--config", str(site), "--marks-tmpfs", "none",
                  "--systemd-dir", str(tmp_path / "none"), "--units", str(units)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert sorted(os.listdir(units)) == ["slurm-energy-collect.service", "slurm-energy-collect.timer",
                                         "slurm-energy-prune.service", "slurm-energy-prune.timer"]
    shipped = Path(__file__).resolve().parents[2] / "packaging" / "systemd"
    for name in os.listdir(units):
        got = (units / name).read_text().splitlines()
        want = (shipped / name).read_text().splitlines()
        assert got[0].startswith("# written by slurm-energy install --units")
        if name.endswith(".timer"):
            assert got[1:] == want
            continue
        cmd = "collect --older-than 5" if "collect" in name else "prune --older-than 14"
        assert [x for x in got[1:] if x not in want] == [f"Environment=SLURM_ENERGY_CONFIG={site}",
                                                         f"ExecStart={sys.executable} -I -m slurm_energy.cli.main {cmd}"]
        assert [x for x in want if x not in got] == [f"ExecStart=/usr/bin/slurm-energy {cmd}"]
        assert any(re.match(r"CapabilityBoundingSet=CAP_DAC_READ_SEARCH", x) for x in got)
    if shutil.which("systemd-analyze"):
        r = subprocess.run(["systemd-analyze", "verify", *sorted(str(p) for p in units.iterdir())],
                           capture_output=True, text=True)
        assert "rror" not in r.stderr, r.stderr
    assert "--units /etc/systemd/system" in out  # the slurm.conf comments say how, for both timers
    assert "prune --older-than 14" in out and "collect --older-than 5" in out

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

"""Slurm's client commands found where sites install them (slurm_energy/slurmpaths.py): a fresh
tester's site with Slurm under /opt/slurm lost Slurm's facts on every job with /usr/bin fixed."""

from __future__ import annotations

import os

from slurm_energy.slurmpaths import SLURM_BIN_DIRS, client_path


def _exe(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    os.chmod(path, 0o755)


def test_the_first_directory_with_the_command_wins(tmp_path):
    dirs = (str(tmp_path / "usr/bin"), str(tmp_path / "usr/local/bin"), str(tmp_path / "opt/slurm/bin"))
    _exe(tmp_path / "opt/slurm/bin/sacct")
    assert client_path("sacct", dirs) == str(tmp_path / "opt/slurm/bin/sacct")
    _exe(tmp_path / "usr/local/bin/sacct")
    assert client_path("sacct", dirs) == str(tmp_path / "usr/local/bin/sacct")
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/sacct").write_text("not executable")  # a file that cannot run is no client
    assert client_path("sacct", dirs) == str(tmp_path / "usr/local/bin/sacct")


def test_none_found_is_the_first_directorys_path_which_then_fails_as_not_installed(tmp_path):
    assert client_path("scontrol", (str(tmp_path / "a"), str(tmp_path / "b"))) == str(tmp_path / "a/scontrol")
    assert SLURM_BIN_DIRS[:3] == ("/usr/bin", "/usr/local/bin", "/opt/slurm/bin")

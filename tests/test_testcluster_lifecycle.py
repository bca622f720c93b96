"""scripts/testcluster.sh start/stop leaves the machine as it found it (issue 11, hardening).

Starts and stops the shared test cluster itself, so it runs only when asked:
``SLURM_ENERGY_TEST_LIFECYCLE=<version> pytest tests/test_testcluster_lifecycle.py`` (.ci/run does,
for each Slurm version; hold /var/lock/slurm-energy-cluster.lock on a shared machine). Checks: no system
directory's mode changes (the old script chmod'ed /var/tmp from 1777 to 755), every daemon it
started is gone after `stop` (munged included, by PID), a munged it did not start is left alone,
nothing stays mounted under the Debian root, and the nodes' cgroup dirs are removed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TC = REPO / "scripts" / "testcluster.sh"
VERSION = os.environ.get("SLURM_ENERGY_TEST_LIFECYCLE", "")
SYSTEM_DIRS = ["/tmp", "/var/tmp", "/var/cache", "/run", "/var/lib"]

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not VERSION or os.geteuid() != 0,
                                 reason="starts/stops the shared test cluster: SLURM_ENERGY_TEST_LIFECYCLE=<version>, as root")]


def _modes() -> dict[str, str]:
    return {d: oct(os.stat(d).st_mode) for d in SYSTEM_DIRS if os.path.exists(d)}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _pids_named(comm: str) -> set[int]:
    out = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "comm").read_text().strip() == comm and _alive(int(p.name)):
                    out.add(int(p.name))
            except OSError:
                pass
    return out


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "L"}
    return subprocess.run(["bash", str(TC), *args], capture_output=True, text=True, env=env, check=check, timeout=900)


def test_start_stop_leaves_the_system_as_found():
    modes = _modes()
    munged_before = _pids_named("munged")
    _tc("start", "--slurm", VERSION)
    base = Path(Path("/run/slurm-energy-testcluster").read_text().strip())
    try:
        assert _modes() == modes  # no system directory's mode changed by start
        assert _tc("status", check=False).returncode == 0
        assert _tc("version").stdout.split()[-1].startswith(VERSION + ".")
        state = dict(x.split("=", 1) for x in (base / "etc" / "cluster.env").read_text().split())
        root = state.get("ROOT", "")
        started = {f.name: int(f.read_text()) for f in (base / "run").glob("*.pid")}
        assert {"slurmctld.pid", "slurmd-n1.pid", "slurmd-n2.pid", "slurmdbd.pid"} <= started.keys()
        assert all(_alive(p) for p in started.values()), started
    finally:
        _tc("stop")
    assert _modes() == modes
    assert not [n for n, p in started.items() if _alive(p)], "daemons left running after stop"
    assert munged_before <= _pids_named("munged")  # a munged it did not start keeps running
    if "munged.pid" in started:
        assert not _alive(started["munged.pid"])  # the munged it started is stopped
    if root:
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        assert not [m for m in mounts if m.startswith(root + "/")], "mounts left under the Debian root"
        assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _readlink(p / "root") == root]
    assert not list(Path("/sys/fs/cgroup").glob("*/slurm_n[12]")), "the nodes' cgroup dirs were left"
    assert not Path("/run/slurm-energy-testcluster").exists()


def _readlink(p: Path) -> str:
    try:
        return os.readlink(p)
    except OSError:
        return ""

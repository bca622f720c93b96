"""RAPL end to end: a helper process advances a fake powercap tree at a known wattage while real
Slurm jobs run; the site config of the test cluster points hardware.rapl_root at it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_energy.model import Method
from tests.helpers.samplefile_rows import read_samples

pytestmark = pytest.mark.slurm

PKG_W, DRAM_W = 50.0, 10.0  # the fake package and DRAM draw, W
PKG_RANGE_UJ = 400_000_000  # 400 J: the package counter wraps every 8 s at 50 W (samples every 2 s)

WRITER = r"""
import os, sys, time
root, pkg_w, dram_w, rng = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
t0 = time.time()
# Written in place, as the kernel's sysfs attribute changes in place: the sampler keeps a descriptor
# on energy_uj and preads it. One fixed-width pwrite (leading spaces; int() ignores them), so a read
# never sees a truncated or shortened file.
pkg = os.open(os.path.join(root, "intel-rapl:0", "energy_uj"), os.O_WRONLY)
dram = os.open(os.path.join(root, "intel-rapl:0", "intel-rapl:0:0", "energy_uj"), os.O_WRONLY)
def put(fd, value):
    os.pwrite(fd, f"{value:>20}\n".encode(), 0)
while True:
    dt = time.time() - t0
    put(pkg, int(pkg_w * dt * 1e6) % rng)
    put(dram, int(dram_w * dt * 1e6) % (10 ** 12))
    time.sleep(0.01)
"""

CPU_JOB = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --cpus-per-task=1
#SBATCH --mem=300M
#SBATCH -w n1
/opt/slurm-energy/venv/bin/python -c '
import time
t0 = time.time()
while time.time() - t0 < 12:
    sum(i * i for i in range(10000))'
"""


def _zone(d: Path, name: str, rng: int, max_w: float):
    d.mkdir(parents=True, exist_ok=True)
    (d / "name").write_text(name + "\n")
    (d / "max_energy_range_uj").write_text(f"{rng}\n")
    (d / "energy_uj").write_text(f"{0:>20}\n")  # the writer's fixed width
    (d / "constraint_0_max_power_uw").write_text(f"{int(max_w * 1e6)}\n")


@pytest.fixture
def fake_rapl(cluster):
    root = cluster.base / "powercap"  # hardware.rapl_root of the test cluster's site config
    shutil.rmtree(root, ignore_errors=True)
    _zone(root / "intel-rapl:0", "package-0", PKG_RANGE_UJ, 200.0)
    _zone(root / "intel-rapl:0" / "intel-rapl:0:0", "dram", 10 ** 12, 50.0)
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(PKG_W), str(DRAM_W), str(PKG_RANGE_UJ)])
    time.sleep(0.3)
    yield root
    p.kill()
    p.wait()
    shutil.rmtree(root, ignore_errors=True)


def _sample_span(cluster, job: str) -> float:
    """Seconds between the first and last counter reading of the job's sample file."""
    f = cluster.base / "spool" / "jobs" / f"{job}-r0" / "samples-n1.jsonl"
    ts = [r["t"] for r in read_samples(str(f))
          if any(x.get("method") == "counter" for x in r["readings"])]
    return ts[-1] - ts[0]


def test_job_energy_matches_known_wattage_and_concurrent_jobs_do_not_exceed_node(cluster, fake_rapl):
    wd_a = cluster.workdir("alice", f"rapl-a-{os.getpid()}")
    wd_b = cluster.workdir("bob", f"rapl-b-{os.getpid()}")
    job_a = cluster.sbatch("alice", wd_a, CPU_JOB)
    job_b = cluster.sbatch("bob", wd_b, CPU_JOB)
    (a,) = cluster.wait_record(job_a)
    (b,) = cluster.wait_record(job_b)
    for rec, job in ((a, job_a), (b, job_b)):
        cpu = [d for d in rec.nodes[0].devices if d.device_class == "cpu"]
        ram = [d for d in rec.nodes[0].devices if d.device_class == "ram"]
        assert [d.device_id for d in cpu] == ["intel-rapl:0"] and [d.device_id for d in ram] == ["intel-rapl:0:0"]
        assert rec.methods == {"cpu": Method.COUNTER, "ram": Method.COUNTER}
        span = _sample_span(cluster, job)
        # the whole package over the job's samples: 50 W x span s, within 1 %, across counter wraps
        assert cpu[0].device_energy_j == pytest.approx(PKG_W * span, rel=0.01)
        assert ram[0].device_energy_j == pytest.approx(DRAM_W * span, rel=0.01)
        assert cpu[0].wraps >= 1 and cpu[0].resets == 0
        assert 0 < cpu[0].energy_j <= cpu[0].device_energy_j  # the job's share of the package
    # two jobs on n1 at the same time: together no more than the package over the union of their spans
    union = max(a.end_time, b.end_time) - min(a.start_time, b.start_time)
    cpu_a = sum(d.energy_j for d in a.nodes[0].devices if d.device_class == "cpu")
    cpu_b = sum(d.energy_j for d in b.nodes[0].devices if d.device_class == "cpu")
    assert cpu_a + cpu_b <= PKG_W * union * 1.001

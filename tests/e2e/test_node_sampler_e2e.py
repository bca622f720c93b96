"""The node sampler end to end: more jobs than CPUs on one node (oversubscribed), one sampling
process for all of them, every job's record against a hand computation from its own rows.

The site config is switched to ``sampling.sampler: node`` and the partition to
``OverSubscribe=FORCE:4`` for the test (both restored after); a helper process advances a fake
powercap package (hardware.rapl_root of the test cluster's site config, as tests/e2e/test_rapl_e2e.py)
at a known wattage. Six CPU-bound single-CPU jobs run on n1 (2 CPUs) at once.

The hand computation, per job, from its own sample file: for each pair of consecutive rows that
carry the package's reading, the package's counter delta (J) x the job's CPU share (the job's
cgroup CPU time delta / the node's busy time delta from /proc/stat, clamped to [0, 1]), the job's
CPU time being 0 before it is first seen (the Prolog's rows: it had just started) and carried once
its cgroup is gone (the Epilog's and the finalizer's rows); their sum is the job's CPU energy. The
record's must equal it (CI once saw 185.9 J against a hand of 160.2 J when the hand left out the
Prolog's row: the record was right).
And in every interval of the node sampler the jobs' shares add up to at most 1: their rows carry
the same instant (a per-job sampler's would not)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers.samplefile_rows import read_samples

pytestmark = pytest.mark.slurm

PKG_W = 60.0  # the fake package's draw, W
N_JOBS = 6  # on n1's 2 CPUs: 3x oversubscribed

WRITER = r"""
import os, sys, time
root, pkg_w = sys.argv[1], float(sys.argv[2])
t0 = time.time()
pkg = os.open(os.path.join(root, "intel-rapl:0", "energy_uj"), os.O_WRONLY)
while True:  # in place, fixed width, as sysfs: a read never sees the file short
    os.pwrite(pkg, f"{int(pkg_w * (time.time() - t0) * 1e6):>20}\n".encode(), 0)
    time.sleep(0.01)
"""

CPU_JOB = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --cpus-per-task=1
#SBATCH --mem=100M
#SBATCH --oversubscribe
#SBATCH -w n1
/opt/slurm-energy/venv/bin/python -c '
import time
t0 = time.time()
while time.time() - t0 < 20:
    sum(i * i for i in range(10000))'
"""


@pytest.fixture
def node_sampling(cluster):
    """The site config with sampling.sampler: node, the partition oversubscribed, a fake package."""
    root = cluster.base / "powercap"
    shutil.rmtree(root, ignore_errors=True)
    d = root / "intel-rapl:0"
    d.mkdir(parents=True)
    (d / "name").write_text("package-0\n")
    (d / "max_energy_range_uj").write_text(f"{10 ** 15}\n")  # no wrap in the test's minutes
    (d / "energy_uj").write_text(f"{0:>20}\n")
    (d / "constraint_0_max_power_uw").write_text("200000000\n")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(PKG_W)])
    before = cluster.site.read_text()
    assert "sampling:\n" in before
    cluster.site.write_text(before.replace("sampling:\n", "sampling:\n  sampler: node\n", 1))
    out = cluster.run(["scontrol", "update", "PartitionName=debug", "OverSubscribe=FORCE:4"])
    assert out.returncode == 0, out.stderr
    try:
        yield root
    finally:
        cluster.run(["scontrol", "update", "PartitionName=debug", "OverSubscribe=NO"])
        cluster.site.write_text(before)
        writer.kill()
        writer.wait()
        shutil.rmtree(root, ignore_errors=True)


def _hand_cpu_energy(rows: list[dict]) -> tuple[float, float, dict[float, float]]:
    """(the job's CPU energy J by hand, its largest one-interval energy J, {row time: its share})."""
    def cpu(r: dict) -> float | None:
        return r["job"].get("cpu_time_s") if r["job"] else None

    first = next(i for i, r in enumerate(rows) if cpu(r) is not None)
    ended, cum, carried = False, [], 0.0
    for i, r in enumerate(rows):  # the job's CPU time: 0 before it is first seen (it had just started),
        c = cpu(r)  # carried once it has ended (its cgroup gone: the Epilog's and finalizer's rows)
        cum.append(0.0 if i < first else c if c is not None else carried if ended else None)
        carried = cum[-1] if cum[-1] is not None else carried
        ended = ended or r["kind"] in ("cgroup_gone", "final")
    own = [(r, c) for r, c in zip(rows, cum) if c is not None and r["node"].get("cpu_busy_s") is not None
           and any(x["device_id"] == "intel-rapl:0" and x.get("energy_uj") is not None for x in r["readings"])]
    e, biggest, shares = 0.0, 0.0, {}

    def pkg(r: dict) -> int:
        return int(next(x["energy_uj"] for x in r["readings"] if x["device_id"] == "intel-rapl:0"))

    for (a, ca), (b, cb) in itertools.pairwise(own):
        delta_j = (pkg(b) - pkg(a)) / 1e6
        busy = b["node"]["cpu_busy_s"] - a["node"]["cpu_busy_s"]
        share = min(1.0, max(0.0, (cb - ca) / busy)) if busy > 0 else 0.0
        e += share * delta_j
        biggest = max(biggest, share * delta_j)
        if b["kind"] == "sample":
            shares[b["t"]] = share
    return e, biggest, shares


def test_oversubscribed_node_one_sampler_records_match_hand_computation(cluster, node_sampling):
    wds = [cluster.workdir("alice", f"nodesampler-{os.getpid()}-{k}") for k in range(N_JOBS)]
    jobs = [cluster.sbatch("alice", wd, CPU_JOB) for wd in wds]
    spool = cluster.base / "spool"
    # while they run: one node sampler process samples all of them, no per-job sampler
    t_end = time.time() + 60
    pid_file = spool / "node-sampler-n1.pid"
    while time.time() < t_end and not pid_file.exists():
        time.sleep(0.2)
    assert pid_file.exists(), f"no node sampler started; see {cluster.base}/log"
    recs = {j: cluster.wait_record(j, timeout_s=300)[0] for j in jobs}
    per_t: dict[float, float] = defaultdict(float)
    n_at: dict[float, int] = defaultdict(int)
    for j, rec in recs.items():
        jdir = spool / "jobs" / f"{j}-r0"
        assert not (jdir / "sampler-n1.pid").exists()  # the node sampler's job, not a per-job sampler's
        rows = read_samples(str(jdir / "samples-n1.jsonl"))
        kinds = [r["kind"] for r in rows]
        assert "start" in kinds and kinds.count("sample") >= 2
        hand, one_interval, shares = _hand_cpu_energy(rows)
        cpu = [d for d in rec.nodes[0].devices if d.device_class == "cpu"]
        assert [d.device_id for d in cpu] == ["intel-rapl:0"]
        # about 2 CPUs / 6 jobs of a busy node: each job a third of a CPU, a positive share
        assert hand > 0
        # the same rows, the same rule: equal to the rounding of the sample file's fixed-point columns;
        # where the job's last rows lack its CPU time (no cgroup_gone row seen) the record fills that
        # stretch from sacct TotalCPU or its last share (flagged), which the hand does not: one interval
        tail = {"tail_from_slurm_totalcpu", "tail_estimated"} & set(cpu[0].flags)
        tol = one_interval + 0.01 * hand if tail else 1e-6 * hand + 1e-3
        assert cpu[0].energy_j == pytest.approx(hand, abs=tol), (j, kinds, cpu[0].flags)
        assert cpu[0].energy_j <= cpu[0].device_energy_j
        for t, s in shares.items():
            per_t[t] += s
            n_at[t] += 1
    # rows of one tick carry one instant: the jobs' shares of an interval add up to at most 1
    assert max(n_at.values()) >= 3  # ticks whose one reading went into several jobs' files
    assert max(per_t.values()) <= 1.0 + 1e-9
    # and the package's energy shared out is at most what it used over the jobs' union
    union = max(r.end_time for r in recs.values()) - min(r.start_time for r in recs.values())
    total = sum(d.energy_j for r in recs.values() for d in r.nodes[0].devices if d.device_class == "cpu")
    assert total <= PKG_W * union * 1.001
    # the node sampler leaves with the last job
    t_end = time.time() + 60
    while time.time() < t_end and Path(f"/proc/{pid_file.read_text().strip()}").exists():
        time.sleep(0.5)
    log = (cluster.base / "log" / "node-sampler.log").read_text()
    assert "node sampler node=n1 leaves" in log

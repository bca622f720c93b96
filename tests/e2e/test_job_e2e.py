"""End to end on the real Slurm test cluster: plain sbatch as an ordinary user -> report + record."""

from __future__ import annotations

import csv
import io
import os
import pwd
import re
import time

import pytest

from slurm_energy.model import Method

pytestmark = pytest.mark.slurm

CPU_JOB = """#!/bin/bash
#SBATCH --job-name=cpuloop
#SBATCH --output=slurm-%j.out
#SBATCH --cpus-per-task=1
#SBATCH --mem=300M
/opt/slurm-energy/venv/bin/python -c '
import time
t0 = time.time()
while time.time() - t0 < {seconds}:
    sum(i * i for i in range(10000))
print("self_cpu_s", time.process_time())'
"""


def _self_cpu(out_file) -> float:
    m = re.search(r"self_cpu_s ([0-9.]+)", out_file.read_text())
    assert m, f"job output lacks its own CPU time: {out_file.read_text()!r}"
    return float(m.group(1))


def test_cpu_job_as_ordinary_user_gets_report_and_record(cluster):
    wd = cluster.workdir("alice", f"e2e-cpu-{os.getpid()}")
    job = cluster.sbatch("alice", wd, CPU_JOB.format(seconds=15))
    (rec,) = cluster.wait_record(job)
    alice = pwd.getpwnam("alice")
    # report files in the job's work dir, owned by the job's user (written after dropping root)
    cluster.wait_files(wd / f"energy-{job}.html", wd / f"energy-{job}.csv")
    for name in (f"energy-{job}.html", f"energy-{job}.csv"):
        p = wd / name
        st = os.lstat(p)
        assert st.st_uid == alice.pw_uid and st.st_gid == alice.pw_gid, name
        assert not os.path.islink(p)
    # the record's CPU time vs the CPU time the job measured itself: within 10 %
    self_cpu = _self_cpu(wd / f"slurm-{job}.out")
    node = rec.nodes[0]
    assert node.cpu_time_source == "cgroup-v1"
    assert abs(node.cpu_time_s - self_cpu) <= 0.10 * self_cpu, (node.cpu_time_s, self_cpu)
    # the request (--mem=300M) beside what the job used: 300 MiB = 314572800 bytes, from the job's own
    # SLURM_MEM_PER_NODE or slurmctld's MinMemoryNode; the peak used is the cgroup's, below the limit
    assert node.req_mem_bytes == 300 * 1024 ** 2, (node.req_mem_bytes, node.req_mem_source)
    assert node.max_mem_bytes is not None and 0 < node.max_mem_bytes <= node.req_mem_bytes
    # Slurm's own ConsumedEnergy: this cluster runs no acct_gather_energy plugin -> n/a, never 0 J
    assert rec.slurm_energy_j is None and rec.slurm_energy_source.startswith("unavailable")
    # CPU energy > 0, obtained by the labelled TDP model (no RAPL here)
    assert rec.energy_it_j["cpu"] > 0
    assert rec.methods["cpu"] == Method.TDP_ESTIMATE
    # a normally measured job: coverage <= 1 by itself (its span is the rows' span), never clamped
    for d in node.devices:
        assert 0.95 <= d.coverage <= 1.0 and "coverage_clamped" not in d.flags, (d.device_id, d.coverage, d.flags)
    assert (rec.user, rec.account, rec.partition, rec.cluster) == ("alice", "research", "debug", "lab")
    # the job's fake GPU-less allocation has no GPU class at all; PUE applied once
    assert rec.facility_kwh == pytest.approx(rec.it_kwh * rec.carbon.pue)
    assert rec.co2e_kg == pytest.approx(rec.facility_kwh * rec.carbon.ci_g_per_kwh * rec.carbon.alpha / 1000)
    # location-based (offsets excluded): E_facility x CI (SCI O = E x I); the net one above x alpha
    assert rec.co2e_gross_kg == pytest.approx(rec.facility_kwh * rec.carbon.ci_g_per_kwh / 1000)
    # jobenergy prints the job, as the job's user
    out = cluster.jobenergy("-P", job, user="alice")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("JobID|User|Elapsed|CPU_kWh|GPU_kWh|RAM_kWh|kgCO2e|")  # sacct-narrow default
    assert lines[1].split("|")[:2] == [job, "alice"]
    out = cluster.jobenergy("-P", "-n", "-o", "JobID,User,Account,Partition", job, user="alice")
    assert out.stdout.strip() == f"{job}|alice|research|debug", out.stderr
    out = cluster.jobenergy("-P", "-n", "-o", "JobID,ReqMem,SlurmEnergy", job, user="alice")
    assert out.stdout.strip() == f"{job}|300M|n/a", out.stderr
    # an unknown job id: clear message, non-zero
    bad = cluster.jobenergy("999999")
    assert bad.returncode != 0 and "999999" in bad.stderr


def test_gpu_job_without_nvml_is_unavailable_not_zero(cluster):
    # the test cluster's GPUs are fake char devices: Slurm allocates one, NVML cannot read it
    wd = cluster.workdir("bob", f"e2e-gpu-{os.getpid()}")
    job = cluster.sbatch("bob", wd, CPU_JOB.format(seconds=3), "--gres=gpu:1")
    (rec,) = cluster.wait_record(job)
    assert rec.energy_it_j["gpu"] is None
    assert rec.methods["gpu"] == Method.UNAVAILABLE
    assert rec.coverage_complete is False
    gpu = [d for d in rec.nodes[0].devices if d.device_class == "gpu"]
    assert gpu and gpu[0].energy_j is None and gpu[0].device_id.startswith("gpu-index-")
    assert any("not resolved" in e for e in rec.errors)


def test_running_job_shows_energy_so_far(cluster):
    # the test cluster stores a running job's energy every 5 s (sampling.interim_s)
    wd = cluster.workdir("alice", f"e2e-run-{os.getpid()}")
    job = cluster.sbatch("alice", wd, CPU_JOB.format(seconds=14))
    seen = None
    t0 = time.time()
    while time.time() - t0 < 40 and seen is None:
        out = cluster.jobenergy("-P", "-n", "-o", "JobID,CPU_kWh,Status", job)
        if out.returncode == 0 and out.stdout.strip().endswith("|running"):
            seen = out.stdout.strip().split("|")
        time.sleep(0.5)
    assert seen is not None, "jobenergy never showed the job as running"
    assert seen[0] == job and float(seen[1]) > 0  # energy so far, not 0 and not n/a
    (rec,) = cluster.wait_record(job)  # then one final record replaces the interim one
    assert rec.status.value == "complete"
    assert rec.energy_it_j["cpu"] >= float(seen[1]) * 3.6e6 * 0.999


def test_array_tasks_recorded_with_their_array_ids(cluster):
    wd = cluster.workdir("alice", f"e2e-array-{os.getpid()}")
    first = cluster.sbatch("alice", wd, "#!/bin/bash\n#SBATCH --output=slurm-%A_%a.out\nsleep 2\n", "--array=0-1")
    recs = []
    for _ in range(120):
        out = cluster.jobenergy("--json", f"{first}_1")
        if out.returncode == 0 and "running" not in out.stdout:
            recs = out.stdout
            break
        time.sleep(1)
    assert recs, f"jobenergy {first}_1 never found the array task"
    # the task 1 record carries its array ids; the whole array answers to the array job id
    all_tasks = cluster.jobenergy("-P", "-n", "-o", "JobID", first)
    assert all_tasks.returncode == 0
    for _ in range(60):
        all_tasks = cluster.jobenergy("-P", "-n", "-o", "JobID", first)
        if sorted(all_tasks.stdout.split()) == [f"{first}_0", f"{first}_1"]:
            break
        time.sleep(1)
    assert sorted(all_tasks.stdout.split()) == [f"{first}_0", f"{first}_1"]
    # in sacct's order (src/sacct/sacct.c: submit time, array job id, task id), as sacct lists them
    for _ in range(60):  # slurmdbd hears of the tasks after slurmctld: wait for it to list both
        listed = cluster.run(["sacct", "-n", "-X", "-P", "-o", "JobID", "-j", first]).stdout.split()
        if {f"{first}_0", f"{first}_1"} <= set(listed):
            break
        time.sleep(1)
    assert all_tasks.stdout.split() == [j for j in listed if j in (f"{first}_0", f"{first}_1")] == [f"{first}_0", f"{first}_1"]
    # each task's report is named as sbatch's %A_%a names its output (not by the task's own job id),
    # its CSV keyed the same, the task's own job id beside it (job_id_raw)
    names = [f"energy-{first}_{t}.{ext}" for t in (0, 1) for ext in ("html", "csv")]
    cluster.wait_files(*(wd / n for n in names))
    assert sorted(p.name for p in wd.glob("energy-*")) == sorted(names)
    raw = cluster.jobenergy("-P", "-n", "-o", "JobIDRaw", f"{first}_1").stdout.strip()
    total = list(csv.DictReader(io.StringIO((wd / f"energy-{first}_1.csv").read_text())))[-1]
    assert raw.isdigit() and (total["job_id"], total["job_id_raw"]) == (f"{first}_1", raw)


def test_failed_job_state_and_very_short_job(cluster):
    wd = cluster.workdir("bob", f"e2e-fail-{os.getpid()}")
    failed = cluster.sbatch("bob", wd, "#!/bin/bash\n#SBATCH --output=slurm-%j.out\nexit 3\n")
    (rec,) = cluster.wait_record(failed)
    assert rec.exit_code == "3:0" and rec.job_state == "FAILED"
    assert rec.job_name == "job.sbatch"  # from slurmctld: the job ended before its processes were seen
    # shorter than one interval: measured between the Prolog's and the Epilog's readings when the
    # job was seen at all; a job gone before the first 0.25 s poll is unmeasured, never 0
    cpu = next(d for d in rec.nodes[0].devices if d.device_class == "cpu")
    if cpu.energy_j is None:
        assert "job_never_observed" in cpu.flags and rec.methods["cpu"] == Method.UNAVAILABLE
        assert rec.coverage_complete is False
    else:
        assert cpu.energy_j >= 0 and rec.methods["cpu"] == Method.TDP_ESTIMATE
    assert cpu.device_energy_j is not None  # the node's own energy over the job is known either way


@pytest.fixture(params=["node", "job"])
def sampler_kind(cluster, request):
    """``sampling.sampler`` for one test: the default (``node``: one sampler for the node's jobs), or
    ``job`` (a sampler process per job) written into the site config and restored after it, as
    test_node_sampler_e2e.py's node_sampling fixture does."""
    before = cluster.site.read_text()
    if request.param == "job":
        assert "sampling:\n" in before and "sampler:" not in before
        cluster.site.write_text(before.replace("sampling:\n", "sampling:\n  sampler: job\n", 1))
    try:
        yield request.param
    finally:
        cluster.site.write_text(before)


def test_sampler_killed_mid_job_is_partial_not_zero(cluster, sampler_kind):
    wd = cluster.workdir("alice", f"e2e-kill-{os.getpid()}")
    job = cluster.sbatch("alice", wd, CPU_JOB.format(seconds=12))
    samples = cluster.base / "spool" / "jobs" / f"{job}-r0" / "samples-n1.jsonl"
    spool = cluster.base / "spool" / "jobs" / f"{job}-r0"
    # the job's own sampler's PID, or the node sampler's (beside its lock in the spool)
    pidfiles = (lambda: list(spool.glob("sampler-*.pid"))) if sampler_kind == "job" else (
        lambda: [p for p in (cluster.base / "spool" / "node-sampler-n1.pid",) if p.exists()])
    for _ in range(100):
        pids = pidfiles()
        if pids and samples.exists() and len(samples.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    assert pids, f"no {sampler_kind} sampler PID file"
    os.kill(int(pids[0].read_text()), 9)  # the sampler dies a few seconds into the job
    (rec,) = cluster.wait_record(job)
    cpu = next(d for d in rec.nodes[0].devices if d.device_class == "cpu")
    assert rec.status.value == "partial"
    # the stretch after the sampler's last sample is charged from the job's true CPU time (sacct
    # TotalCPU where slurmdbd runs) or estimated from its last observed share: labelled, never dropped
    assert cpu.coverage > 0.9 and cpu.energy_j is not None and cpu.energy_j > 0
    assert {"tail_from_slurm_totalcpu", "tail_estimated"} & set(cpu.flags)
    assert "share_unknown" not in cpu.flags
    assert any("sampler" in e for e in rec.errors)


def test_cancelled_job_state_from_slurmctld(cluster):
    # the Epilog sees exit code 0:0 for a cancelled job; the finalizer asks slurmctld
    wd = cluster.workdir("bob", f"e2e-cancel-{os.getpid()}")
    job = cluster.sbatch("bob", wd, "#!/bin/bash\n#SBATCH --output=slurm-%j.out\nsleep 60\n")
    for _ in range(60):
        st = cluster.run(["squeue", "-h", "-j", job, "-o", "%T"])
        if st.stdout.strip() == "RUNNING":
            break
        time.sleep(0.5)
    time.sleep(2)
    cluster.run(["scancel", job], user="bob", check=True)
    (rec,) = cluster.wait_record(job)
    assert rec.job_state == "CANCELLED"
    out = cluster.jobenergy("-P", "-n", "-s", "CA", "-o", "JobID,State", job)
    assert out.stdout.strip() == f"{job}|CANCELLED"

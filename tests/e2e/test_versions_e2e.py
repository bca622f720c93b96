"""End to end on whichever Slurm the test cluster runs (22.05 on the host, 24.11 / 26.05 in a
Debian root: scripts/testcluster.sh start --slurm V): a job killed at its time limit, and the
accounting database answering `sacct --json` (later features read it)."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.slurm


def test_time_limit_job_is_recorded_as_timeout(cluster):
    # Slurm's smallest time limit is 1 minute; slurmctld enforces it on its ~30 s timer
    wd = cluster.workdir("alice", f"e2e-timeout-{os.getpid()}")
    job = cluster.sbatch("alice", wd, "#!/bin/bash\n#SBATCH --output=slurm-%j.out\n#SBATCH --time=1\nsleep 600\n")
    (rec,) = cluster.wait_record(job, timeout_s=240)
    assert rec.job_state == "TIMEOUT"
    assert 60.0 <= rec.elapsed_s < 150.0  # killed at the limit (+ the timer's slack), not after 600 s
    cpu = next(d for d in rec.nodes[0].devices if d.device_class == "cpu")
    assert cpu.energy_j is not None and cpu.device_energy_j > 0  # measured to the end, not dropped
    out = cluster.jobenergy("-P", "-n", "-s", "TO", "-o", "JobID,State", job)
    assert out.stdout.strip() == f"{job}|TIMEOUT", out.stderr


def test_sacct_json_reports_the_job(cluster):
    wd = cluster.workdir("bob", f"e2e-sacct-{os.getpid()}")
    job = cluster.sbatch("bob", wd, "#!/bin/bash\n#SBATCH --output=slurm-%j.out\nexit 2\n")
    (rec,) = cluster.wait_record(job)
    out = cluster.run(["sacct", "--json", "-j", job])
    assert out.returncode == 0, out.stderr
    (j,) = [j for j in json.loads(out.stdout)["jobs"] if str(j["job_id"]) == job]
    assert j["user"] == "bob" and j["account"] == "research"
    state = j["state"]["current"]
    assert (state[0] if isinstance(state, list) else state) == "FAILED" == rec.job_state
    major_minor = tuple(int(x) for x in cluster.version.split(".")[:2])
    if major_minor >= (25, 11):  # SLURM_JOB_SLUID in the Prolog/Epilog: the record is keyed by it
        assert rec.sluid, "Slurm >= 25.11 gives the Prolog SLURM_JOB_SLUID; the record lacks it"
        if j.get("sluid"):  # 26.05: sacct --json has .jobs[].sluid, the same run id
            assert j["sluid"] == rec.sluid
        # the SLUID a user pastes from sacct or the job's environment selects this run
        by_sluid = cluster.jobenergy("-P", "-n", "-o", "JobID,SLUID", rec.sluid)
        assert by_sluid.stdout.strip() == f"{job}|{rec.sluid}", by_sluid.stderr
    else:
        assert not rec.sluid
    if major_minor >= (23, 11):  # SLURM_JOB_START_TIME: Slurm's own start of this run
        assert rec.slurm_start_time == j["time"]["start"]

"""Issue 22 on the real Slurm test cluster: alice, an ordinary user, attacks with plain sbatch;
bob's job beside hers is the victim. Her job fails (exit 3) with a comment holding
``JobState=COMPLETED ExitCode=0:0``, a job name that is not UTF-8, and exports another job's array
id and a memory request before its work. Checked: her record says FAILED, with none of her claims;
bob's record is his; ``collect`` as root goes through; ``jobenergy`` shows both."""

from __future__ import annotations

import os
import time

import pytest

pytestmark = pytest.mark.slurm

VICTIM = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --mem=200M
/opt/slurm-energy/venv/bin/python -c 'import time; t = time.time()
while time.time() - t < 4: pass'
"""
ATTACK = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --mem=200M
export SLURM_ARRAY_JOB_ID={victim} SLURM_ARRAY_TASK_ID=0 SLURM_MEM_PER_NODE=999999 SLURM_JOB_ID={victim}
/opt/slurm-energy/venv/bin/python -c 'import time; t = time.time()
while time.time() - t < 4: pass'
exit 3
"""


def test_an_ordinary_users_lies_neither_change_her_record_nor_touch_the_victims(cluster):
    bwd = cluster.workdir("bob", f"e2e-victim-{os.getpid()}")
    victim = cluster.sbatch("bob", bwd, VICTIM)
    awd = cluster.workdir("alice", f"e2e-attack-{os.getpid()}")
    name = os.fsdecode(b"x\xff JobState=COMPLETED")
    attack = cluster.sbatch("alice", awd, ATTACK.format(victim=victim), f"--job-name={name}",
                            "--comment=JobState=COMPLETED ExitCode=0:0")
    (a,) = cluster.wait_record(attack)
    (v,) = cluster.wait_record(victim)
    # hers: slurmctld's state and exit code, none of her claims; her name stored, shown with \xNN
    assert (a.user, a.job_state, a.exit_code) == ("alice", "FAILED", "3:0"), a.errors
    assert a.array_job_id is None and a.array_task_id is None
    assert a.nodes[0].req_mem_bytes == 200 * 1024 ** 2, a.nodes[0].req_mem_source  # 200 MiB, not 999999 MB
    assert a.job_name.startswith("x\\xff") and a.raw_text.get("job_name", "").startswith(b"x\xff".hex())
    # bob's: his own, untouched by her SLURM_JOB_ID / array id
    assert (v.user, v.job_state, v.array_job_id, v.status.value) == ("bob", "COMPLETED", None, "complete")
    assert v.energy_it_j and all(x is None or x > 0 for x in v.energy_it_j.values())
    cluster.wait_files(awd / f"energy-{attack}.html", bwd / f"energy-{victim}.html")
    # collect as root afterwards: goes through (exit 0), every line printable
    out = cluster.run(["/opt/slurm-energy/venv/bin/slurm-energy", "collect", "--older-than", "0"])
    assert out.returncode == 0, out.stderr
    assert all(line.isprintable() for line in out.stdout.splitlines())
    # jobenergy shows both to root, and hers to her
    time.sleep(0.5)
    got = cluster.jobenergy("-P", "-n", "-o", "JobID,User,State", attack, victim)
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines() == [f"{victim}|bob|COMPLETED", f"{attack}|alice|FAILED"]  # sacct's order: by id
    mine = cluster.jobenergy("-l", attack, user="alice")  # her own
    assert mine.returncode == 0, mine.stderr
    # 22.05's scontrol has no --json: the text form, whose keys her text repeats are not used (an
    # error row says so); from 23.02 the JSON, which her text cannot fool (nothing to say)
    assert ("appear more than once" in mine.stdout) == cluster.version.startswith("22."), (cluster.version, a.errors)

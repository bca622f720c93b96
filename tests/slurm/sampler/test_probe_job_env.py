"""The probe's look at the job's environment (its name and umask, for the report's file mode): a
process caught between slurmstepd's fork and its exec of the job's program is looked at again.

Before: the first look marked the PID seen whatever it found, so a short job whose one process was
caught in that window never had its umask read, and its report was written private (0600) with a
reason that did not fit (a tester: identical jobs of one user, umask 022, got 0600 or 0644)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

#: a child that holds slurmd's environment (no SLURM_JOB_ID) for 0.6 s, then execs the job's program
#: with the job's environment: the same PID, as a batch step's child of slurmstepd
_FORK_THEN_EXEC = r"""
import os, sys, time
time.sleep(0.6)
os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(20)"],
          {"SLURM_JOB_ID": "901", "SLURM_JOB_NAME": "train", "SLURM_UMASK": "0022"})
"""


def _probe(tmp_path, seen):
    from slurm_energy.slurm.sampler.probe import SlurmJobProbe

    return SlurmJobProbe("901", os.getuid(), "n1", cgroup_root=str(tmp_path / "no-cgroup"), pid_fallback_after_s=0.0,
                         on_job_env=seen.append)


def test_a_process_looked_at_before_its_exec_is_looked_at_again(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", _FORK_THEN_EXEC], env={"PATH": "/usr/bin", "SLURMD_NODENAME": "n1"})
    try:
        seen: list[dict] = []
        probe = _probe(tmp_path, seen)
        time.sleep(0.1)
        probe._look_for_job_env([child.pid])  # before the exec: slurmd's environment, not the job's
        assert seen == []
        for _ in range(200):  # the next full poll (one an interval), after the exec: the same PID holds the job's
            with open(f"/proc/{child.pid}/environ", "rb") as f:
                if b"SLURM_JOB_ID=901" in f.read():
                    break
            time.sleep(0.05)
        probe._look_for_job_env([child.pid])
        assert seen == [{"job_name": "train", "umask": "0022"}]
    finally:
        child.kill()
        child.wait()


def test_a_process_that_never_shows_the_job_is_looked_at_a_bounded_number_of_times(tmp_path, monkeypatch):
    """A process whose environment never holds the job's facts (it emptied it) costs at most
    ENV_LOOKS reads, not one per poll for the job's life."""
    from slurm_energy.slurm.sampler import probe as P

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"], env={"PATH": "/usr/bin"})
    reads = []
    real_open = open

    def counting_open(path, *a, **k):
        if str(path).endswith(f"/{child.pid}/environ"):
            reads.append(path)
        return real_open(path, *a, **k)

    try:
        seen: list[dict] = []
        probe = _probe(tmp_path, seen)
        monkeypatch.setattr("builtins.open", counting_open)
        for _ in range(10):
            probe._look_for_job_env([child.pid])
        monkeypatch.undo()
        assert seen == [] and len(reads) == P.ENV_LOOKS == 3
    finally:
        child.kill()
        child.wait()

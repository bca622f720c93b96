"""PrologFlags=RunInJob: the detached sampler/finalizer leave the job's extern-step cgroups (fake
cgroup trees; the real v1 move is exercised on the test cluster with RUN_IN_JOB=1)."""

import os

from slurm_energy.slurm.cgroup_move import job_cgroup_exits, leave_job_cgroups

V1_IN_JOB = """12:freezer:/slurm_n1/uid_2001/job_5/step_extern
11:memory:/slurm_n1/uid_2001/job_5/step_extern
4:cpu,cpuacct:/slurm_n1/uid_2001/job_5/step_extern
3:pids:/system.slice/slurmd.service
1:name=systemd:/system.slice/slurmd.service
0::/system.slice/slurmd.service
"""


def _tree(root, *dirs):
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)


def test_v1_job_hierarchies_only(tmp_path):
    root = str(tmp_path)
    _tree(root, "freezer", "memory", "cpu,cpuacct", "pids", "systemd", "unified")
    assert job_cgroup_exits(V1_IN_JOB, root) == [
        f"{root}/freezer/cgroup.procs", f"{root}/memory/cgroup.procs", f"{root}/cpu,cpuacct/cgroup.procs"]


def test_v1_separate_cpu_and_cpuacct_mounts(tmp_path):
    # this host mounts cpu and cpuacct apart: "cpu,cpuacct" has no directory, "cpu" does
    root = str(tmp_path)
    _tree(root, "cpu", "cpuacct")
    assert job_cgroup_exits("4:cpu,cpuacct:/slurm/uid_0/job_9/step_extern\n", root) == [f"{root}/cpu/cgroup.procs"]


def test_v2_extern_step_and_sluid_dirs(tmp_path):
    root = str(tmp_path)
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    assert job_cgroup_exits("0::/system.slice/slurmstepd.scope/job_7/step_extern\n", root) == [f"{root}/cgroup.procs"]
    assert job_cgroup_exits("0::/system.slice/slurmstepd.scope/sl_01JX/step_extern\n", root) == [f"{root}/cgroup.procs"]
    # Slurm 26.05 with several slurmd per host, as the project's VM shows it
    # (tests/slurm/data/cgroup-v2-vm.txt): <NodeName>_slurmstepd.scope/<SLUID>/step_extern/{slurm,user}
    for sub in ("slurm", "user"):
        assert job_cgroup_exits(f"0::/system.slice/vm1_slurmstepd.scope/sEPSM8Y64FTN00/step_extern/{sub}\n",
                                root) == [f"{root}/cgroup.procs"]
    assert job_cgroup_exits("0::/system.slice/vm1_slurmstepd.scope/job_7/step_extern/user\n", root) == [
        f"{root}/cgroup.procs"]
    # slurmd's own cgroup (captured: /system.slice/slurmd-vm1.service/slurmd): not a job
    assert job_cgroup_exits("0::/system.slice/slurmd-vm1.service/slurmd\n", root) == []
    # slurmd's own service cgroup, a user session: not a job, nothing moved
    assert job_cgroup_exits("0::/system.slice/slurmd.service\n0::/user.slice/user-0.slice\n", root) == []
    assert job_cgroup_exits("0::/system.slice/job_runner.service\n", root) == []


def test_leave_writes_the_pid_into_each_hierarchy_root(tmp_path):
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text(V1_IN_JOB)
    root = tmp_path / "cg"
    _tree(str(root), "freezer", "memory", "cpu,cpuacct")
    moved = leave_job_cgroups(4242, str(root), str(tmp_path / "proc"))
    assert len(moved) == 3
    assert all(open(m).read() == "4242\n" for m in moved)

"""Job cgroup readers on fake cgroup v1 and v2 trees."""

import os

from slurm_energy.slurm.cgroup import find_job_cgroup


def _w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_v1_multiple_slurmd_layout(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "cpuacct"))
    job = os.path.join(root, "cpuacct", "slurm_n2", "uid_2001", "job_42")
    _w(os.path.join(job, "cpuacct.usage"), "12500000000\n")  # ns -> 12.5 s
    _w(os.path.join(job, "step_batch", "cgroup.procs"), "100\n101\n")
    _w(os.path.join(job, "step_extern", "cgroup.procs"), "99\n")
    mem = os.path.join(root, "memory", "slurm_n2", "uid_2001", "job_42")
    _w(os.path.join(mem, "memory.usage_in_bytes"), "524288000\n")
    _w(os.path.join(mem, "memory.max_usage_in_bytes"), "629145600\n")
    cg = find_job_cgroup("42", 2001, "n2", root)
    assert cg is not None and cg.version == 1 and cg.source == "cgroup-v1"
    u = cg.read()
    assert u.cpu_time_s == 12.5
    assert u.mem_bytes == 524288000 and u.max_mem_bytes == 629145600
    assert u.pids == [99, 100, 101]
    # another node's name or another uid does not match
    assert find_job_cgroup("42", 2001, "n1", root) is None
    assert find_job_cgroup("42", 2002, "n2", root) is None


def test_v1_stock_layout_and_removal(tmp_path):
    root = str(tmp_path)
    job = os.path.join(root, "cpuacct", "slurm", "uid_0", "job_7")
    _w(os.path.join(job, "cpuacct.usage"), "1000000000")  # 1 s
    cg = find_job_cgroup("7", 0, "anynode", root)
    assert cg.read().cpu_time_s == 1.0
    assert cg.mem_dir is None and cg.read().mem_bytes is None  # no memory controller: unknown, not 0
    for f in os.listdir(job):
        os.remove(os.path.join(job, f))
    os.rmdir(job)
    assert cg.read() is None  # removed before the Epilog runs


def test_v2_unified_layout(tmp_path):
    root = str(tmp_path)
    _w(os.path.join(root, "cgroup.controllers"), "cpu memory pids\n")
    job = os.path.join(root, "system.slice", "slurmstepd.scope", "job_42")
    _w(os.path.join(job, "cpu.stat"), "usage_usec 3250000\nuser_usec 3000000\nsystem_usec 250000\n")  # 3.25 s
    _w(os.path.join(job, "memory.current"), "1048576\n")
    _w(os.path.join(job, "memory.peak"), "2097152\n")
    _w(os.path.join(job, "step_0", "user", "task_0", "cgroup.procs"), "555\n")
    cg = find_job_cgroup("42", 2001, "n1", root)
    assert cg.version == 2
    u = cg.read()
    assert (u.cpu_time_s, u.mem_bytes, u.max_mem_bytes, u.pids) == (3.25, 1048576, 2097152, [555])


def test_absent(tmp_path):
    assert find_job_cgroup("1", 0, "n1", str(tmp_path)) is None

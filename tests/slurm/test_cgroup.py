"""Job cgroup readers on fake cgroup v1 and v2 trees."""

import os

from slurm_energy.slurm.sampler.cgroup import find_job_cgroup


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
    # a stock build (no multiple-slurmd): system.slice/slurmstepd.scope/job_<id> (SchedMD/slurm
    # src/plugins/cgroup/v2/cgroup_v2.c, _set_int_cg_ns); the 26.05 layout seen in the project's VM:
    # tests/slurm/test_cgroup_v2_sluid.py
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


def test_pid_mode_probe_looks_for_a_late_cgroup_only_at_full_polls_every_rescan_period(tmp_path, monkeypatch):
    from slurm_energy.slurm.sampler import probe as probe_mod

    looks = []
    real = probe_mod.find_job_cgroup
    monkeypatch.setattr(probe_mod, "find_job_cgroup", lambda *a, **k: looks.append(now[0]) or real(*a, **k))
    now = [0.0]  # s, the probe's monotonic clock
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "cpuacct"))
    p = probe_mod.SlurmJobProbe("7", 0, "n1", cgroup_root=root, pid_fallback_after_s=0.5, pid_rescan_s=10.0,
                                clock=lambda: now[0])
    p._scanner.pids = list  # no job process anywhere: PID mode finds nothing
    for t, full in ((0.0, True), (0.3, False), (1.0, True), (2.0, False), (5.0, True), (10.9, False), (11.0, True)):
        now[0] = t
        p.poll(full)
    # every poll before 0.5 s; then the first full poll (1.0 s) and the next full one 10 s later (11.0 s)
    assert looks == [0.0, 0.3, 1.0, 11.0]
    job = os.path.join(root, "cpuacct", "slurm", "uid_0", "job_7")
    _w(os.path.join(job, "cpuacct.usage"), "2500000000")  # 2.5 s, in ns
    now[0] = 15.0
    assert p.poll(True) is None and p.cg is None  # 4 s after the last look: not looked for yet
    now[0] = 21.0
    u = p.poll(True)
    assert p.cg is not None and u.cpu_time_s == 2.5 and u.source == "cgroup-v1"

"""Slurm 26.05's cgroup v2 layouts, on fake trees (the test machine has cgroup v1 only).

26.05 names a job's v2 directory by its SLUID (``.../slurmstepd.scope/<SLUID>/``); with
``CgroupJobIdPaths=yes`` it keeps ``job_<id>``; multiple-slurmd builds put each node's stepd scope
under its own name (``<node>_slurmstepd.scope``)."""

import os

from slurm_energy.slurm.cgroup import find_job_cgroup


def _w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _v2_job(d, usage_usec: int, procs: str) -> None:
    _w(os.path.join(d, "cpu.stat"), f"usage_usec {usage_usec}\nuser_usec {usage_usec}\nsystem_usec 0\n")
    _w(os.path.join(d, "memory.current"), "4096\n")
    _w(os.path.join(d, "step_batch", "cgroup.procs"), procs)


def test_v2_sluid_directory_found_by_the_runs_sluid(tmp_path):
    root = str(tmp_path)
    _w(os.path.join(root, "cgroup.controllers"), "cpu memory pids\n")
    _v2_job(os.path.join(root, "system.slice", "slurmstepd.scope", "sl_01JABCDEF"), 7_500_000, "321\n")  # 7.5 s
    cg = find_job_cgroup("42", 2001, "n1", root, sluid="sl_01JABCDEF")
    assert cg is not None and cg.version == 2
    u = cg.read()
    assert (u.cpu_time_s, u.mem_bytes, u.pids) == (7.5, 4096, [321])
    # without the SLUID (Slurm < 25.11 env) the job_<id> name is all there is: not found here
    assert find_job_cgroup("42", 2001, "n1", root) is None
    # another run's SLUID (a requeue gets a new one) is not this run's cgroup
    assert find_job_cgroup("42", 2001, "n1", root, sluid="sl_01JOTHER") is None


def test_v2_job_id_paths_still_found_when_a_sluid_is_given(tmp_path):
    # CgroupJobIdPaths=yes on 26.05: job_<id> although the env carries a SLUID
    root = str(tmp_path)
    _w(os.path.join(root, "cgroup.controllers"), "cpu memory\n")
    _v2_job(os.path.join(root, "system.slice", "slurmstepd.scope", "job_42"), 2_000_000, "9\n")
    cg = find_job_cgroup("42", 2001, "n1", root, sluid="sl_01JABCDEF")
    assert cg is not None and cg.read().cpu_time_s == 2.0


def test_v2_sluid_preferred_over_a_stale_job_id_dir_and_per_node_scope(tmp_path):
    # a reused job id: an older run's job_42 dir lingers, this run's SLUID dir is the one to read;
    # two slurmd on one host: each node's scope, the node's own is chosen
    root = str(tmp_path)
    _w(os.path.join(root, "cgroup.controllers"), "cpu memory\n")
    sys_slice = os.path.join(root, "system.slice")
    _v2_job(os.path.join(sys_slice, "n1_slurmstepd.scope", "job_42"), 1_000_000, "1\n")
    _v2_job(os.path.join(sys_slice, "n1_slurmstepd.scope", "sl_NEW"), 3_000_000, "2\n")
    _v2_job(os.path.join(sys_slice, "n2_slurmstepd.scope", "sl_NEW"), 5_000_000, "3\n")
    cg = find_job_cgroup("42", 2001, "n2", root, sluid="sl_NEW")
    assert cg.cpu_dir.endswith(os.path.join("n2_slurmstepd.scope", "sl_NEW"))
    assert cg.read().cpu_time_s == 5.0
    assert find_job_cgroup("42", 2001, "n1", root, sluid="sl_NEW").read().cpu_time_s == 3.0


def test_sluid_with_glob_characters_matches_only_itself(tmp_path):
    root = str(tmp_path)
    _w(os.path.join(root, "cgroup.controllers"), "cpu\n")
    _v2_job(os.path.join(root, "system.slice", "slurmstepd.scope", "sl_A1"), 1_000_000, "1\n")
    assert find_job_cgroup("42", 0, "n1", root, sluid="sl_A?") is None

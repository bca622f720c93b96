"""Slurm's cgroup v2 layouts, on fake trees built from what Slurm 26.05 wrote in the project's VM.

The capture, tests/slurm/data/cgroup-v2-vm.txt (made by cgroup-v2-vm-capture.sh beside it, in the
VM of scripts/vmcluster.sh: Slurm 26.05.5, CgroupPlugin=cgroup/v2, systemd, two slurmd per host):

* the step daemons' scope is ``system.slice/<NodeName>_slurmstepd.scope`` (Debian builds with
  ``--enable-multiple-slurmd``; a stock build uses ``slurmstepd.scope``: SchedMD/slurm
  src/plugins/cgroup/v2/cgroup_v2.c, ``_set_int_cg_ns``), under PID 1's cgroup minus ``init.scope``
  (``_get_init_cg_path``);
* the job's directory is its SLUID (``sEPSM8Y64FTN00``: sacct's SLUID, the job's SLURM_JOB_SLUID),
  ``job_<id>`` with ``CgroupJobIdPaths=yes``; below it ``step_batch``/``step_extern``, each with
  ``slurm`` (slurmstepd) and ``user`` (the tasks, ``task_0``, ``task_special``);
* the job directory's ``cpu.stat``, ``memory.current``, ``memory.peak``, ``cgroup.events`` as captured.
"""

import os
from pathlib import Path

from slurm_energy.slurm.sampler.cgroup import find_job_cgroup, init_cgroup_dir

CAPTURE = Path(__file__).parent / "data" / "cgroup-v2-vm.txt"


def _sections() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur = None
    for line in CAPTURE.read_text().splitlines():
        if line.startswith("## "):
            cur = out.setdefault(line[3:], [])
        elif cur is not None:
            cur.append(line)
    return out


CAP = _sections()
SCOPE_DIR = next(k for k in CAP if k.startswith("find ") and k.endswith(" -type d")).split()[1]  # .../vm1_slurmstepd.scope
DIRS = CAP[f"find {SCOPE_DIR} -type d"]
SLUID = next(os.path.basename(d) for d in DIRS if os.path.dirname(d) == SCOPE_DIR and os.path.basename(d) != "system")
JOB_DIR = f"{SCOPE_DIR}/{SLUID}"


def _w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def fake_tree(root: str, job_name: str = SLUID, scope: str = "vm1_slurmstepd.scope") -> str:
    """The captured tree under ``root`` (``/sys/fs/cgroup`` -> ``root``), the job directory renamed
    ``job_name`` and the scope ``scope``; the job's files hold the captured values. Returns the job dir."""
    _w(os.path.join(root, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n")
    rel = {d[len(SCOPE_DIR):] for d in DIRS}
    base = os.path.join(root, "system.slice", scope)
    for r in rel:
        os.makedirs(base + r.replace(f"/{SLUID}", f"/{job_name}", 1), exist_ok=True)
    job = os.path.join(base, job_name)
    for f in ("cpu.stat", "memory.current", "memory.peak", "cgroup.events", "cgroup.controllers"):
        _w(os.path.join(job, f), "\n".join(CAP[f"{JOB_DIR}/{f}"]) + "\n")
    for step in ("step_batch/user", "step_batch/slurm", "step_extern/slurm"):
        pids = [line.split()[0] for line in CAP[f"{JOB_DIR}/{step}: cgroup.procs -> comm"]]
        leaf = "task_0" if step == "step_batch/user" else ""
        _w(os.path.join(job, step, leaf, "cgroup.procs"), "".join(p + "\n" for p in pids))
    return job


def test_capture_is_what_the_docs_say():
    # the facts the finder relies on, read from the capture itself
    assert CAP["/proc/1/cgroup"] == ["0::/init.scope"]
    assert SCOPE_DIR == "/sys/fs/cgroup/system.slice/vm1_slurmstepd.scope"
    assert SLUID == "sEPSM8Y64FTN00" and f"{SCOPE_DIR}/system" in DIRS
    for d in ("step_batch/slurm", "step_batch/user", "step_extern/slurm", "step_extern/user"):
        assert f"{JOB_DIR}/{d}" in DIRS
    assert [line.split()[1] for line in CAP[f"{JOB_DIR}/step_batch/slurm: cgroup.procs -> comm"]] == ["slurmstepd"]


def test_sluid_directory_in_the_nodes_own_scope(tmp_path):
    root = str(tmp_path)
    job = fake_tree(root)
    cg = find_job_cgroup("1", 2001, "vm1", root, sluid=SLUID, init_cgroup="")
    assert cg is not None and cg.version == 2 and cg.cpu_dir == job
    u = cg.read()
    # captured: usage_usec 536133 -> 0.536133 s; memory.current 1540096 B; memory.peak 1921024 B
    assert (u.cpu_time_s, u.mem_bytes, u.max_mem_bytes) == (0.536133, 1540096, 1921024)
    assert u.pids == [904, 917, 930, 932]  # slurmstepds and the batch script + its sleep
    assert cg.populated() is True  # captured "populated 1" while the job ran
    # without the SLUID (Slurm < 25.11 env) only job_<id> is looked for: not this tree
    assert find_job_cgroup("1", 2001, "vm1", root, init_cgroup="") is None
    # another run's SLUID (a requeue gets a new one) is not this run's cgroup
    assert find_job_cgroup("1", 2001, "vm1", root, sluid="sEPSM8Y64FTN01", init_cgroup="") is None


def test_job_id_paths_when_a_sluid_is_given(tmp_path):
    # CgroupJobIdPaths=yes on 26.05 (seen in the VM, tests/e2e/test_cgroup_v2_vm.py): job_<id>
    # although the job's environment carries a SLUID
    root = str(tmp_path)
    job = fake_tree(root, job_name="job_42")
    assert find_job_cgroup("42", 2001, "vm1", root, sluid=SLUID, init_cgroup="").cpu_dir == job


def test_sluid_preferred_over_a_stale_job_id_dir_and_each_node_its_scope(tmp_path):
    # a reused job id: an older run's job_1 lingers, this run's SLUID dir is the one; two slurmd on
    # one host: each node's own scope
    root = str(tmp_path)
    fake_tree(root, job_name="job_1", scope="vm1_slurmstepd.scope")
    j1 = fake_tree(root, scope="vm1_slurmstepd.scope")
    j2 = fake_tree(root, scope="vm2_slurmstepd.scope")
    assert find_job_cgroup("1", 2001, "vm2", root, sluid=SLUID, init_cgroup="").cpu_dir == j2
    assert find_job_cgroup("1", 2001, "vm1", root, sluid=SLUID, init_cgroup="").cpu_dir == j1


def test_stock_build_scope_and_no_guessing_elsewhere(tmp_path):
    # a build without multiple-slurmd: system.slice/slurmstepd.scope (cgroup_v2.c, _set_int_cg_ns)
    root = str(tmp_path)
    job = fake_tree(root, scope="slurmstepd.scope")
    assert find_job_cgroup("1", 2001, "n1", root, sluid=SLUID, init_cgroup="").cpu_dir == job
    # the same directory anywhere else is not Slurm's: no glob, no depth search
    other = str(tmp_path / "other")
    fake_tree(other, scope="slurmstepd.scope")
    os.rename(os.path.join(other, "system.slice"), os.path.join(other, "user.slice"))
    assert find_job_cgroup("1", 2001, "n1", other, sluid=SLUID, init_cgroup="") is None


def test_container_init_cgroup_prefix(tmp_path):
    # in a container, PID 1's cgroup is ".../<container>.scope/init.scope": Slurm puts system.slice
    # beside init.scope (_get_init_cg_path strips the last part)
    proc1 = tmp_path / "cgroup1"
    proc1.write_text("0::/docker.slice/docker-ab12.scope/init.scope\n")
    assert init_cgroup_dir(str(proc1)) == "docker.slice/docker-ab12.scope"
    proc1.write_text("0::/init.scope\n")
    assert init_cgroup_dir(str(proc1)) == ""
    proc1.write_text("12:memory:/\n0::/init.scope\n")  # hybrid: Slurm's cgroup/v2 refuses to run
    assert init_cgroup_dir(str(proc1)) == ""
    assert init_cgroup_dir(str(tmp_path / "absent")) == ""
    root = str(tmp_path / "cg")
    job = fake_tree(os.path.join(root, "docker.slice", "docker-ab12.scope"))
    os.replace(os.path.join(root, "docker.slice", "docker-ab12.scope", "cgroup.controllers"),
               os.path.join(root, "cgroup.controllers"))
    assert find_job_cgroup("1", 2001, "vm1", root, sluid=SLUID, init_cgroup="docker.slice/docker-ab12.scope").cpu_dir == job


def test_sluid_with_path_or_glob_characters_matches_only_itself(tmp_path):
    root = str(tmp_path)
    fake_tree(root)
    for bad in ("sEPSM8Y64FTN0?", "sEPSM8Y64FTN0*", "../vm1_slurmstepd.scope/" + SLUID, ".."):
        assert find_job_cgroup("1", 0, "vm1", root, sluid=bad, init_cgroup="") is None, bad

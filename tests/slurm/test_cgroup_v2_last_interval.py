"""cgroup v2, the job's last interval: the wake-up at ``populated 0`` (cgroup.events) reads the job's
``memory.peak`` as well as ``cpu.stat``, before slurmstepd removes the directory, so a memory peak
in the last interval is kept (it was recorded as the last full sample's 15.9 MB against sacct's
MaxRSS of 71.6 MB for a 64 MiB peak).

The tree is the one Slurm 26.05 wrote in the project's VM (test_cgroup_v2_sluid.fake_tree, from
tests/slurm/data/cgroup-v2-vm.txt); the files' formats are the kernel's
(Documentation/admin-guide/cgroup-v2.rst: ``cpu.stat`` "usage_usec", ``memory.peak`` "the max
memory usage recorded for the cgroup and its descendants", ``cgroup.events`` "populated 1 if the
cgroup or its descendants contains any live processes")."""

import os
import shutil

from test_cgroup_v2_sluid import SLUID, fake_tree

from slurm_energy.slurm.sampler.probe import SlurmJobProbe

MIB = 2 ** 20


def _w(path, text):
    with open(path, "w") as f:
        f.write(text)


def test_the_end_of_the_job_reads_memory_peak_and_cpu_before_removal(tmp_path, monkeypatch):
    monkeypatch.setattr("slurm_energy.slurm.sampler.cgroup.init_cgroup_dir", lambda *a, **k: "")
    job = fake_tree(str(tmp_path))
    p = SlurmJobProbe("1", 2001, "vm1", str(tmp_path), sluid=SLUID)
    u = p.poll(full=True)  # a full sample while it runs: the capture's values
    assert u is not None and u.cpu_time_s == 0.536133 and u.max_mem_bytes == 1921024 and u.mem_bytes == 1540096
    # the last interval: the job allocates 64 MiB (peak 64 MiB + the captured 1.8 MiB), frees it,
    # uses 2.5 CPU-s more, and its last process exits (populated 0); the wake-up poll is not full
    _w(os.path.join(job, "memory.peak"), f"{64 * MIB + 1921024}\n")
    _w(os.path.join(job, "memory.current"), "0\n")
    _w(os.path.join(job, "cpu.stat"), "usage_usec 3036133\nuser_usec 2642968\nsystem_usec 393165\n")
    _w(os.path.join(job, "cgroup.events"), "populated 0\nfrozen 0\n")
    u = p.poll(full=False)
    assert u is not None and u.cpu_time_s == 3.036133  # 0.536133 + 2.5 CPU-s
    assert u.max_mem_bytes == 69_029_888  # 67,108,864 + 1,921,024 = 69,029,888 bytes: the last interval's peak
    assert p.gone()
    shutil.rmtree(os.path.dirname(job))  # slurmstepd removes the job's cgroup
    assert p.poll(full=True) is None
    assert p.usage.max_mem_bytes == 69_029_888 and p.usage.cpu_time_s == 3.036133  # kept for the last row


def test_an_in_between_poll_while_running_still_reads_the_cpu_only(tmp_path, monkeypatch):
    monkeypatch.setattr("slurm_energy.slurm.sampler.cgroup.init_cgroup_dir", lambda *a, **k: "")
    job = fake_tree(str(tmp_path))
    p = SlurmJobProbe("1", 2001, "vm1", str(tmp_path), sluid=SLUID)
    p.poll(full=True)
    _w(os.path.join(job, "memory.peak"), f"{8 * MIB}\n")
    u = p.poll(full=False)  # populated 1: one pread of cpu.stat, memory left for the next sample
    assert u.max_mem_bytes == 1921024

"""The job's CPU time from real cgroups (root, cgroupfs mounted; skipped elsewhere): real processes
burning known CPU, a job shorter than the interval, one cancelled early. "The job's own" CPU time
is the kernel's wait4 rusage of the process (us resolution): the record must be within 3 % of it."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from slurm_energy.sampling.samplefile import SampleWriter
from slurm_energy.sampling.sampler import Sampler
from slurm_energy.slurm.sampler.cgroup import JobCgroup
from slurm_energy.slurm.sampler.probe import SlurmJobProbe
from tests.helpers.samplefile_rows import read_samples

V1 = "/sys/fs/cgroup/cpuacct"
V2 = "/sys/fs/cgroup/unified"
# waits for a line on stdin (so it is in the cgroup first), burns S s of CPU time, exits
BURN = "import sys, time\nsys.stdin.readline()\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def _writable(d):
    return os.geteuid() == 0 and os.path.isdir(d) and os.access(d, os.W_OK)


def _mkdirs(base, *parts):
    made, d = [], base
    for p in parts:
        d = os.path.join(d, p)
        os.mkdir(d)
        made.append(d)
    return made


def _rmdirs(made):
    for d in reversed(made):
        try:
            os.rmdir(d)
        except OSError:
            pass


def _burner(seconds, cgroup_dir):
    procs = os.path.join(cgroup_dir, "cgroup.procs")

    def enter():  # in the child before exec: all of its CPU time is the cgroup's, as wait4 counts it
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    p = subprocess.Popen([sys.executable, "-c", BURN.format(s=seconds)], stdin=subprocess.PIPE, preexec_fn=enter)
    p.stdin.write(b"go\n")
    p.stdin.flush()
    return p


def _own_cpu(p):
    _pid, _st, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    return ru.ru_utime + ru.ru_stime


def _sampler(probe, path, interval_s=30.0):
    s = Sampler([], probe, SampleWriter(path, fsync=False), interval_s=interval_s, gone_after_s=0)
    th = threading.Thread(target=s.run, daemon=True)
    th.start()
    return s, th


@pytest.mark.skipif(not _writable(V1), reason="needs root and a writable cgroup v1 cpuacct hierarchy")
def test_v1_kept_descriptor_reads_and_removal():
    made = _mkdirs(V1, f"se-test-{os.getpid()}")
    try:
        cg = JobCgroup(1, made[0], None)
        p = _burner(0.3, made[0])
        own = _own_cpu(p)
        assert abs(cg.read(pids=False).cpu_time_s - own) <= 0.03 * own  # by hand: 0.3 s + start-up
        fd = next(iter(cg._files._fds.values()))
        os.rmdir(made[0])
        with pytest.raises(OSError):  # ENODEV: the kernel no longer answers through the old descriptor
            os.pread(fd, 64, 0)
        assert cg.read() is None and cg._files._fds == {}
    finally:
        _rmdirs(made)


@pytest.mark.skipif(not _writable(V1), reason="needs root and a writable cgroup v1 cpuacct hierarchy")
@pytest.mark.parametrize("burn_s,cancel_after_s", [(1.0, None), (3.0, 0.7)])
def test_v1_job_shorter_than_the_interval_and_cancelled(tmp_path, burn_s, cancel_after_s):
    node = f"se{os.getpid()}"
    made = _mkdirs(V1, f"slurm_{node}", "uid_0", "job_77")
    try:
        probe = SlurmJobProbe("77", 0, node)
        _s, th = _sampler(probe, str(tmp_path / "s"))
        p = _burner(burn_s, made[-1])
        if cancel_after_s:
            time.sleep(cancel_after_s)
            p.send_signal(signal.SIGKILL)  # scancel: the job is killed mid-burn
        own = _own_cpu(p)
        time.sleep(0.1)  # slurmstepd removes the job's cgroup once its last process is gone
        _rmdirs(made)
        th.join(10)
        assert not th.is_alive()
        gone = next(r for r in read_samples(str(tmp_path / "s")) if r["kind"] == "cgroup_gone")
        assert abs(gone["job"]["cpu_time_s"] - own) <= 0.03 * own, (gone["job"], own)
        if cancel_after_s:
            assert own < burn_s  # it was cut short
    finally:
        _rmdirs(made)


@pytest.mark.skipif(not (_writable(V2) and os.path.isfile(os.path.join(V2, "cgroup.controllers"))),
                    reason="needs root and a writable cgroup v2 hierarchy")
def test_v2_populated_0_wakes_the_sampler_before_removal(tmp_path):
    base = os.path.join(V2, f"se-test-{os.getpid()}")
    made = _mkdirs(V2, os.path.basename(base), "system.slice", "slurmstepd.scope", "job_42")
    try:
        probe = SlurmJobProbe("42", 0, "n1", cgroup_root=base)
        s, th = _sampler(probe, str(tmp_path / "s"), interval_s=60.0)
        p = _burner(1.0, made[-1])
        t = time.monotonic()
        while probe.cg is None or not probe._was_populated:  # the sampler saw the job running
            assert time.monotonic() - t < 10
            time.sleep(0.05)
        assert not probe.needs_tail_poll  # cgroup.events tells the end: no in-between polls
        own = _own_cpu(p)
        th.join(5)  # woken by POLLPRI at populated 0, not after 60 s; the directory still exists
        alive = th.is_alive()
        s.stop()
        th.join(5)
        assert not alive and os.path.isdir(made[-1])
        rows = list(read_samples(str(tmp_path / "s")))
        gone = next(r for r in rows if r["kind"] == "cgroup_gone")
        assert abs(gone["job"]["cpu_time_s"] - own) <= 0.03 * own, (gone["job"], own)
        assert s.n_polls <= 2
    finally:
        _rmdirs(made)


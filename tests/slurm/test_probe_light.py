"""The sampler's light polls (SlurmJobProbe.light_poll: plain values, no objects) give the same
usage as its general polls (probe.poll + the sampler's merge), on fake cgroup v1 and /proc trees."""

import os

from slurm_energy.sampling.proctree import PAGE, StatFiles
from slurm_energy.sampling.samplefile import SampleWriter
from slurm_energy.sampling.sampler import Sampler
from slurm_energy.slurm.probe import SlurmJobProbe


def _w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:  # the same inode, rewritten: a kept descriptor reads the new text
        f.write(text)


def _v1_job(root):
    cpu = os.path.join(root, "cpuacct", "slurm", "uid_0", "job_7")
    mem = os.path.join(root, "memory", "slurm", "uid_0", "job_7")
    return cpu, mem


def _set_v1(root, cpu_ns, mem, peak, procs):
    cpu_dir, mem_dir = _v1_job(root)
    _w(os.path.join(cpu_dir, "cpuacct.usage"), f"{cpu_ns}\n")
    _w(os.path.join(cpu_dir, "step_0", "cgroup.procs"), "".join(f"{p}\n" for p in procs))
    _w(os.path.join(mem_dir, "memory.usage_in_bytes"), f"{mem}\n")
    _w(os.path.join(mem_dir, "memory.max_usage_in_bytes"), f"{peak}\n")


def _samplers(tmp_path, make_probe):
    """(sampler with the light path, sampler without it), each on its own probe."""
    light, general = make_probe(), make_probe()
    general.light_poll = None  # the sampler then polls through probe.poll only
    return [Sampler([], p, SampleWriter(str(tmp_path / f"s{i}.jsonl")), interval_s=5.0)
            for i, p in enumerate((light, general))]


def _usage(s):
    u = s.last_usage
    return (u.cpu_time_s, u.mem_bytes, u.max_mem_bytes, u.pids, u.source)


def test_cgroup_v1_light_polls_give_the_general_polls_usage(tmp_path):
    root = str(tmp_path / "cg")
    _set_v1(root, 1_000_000_000, 4096, 8192, [100])
    light, general = _samplers(tmp_path, lambda: SlurmJobProbe("7", 0, "n1", cgroup_root=root))
    steps = [  # (files: CPU ns, memory, peak, PIDs), full poll?, expected usage (s, bytes, bytes, PIDs)
        ((1_000_000_000, 4096, 8192, [100]), True, (1.0, 4096, 8192, [100])),
        ((2_500_000_000, 5000, 9000, [100, 101]), False, (2.5, 4096, 8192, [100])),  # CPU time only
        ((3_000_000_000, 6000, 9500, [100, 101]), True, (3.0, 6000, 9500, [100, 101])),
        ((3_250_000_000, 6000, 9500, []), True, (3.25, 6000, 9500, [100, 101])),  # no PIDs: the last kept
    ]
    for files, full, want in steps:
        _set_v1(root, *files)
        for s in (light, general):
            s._poll(full)
        assert _usage(light) == _usage(general) == want + ("cgroup-v1",)
    assert light.probe.light_poll(True) is not None  # the steady state went the light way
    cpu_dir, mem_dir = _v1_job(root)
    for d in (os.path.join(cpu_dir, "step_0"), cpu_dir, mem_dir):
        for f in os.listdir(d):
            if os.path.isfile(os.path.join(d, f)):
                os.remove(os.path.join(d, f))
        os.rmdir(d)
    for s in (light, general):  # removed: the light poll steps aside, the general one says gone
        s._poll(False)
        assert s.probe.gone() and s.last_usage.cpu_time_s == 3.25
    assert light.probe.light_poll(False) is None


def _stat_line(pid, utime, stime, rss_pages):
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    # cutime cstime priority nice threads itreal starttime vsize rss
    return f"{pid} (sleep) S 1 0 0 0 0 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 0 0 {rss_pages}\n"


def test_pid_mode_light_polls_read_the_known_pids_and_leave_rescans_to_poll(tmp_path):
    proc = tmp_path / "proc"
    now = [0.0]

    def make():
        p = SlurmJobProbe("7", 0, "n1", cgroup_root=str(tmp_path / "nocg"), clock=lambda: now[0])
        p._scanner.pids = lambda: [4242]
        p._stat = StatFiles(proc=str(proc))
        return p

    _w(str(proc / "4242" / "stat"), _stat_line(4242, 150, 50, 10))  # 200 ticks = 2.0 s, 10 pages
    light, general = _samplers(tmp_path, make)
    now[0] = 1.0  # past the 0.5 s wait for a cgroup
    for s in (light, general):
        s._poll(True)
    assert _usage(light) == _usage(general) == (2.0, 10 * PAGE, 10 * PAGE, [4242], "psutil")
    _w(str(proc / "4242" / "stat"), _stat_line(4242, 250, 50, 4))  # 3.0 s, 4 pages now
    now[0] = 2.0
    for s in (light, general):
        s._poll(False)
    assert _usage(light) == _usage(general) == (3.0, 4 * PAGE, 10 * PAGE, [4242], "psutil")
    _w(str(proc / "4242" / "stat"), _stat_line(4242, 300, 50, 6))  # 3.5 s, 6 pages
    now[0] = 3.0  # a full poll 2 s after the rescan and the look for a cgroup (every 10 s): light
    assert light.probe.light_poll(True) == (3.5, 6 * PAGE, 10 * PAGE, [4242])
    for s in (light, general):
        s._poll(True)
    assert _usage(light) == _usage(general) == (3.5, 6 * PAGE, 10 * PAGE, [4242], "psutil")
    now[0] = 11.0  # 10 s after the first full poll: rescan and look due, poll() does them
    assert light.probe.light_poll(True) is None and light.probe.light_poll(False) is not None

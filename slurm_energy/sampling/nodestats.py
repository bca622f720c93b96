"""Node-wide CPU and memory counters, and the psutil fallback for jobs without a cgroup.

Node CPU busy time (s) = user + nice + system + irq + softirq + steal from /proc/stat (what
psutil's ``cpu_times()`` reads), i.e. total minus idle and iowait: the denominator of a job's CPU
share. Read from /proc directly: the Prolog takes one reading per job, and importing psutil cost
it more than the reading itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/stat's unit (USER_HZ)


@dataclass
class NodeStats:
    """Node counters at one instant."""

    cpu_busy_s: float  # s of busy CPU time summed over all logical CPUs since boot
    cpu_total_s: float  # s of all CPU time (busy + idle + iowait) summed over CPUs since boot
    ncpu: int  # logical CPUs
    mem_used_bytes: int  # total - available, bytes
    mem_total_bytes: int

    def to_dict(self) -> dict:
        return {"cpu_busy_s": round(self.cpu_busy_s, 3), "cpu_total_s": round(self.cpu_total_s, 3),
                "ncpu": self.ncpu, "mem_used_bytes": self.mem_used_bytes, "mem_total_bytes": self.mem_total_bytes}


def read_node_stats(proc: str = "/proc") -> NodeStats:
    """The node's counters from ``/proc/stat`` (first line: user nice system idle iowait irq softirq
    steal guest guest_nice, in USER_HZ ticks) and ``/proc/meminfo`` (MemTotal, MemAvailable, kB),
    as psutil's ``cpu_times()`` and ``virtual_memory()`` read them. Raises OSError if they are
    missing or unreadable."""
    with open(f"{proc}/stat", "rb") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    if len(ticks) < 4:
        raise OSError(f"{proc}/stat: no cpu line")
    t = [x / _CLK_TCK for x in ticks]
    idle = t[3] + (t[4] if len(t) > 4 else 0.0)
    # guest time is already included in user on Linux; subtracting avoids double counting
    total = sum(t) - sum(t[8:10])
    mem: dict[bytes, int] = {}
    with open(f"{proc}/meminfo", "rb") as f:
        for line in f:
            k, _, v = line.partition(b":")
            if k in (b"MemTotal", b"MemAvailable"):
                mem[k] = int(v.split()[0]) * 1024
    if b"MemTotal" not in mem or b"MemAvailable" not in mem:  # kernels before 3.14: psutil estimates it
        import psutil

        vm = psutil.virtual_memory()
        mem = {b"MemTotal": int(vm.total), b"MemAvailable": int(vm.available)}
    return NodeStats(total - idle, total, os.cpu_count() or 1, mem[b"MemTotal"] - mem[b"MemAvailable"], mem[b"MemTotal"])


def job_pids_by_env(job_id: str) -> list[int]:
    """PIDs whose environment holds SLURM_JOB_ID=<job_id> (root can read /proc/PID/environ).

    The fallback where proctrack/linuxproc leaves no job cgroup.
    """
    import psutil

    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("SLURM_JOB_ID") == job_id:
                out.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return out


def pids_usage(pids: list[int]) -> tuple[Optional[float], Optional[int]]:
    """Sum of CPU time (user + system + reaped children, s) and RSS (bytes) of ``pids`` now.

    Returns (None, None) if none of them exists. CPU time of processes that already exited and
    were not reaped by one of ``pids`` is lost: that is why cgroups are preferred.
    """
    import psutil

    cpu = 0.0
    rss = 0
    seen = False
    for pid in pids:
        try:
            p = psutil.Process(pid)
            with p.oneshot():
                ct = p.cpu_times()
                cpu += ct.user + ct.system + ct.children_user + ct.children_system
                rss += p.memory_info().rss
            seen = True
        except (psutil.Error, OSError):
            continue
    return (cpu, rss) if seen else (None, None)

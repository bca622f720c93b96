"""Node-wide CPU and memory counters, and the psutil fallback for jobs without a cgroup.

Node CPU busy time (s) = user + nice + system + irq + softirq + steal from /proc/stat (psutil's
``cpu_times()``), i.e. total minus idle and iowait: the denominator of a job's CPU share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import psutil


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


def read_node_stats() -> NodeStats:
    """Read /proc/stat and /proc/meminfo through psutil. Raises OSError only if /proc is missing."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    total = sum(t)
    # guest time is already included in user on Linux; subtracting avoids double counting
    total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    vm = psutil.virtual_memory()
    return NodeStats(total - idle, total, psutil.cpu_count() or 1, int(vm.total - vm.available), int(vm.total))


def job_pids_by_env(job_id: str) -> list[int]:
    """PIDs whose environment holds SLURM_JOB_ID=<job_id> (root can read /proc/PID/environ).

    The fallback where proctrack/linuxproc leaves no job cgroup.
    """
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

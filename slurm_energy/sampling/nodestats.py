"""Node-wide CPU and memory counters (a job without a cgroup: :mod:`slurm_energy.sampling.proctree`).

Node CPU busy time (s) = user + nice + system + irq + softirq + steal from /proc/stat (what
psutil's ``cpu_times()`` reads), i.e. total minus idle and iowait: the denominator of a job's CPU
share. Read from /proc directly: the Prolog takes one reading per job, and importing psutil cost
it more than the reading itself.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/stat's unit (USER_HZ)
_NCPU = os.cpu_count() or 1  # logical CPUs, read once per process


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


_FDS: dict[str, int] = {}  # /proc/stat and /proc/meminfo, kept open (a sampler reads them every sample)
_SNAPSHOT: list = [None, None]  # [thread id, NodeStats] while node_snapshot() is active


def _read(path: str, keep: bool) -> bytes:
    if not keep:
        with open(path, "rb") as f:
            return f.read()
    fd = _FDS.get(path)
    if fd is None:
        fd = _FDS[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    return os.pread(fd, 1 << 16, 0)


def _meminfo_bytes(meminfo: bytes, key: bytes) -> Optional[int]:
    i = meminfo.find(key + b":")
    if i < 0:
        return None
    return int(meminfo[i + len(key) + 1:meminfo.index(b"\n", i)].split()[0]) * 1024  # kB -> bytes


def read_node_stats(proc: str = "/proc") -> NodeStats:
    """The node's counters from ``/proc/stat`` (first line: user nice system idle iowait irq softirq
    steal guest guest_nice, in USER_HZ ticks) and ``/proc/meminfo`` (MemTotal, MemAvailable, kB),
    as psutil's ``cpu_times()`` and ``virtual_memory()`` read them. Inside :func:`node_snapshot`
    (same thread) the snapshot's reading. /proc's files are read through descriptors kept open.
    Raises OSError if they are missing or unreadable."""
    snap = _SNAPSHOT
    if snap[1] is not None and snap[0] == threading.get_ident():
        return snap[1]
    keep = proc == "/proc"
    stat = _read(f"{proc}/stat", keep)
    ticks = [int(x) for x in stat[:stat.find(b"\n")].split()[1:]]
    if len(ticks) < 4:
        raise OSError(f"{proc}/stat: no cpu line")
    t = [x / _CLK_TCK for x in ticks]
    idle = t[3] + (t[4] if len(t) > 4 else 0.0)
    # guest time is already included in user on Linux; subtracting avoids double counting
    total = sum(t) - sum(t[8:10])
    meminfo = _read(f"{proc}/meminfo", keep)
    mem_total, avail = _meminfo_bytes(meminfo, b"MemTotal"), _meminfo_bytes(meminfo, b"MemAvailable")
    if mem_total is None or avail is None:  # kernels before 3.14: psutil estimates it
        import psutil

        vm = psutil.virtual_memory()
        mem_total, avail = int(vm.total), int(vm.available)
    return NodeStats(total - idle, total, _NCPU, mem_total - avail, mem_total)


@contextmanager
def node_snapshot() -> Iterator[NodeStats]:
    """Read the node's counters once; :func:`read_node_stats` returns that reading in this thread
    until the block ends (one sample's row and readers then see the same instant, and /proc is read
    once per sample instead of once per reader). Raises OSError as :func:`read_node_stats`."""
    ns = read_node_stats()
    hold_snapshot(ns)
    try:
        yield ns
    finally:
        hold_snapshot(None)


def hold_snapshot(ns: Optional[NodeStats]) -> None:
    """:func:`read_node_stats` returns ``ns`` in this thread from now on; ``None`` ends that
    (:func:`node_snapshot` without a context manager: the sampler's per-sample path)."""
    _SNAPSHOT[:] = [None if ns is None else threading.get_ident(), ns]

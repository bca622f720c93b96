"""Node-wide CPU and memory counters (a job without a cgroup: :mod:`slurm_energy.sampling.proctree`).

Node CPU busy time (s) = user + nice + system + irq + softirq + steal from /proc/stat (what
psutil's ``cpu_times()`` reads), i.e. total minus idle and iowait: the denominator of a job's CPU
share. Read from /proc directly: the Prolog takes one reading per job, and importing psutil cost
it more than the reading itself.
"""

from __future__ import annotations

import os

# threading.get_ident is _thread's (the documented low-level API, loaded at interpreter start): the
# Prolog's reading imports this module, and threading cost it one more module to load
from _thread import get_ident

from slurm_energy.core import NodeUsage
from slurm_energy.sampling.files import KeptFiles

TYPE_CHECKING = False
if TYPE_CHECKING:
    from slurm_energy.sampling.files import FileSource

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/stat's unit (USER_HZ)
_NCPU = os.cpu_count() or 1  # logical CPUs, read once per process

PROC_FILES = KeptFiles()  # /proc/stat and /proc/meminfo, kept open (a sampler reads them every sample)
_SNAPSHOT: list[object] = [None, None]  # [thread id, NodeUsage] held by hold_snapshot()


def _meminfo_bytes(meminfo: bytes, key: bytes) -> int | None:
    i = meminfo.find(key + b":")
    if i < 0:
        return None
    return int(meminfo[i + len(key) + 1:meminfo.index(b"\n", i)].split()[0]) * 1024  # kB -> bytes


def read_node_stats(proc: str = "/proc", files: FileSource | None = None) -> NodeUsage:
    """The node's counters from ``/proc/stat`` (first line: user nice system idle iowait irq softirq
    steal guest guest_nice, in USER_HZ ticks) and ``/proc/meminfo`` (MemTotal, MemAvailable, kB),
    as psutil's ``cpu_times()`` and ``virtual_memory()`` read them. While :func:`hold_snapshot` holds one
    (same thread) the snapshot's reading. ``files``: where the files are read (default: /proc's
    through descriptors kept open, :data:`PROC_FILES`; another ``proc``: plain reads).
    Raises OSError if they are missing or unreadable."""
    snap = _SNAPSHOT
    if snap[1] is not None and snap[0] == get_ident():
        return snap[1]  # type: ignore[return-value]  # hold_snapshot's NodeUsage
    if files is None:
        files = PROC_FILES if proc == "/proc" else KeptFiles(limit=0)
    stat = files.read(f"{proc}/stat")
    ticks = [int(x) for x in stat[:stat.find(b"\n")].split()[1:]]
    if len(ticks) < 4:
        raise OSError(f"{proc}/stat: no cpu line")
    t = [x / _CLK_TCK for x in ticks]
    idle = t[3] + (t[4] if len(t) > 4 else 0.0)
    # guest time is already included in user on Linux; subtracting avoids double counting
    total = sum(t) - sum(t[8:10])
    meminfo = files.read(f"{proc}/meminfo")
    mem_total, avail = _meminfo_bytes(meminfo, b"MemTotal"), _meminfo_bytes(meminfo, b"MemAvailable")
    if mem_total is None or avail is None:  # kernels before 3.14: psutil estimates it
        import psutil

        vm = psutil.virtual_memory()
        mem_total, avail = int(vm.total), int(vm.available)
    return NodeUsage(round(total - idle, 3), round(total, 3), _NCPU, mem_total - avail, mem_total)


def hold_snapshot(ns: NodeUsage | None) -> None:
    """:func:`read_node_stats` returns ``ns`` in this thread from now on; ``None`` ends that (a
    sample's row and its CPU/RAM models then see one instant, /proc read once per sample)."""
    _SNAPSHOT[:] = [None if ns is None else get_ident(), ns]

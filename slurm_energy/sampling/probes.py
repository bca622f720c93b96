"""Usage probe for the sampler without Slurm: a process tree (``run``, ``attach``, ``track()``).

The Slurm job probe (cgroup, else PIDs by SLURM_JOB_ID) is :class:`slurm_energy.slurm.sampler.probe.SlurmJobProbe`.
"""

from __future__ import annotations

import os
import select
import time

from slurm_energy.core import JobUsage
from slurm_energy.sampling.files import KeptFiles
from slurm_energy.sampling.proctree import EnvScanner, ProcTree, pids_usage, read_stat, stat_paths


class _TreeAndJob:
    """The root's tree and the PIDs of a Slurm job found by environment, each once, root first."""

    def __init__(self, root: int, job_id: str):
        self.root = root
        self._tree = ProcTree(root)
        self._job = EnvScanner(job_id)

    def pids(self) -> list[int]:
        own = self._tree.pids()
        if not own:
            return []
        seen = set(own)
        return own + [p for p in self._job.pids() if p not in seen]


#: The file beside the sample file where ``track()`` keeps its own ``result()`` CPU-s
#: (:attr:`ProcessTreeProbe.overhead_path`).
OVERHEAD_FILE = "tracker_cpu_s"


class ProcessTreeProbe:
    """A process and all its descendants (``slurm-energy run -- CMD``, or attach by PID).

    CPU time is the tree's user + system time including reaped children (``/proc/PID/stat``, see
    :mod:`slurm_energy.sampling.proctree`: no walk of all /proc where the kernel lists children);
    a descendant that exits before its parent reaps it may lose up to one poll of CPU time.

    ``from_first_poll=True`` (``attach``: the tree ran before we looked): CPU time, s, is counted
    from the first successful poll, i.e. the tree's CPU time then is the baseline subtracted from
    every later poll, so the record covers only the measured window.

    ``exact_end=True`` (``run``: the caller waits for the root and passes its wait4 rusage as the
    final usage) tells the sampler no in-between CPU-time polls are needed. Otherwise the root's
    pidfd (:meth:`wakeup`) wakes the sampler when it exits, whose poll then reads the root's final
    CPU time while it is a zombie (exact unless its parent reaped it first).
    """

    def __init__(self, pid: int, exclude: frozenset[int] = frozenset(), from_first_poll: bool = False,
                 exact_end: bool = False, end_pid: int | None = None, job_marker: str | None = None,
                 overhead_path: str | None = None):
        self.pid = pid
        #: ``overhead_path``: a file where the measuring process keeps the CPU-s its own tracker spent
        #: inside the measured tree (``track().result()`` summarising the samples so far), rewritten
        #: whole (:meth:`_overhead_s`); subtracted from the tree's CPU time, so measuring is not
        #: charged to the run (:data:`OVERHEAD_FILE`)
        self.overhead_path = overhead_path
        #: the process whose end ends the measurement (default the root): ``track()`` under torchrun
        #: measures the launcher's tree (``pid``) until local rank 0 (``end_pid``) is gone
        self.end_pid = pid if end_pid is None else end_pid
        self.exclude = frozenset(exclude)  # e.g. the sampler's own process, a child of ``pid``
        self._max_rss = 0
        self._best_cpu = 0.0
        self._from_first_poll = from_first_poll
        self.cpu_baseline_s: float | None = None  # the tree's CPU time at the first poll, s
        self.needs_tail_poll = not exact_end
        #: ``job_marker``: also every process whose environment holds ``SLURM_JOB_ID=<job_marker>``
        #: (the other tasks of ``srun -n`` on this node, ``track()`` without the hooks)
        self._tree: ProcTree | _TreeAndJob = ProcTree(pid) if job_marker is None else _TreeAndJob(pid, job_marker)
        self._pidfd: int | None = None
        self._pidfd_failed = False
        self._exact_end = exact_end
        self._listed_at: float | None = None
        self._last_pids: list[int] = []
        self._stat = KeptFiles(limit=64)  # the tree's /proc/PID/stat, kept open
        self.usage = JobUsage(source="procfs")  # what poll() updates in place

    #: s between listings of the tree's processes (where the kernel has no children files, each
    #: listing reads /proc's directory); in between, the PIDs of the last listing are read. A
    #: descendant's CPU time is cumulative (and a reaped one's goes to its parent's), so a late
    #: find loses nothing of a long-lived process.
    RELIST_S = 10.0

    def _pids(self) -> list[int]:
        now = time.monotonic()
        if self._listed_at is None or now - self._listed_at >= self.RELIST_S or not self._last_pids:
            self._last_pids = [p for p in self._tree.pids() if p not in self.exclude or p == self.pid]
            self._listed_at = now
            self._stat.retain(stat_paths(self._last_pids + [self.pid]))
        return self._last_pids

    def poll(self, full: bool = True) -> JobUsage | None:
        """:attr:`usage` updated to now (CPU time s, RSS and peak RSS bytes, PIDs; ``full`` makes
        no difference here), or None while no process of the tree can be read."""
        pids = self._pids()
        cpu, rss = pids_usage(pids, files=self._stat, zombies=True)
        if cpu is None or rss is None:
            return None
        if self.cpu_baseline_s is None:
            self.cpu_baseline_s = cpu if self._from_first_poll else 0.0
        cpu -= self.cpu_baseline_s + self._overhead_s()
        self._best_cpu = max(self._best_cpu, cpu)  # never report CPU time going backwards
        self._max_rss = max(self._max_rss, rss)
        u = self.usage
        u.cpu_time_s, u.mem_bytes, u.max_mem_bytes, u.pids = self._best_cpu, rss, self._max_rss, pids
        return u

    def _overhead_s(self) -> float:
        """The tracker's own CPU-s in the tree so far (``overhead_path``: ``<done>``, or ``<done> <pid>
        <mark>`` while it is at work, whose CPU time since ``mark`` counts too); 0 without one."""
        if self.overhead_path is None:
            return 0.0
        try:
            with open(self.overhead_path, "rb") as f:
                parts = f.read(128).split()
            done = float(parts[0])
            if len(parts) == 3:  # at work now: its process's CPU time since the mark
                st = read_stat(int(parts[1]), files=self._stat)
                done += max(0.0, st[2] - float(parts[2])) if st is not None else 0.0
        except (OSError, ValueError, IndexError):
            return 0.0
        return done if 0 < done < float("inf") else 0.0

    def gone(self) -> bool:
        """True once the end process (``end_pid``, default the root) has exited (gone, or a zombie)."""
        st = read_stat(self.end_pid, files=self._stat if self.end_pid == self.pid else None)
        return st is None or st[0] == "Z"

    def wakeup(self) -> tuple[int, int] | None:
        """(pidfd of the end process, POLLIN): readable once it exits; None once it has, where
        pidfd_open is unavailable (Linux < 5.3, no permission), or with ``exact_end`` (the caller
        waits for the end itself)."""
        if self._exact_end:
            return None
        if self._pidfd is None and not self._pidfd_failed:
            try:
                self._pidfd = os.pidfd_open(self.end_pid)
            except (OSError, AttributeError):
                self._pidfd_failed = True
        if self._pidfd is None or self.gone():
            return None
        return self._pidfd, select.POLLIN

    def wait_gone(self) -> None:
        """Block until the end process exits (a pidfd; a 0.5 s poll of :meth:`gone` without one)."""
        try:
            fd = os.pidfd_open(self.end_pid)
        except (OSError, AttributeError):
            while not self.gone():
                time.sleep(0.5)
            return
        try:
            select.select([fd], [], [])
        finally:
            os.close(fd)

    def close(self) -> None:
        self._stat.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

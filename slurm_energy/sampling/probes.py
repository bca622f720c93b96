"""Usage probe for the sampler without Slurm: a process tree (``run``, ``attach``, ``track()``).

The Slurm job probe (cgroup, else PIDs by SLURM_JOB_ID) is :class:`slurm_energy.slurm.probe.SlurmJobProbe`.
"""

from __future__ import annotations

from typing import Optional

import psutil

from slurm_energy.sampling.nodestats import pids_usage
from slurm_energy.sampling.sampler import Usage


class ProcessTreeProbe:
    """A process and all its descendants (``slurm-energy run -- CMD``, or attach by PID).

    CPU time is the tree's user + system time including reaped children; a descendant that exits
    before its parent reaps it may lose up to one poll of CPU time.

    ``from_first_poll=True`` (``attach``: the tree ran before we looked): CPU time, s, is counted
    from the first successful poll, i.e. the tree's CPU time then is the baseline subtracted from
    every later poll, so the record covers only the measured window.
    """

    def __init__(self, pid: int, exclude: frozenset = frozenset(), from_first_poll: bool = False):
        self.pid = pid
        self.exclude = frozenset(exclude)  # e.g. the sampler's own process, a child of ``pid``
        self._max_rss = 0
        self._best_cpu = 0.0
        self._from_first_poll = from_first_poll
        self.cpu_baseline_s: Optional[float] = None  # the tree's CPU time at the first poll, s

    def _tree(self) -> list[int]:
        try:
            p = psutil.Process(self.pid)
            if p.status() == psutil.STATUS_ZOMBIE:
                return []
            return [self.pid] + [c.pid for c in p.children(recursive=True) if c.pid not in self.exclude]
        except psutil.Error:
            return []

    def poll(self, full: bool = True) -> Optional[Usage]:
        pids = self._tree()
        cpu, rss = pids_usage(pids)
        if cpu is None:
            return None
        if self.cpu_baseline_s is None:
            self.cpu_baseline_s = cpu if self._from_first_poll else 0.0
        self._best_cpu = max(self._best_cpu, cpu - self.cpu_baseline_s)  # never report CPU time going backwards
        self._max_rss = max(self._max_rss, rss or 0)
        return Usage(self._best_cpu, rss, self._max_rss, pids, "psutil")

    def gone(self) -> bool:
        return not self._tree()

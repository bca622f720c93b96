"""The sampler's usage probe for a Slurm job: its cgroup (v1/v2) once it exists, else its PIDs."""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from typing import Any

from slurm_energy.core import JobUsage
from slurm_energy.sampling.files import KeptFiles
from slurm_energy.sampling.proctree import ProcTree, pids_usage, stat_paths
from slurm_energy.slurm.context import job_env_facts
from slurm_energy.slurm.sampler.cgroup import JobCgroup, find_job_cgroup

#: how many full polls look at one PID's environment for the job's facts: a child of slurmstepd is
#: looked at before its exec of the job's program (root's, or slurmd's environment) and is the
#: job's a moment later; a process that never shows them (its environment emptied) costs no more
ENV_LOOKS = 3


class SlurmJobProbe:
    """A Slurm job on this node: its cgroup (v1/v2) once it exists, else its PIDs by environment.

    The cgroup appears just after the Prolog and is removed before the Epilog; the job's PIDs
    (:class:`StepdScanner`: descendants of the job's slurmstepd whose real uid is the job's) are
    the fallback for proctrack/linuxproc (no cgroup), used
    only after ``pid_fallback_after_s`` without a cgroup and rescanned at full polls, at most every
    ``pid_rescan_s`` (10 s; 0.25 s while none is known); the sampler's in-between CPU-time polls
    read the known PIDs only. CPU time of job processes that exit between polls is lost in that mode: cgroups are
    preferred. In PID mode the cgroup is still looked for, at full polls every ``pid_rescan_s``.

    The end of the job: on cgroup v2 ``cgroup.events`` turning ``populated 0`` wakes the sampler
    (:meth:`wakeup`), which reads ``cpu.stat`` and ``memory.peak`` right then, before slurmstepd
    removes the directory: the CPU time and the peak are exact and no in-between polls are needed
    (:attr:`needs_tail_poll` False). On v1
    nothing announces the end, so the sampler polls the CPU time in between samples (one ``pread``
    of ``cpuacct.usage``) and the finalizer falls back on Slurm's TotalCPU for what it missed.
    """

    def __init__(self, job_id: str, uid: int, node: str = "", cgroup_root: str = "/sys/fs/cgroup",
                 pid_fallback_after_s: float = 0.5, pid_rescan_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic,
                 on_job_env: Callable[[dict[str, Any]], None] | None = None, sluid: str = ""):
        self.job_id, self.uid, self.node, self.root = job_id, uid, node, cgroup_root
        self.sluid = sluid  # SLURM_JOB_SLUID: Slurm 26.05's cgroup v2 job directory name
        self.cg: JobCgroup | None = None
        self._seen_cgroup = False
        self._t0 = clock()
        self._clock = clock
        self._fallback_after = pid_fallback_after_s
        self._pids: list[int] = []
        self._pid_rescan_s = pid_rescan_s
        self._last_scan = -1e9
        self._last_cg_look = -1e9  # when the cgroup was last looked for after the PID fallback began
        self._gone = False
        self._best_cpu = 0.0
        self._max_mem = 0
        self._on_job_env = on_job_env  # called once with the job's env facts (job name, umask)
        self._env_seen: dict[int, int] = {}  # PID -> looks at its environment without the job's facts
        self._scanner = StepdScanner(job_id, uid=uid if uid is not None and uid >= 0 else None)
        self._stat = KeptFiles(limit=64)  # the job's /proc/PID/stat, kept open (PID mode)
        self.usage = JobUsage()  # what poll() updates in place
        self._was_populated = False  # v2: the job's cgroup had processes (populated 1) once
        self._ended = False  # v2: populated 1 -> 0 seen; the reading taken then is the job's last

    @property
    def needs_tail_poll(self) -> bool:
        """True unless the job's end wakes the sampler by itself (cgroup v2 ``cgroup.events``)."""
        return not (self.cg is not None and self.cg.events_fd() is not None)

    def wakeup(self) -> tuple[int, int] | None:
        """(fd, poll event mask) that fires at the job's end, or None: v2 ``cgroup.events``, POLLPRI."""
        if self.cg is None or self._ended:
            return None
        fd = self.cg.events_fd()
        return None if fd is None else (fd, select.POLLPRI)

    def _look_for_job_env(self, pids: list[int]) -> None:
        """Read the job name and umask from a process of the job's user (:func:`job_env_facts`; the
        umask from the kernel, :func:`proc_umask`, where the job's environment has no SLURM_UMASK)."""
        import os

        for pid in pids:
            if self._env_seen.get(pid, 0) >= ENV_LOOKS:
                continue
            self._env_seen[pid] = self._env_seen.get(pid, 0) + 1
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if self.uid is not None and self.uid >= 0 and os.fstat(f.fileno()).st_uid != self.uid:
                        continue  # slurmstepd (root), or its child before it drops to the job's user: looked at again
                    env = dict(kv.split("=", 1) for kv in f.read().decode("utf-8", "surrogateescape").split("\0")
                               if "=" in kv)
                facts = job_env_facts(env, self.job_id)
                if facts is None:
                    continue  # no SLURM_JOB_ID yet: a child of slurmstepd between its fork and its exec of
                    # the job's program holds slurmd's environment; the same PID is the job's after the exec
                if "umask" not in facts:
                    facts.update(proc_umask(pid))
            except OSError:
                continue
            if facts is not None:
                cb, self._on_job_env = self._on_job_env, None
                if cb is not None:
                    cb(facts)
                return

    def poll(self, full: bool = True) -> JobUsage | None:
        """:attr:`usage` updated to now (cgroup: CPU time, and at a full poll memory and PIDs; PID
        mode: all of them), or None while the job cannot be seen (not yet, or gone)."""
        u = self._poll(full)
        if u is not None and self._on_job_env is not None and u.pids:
            self._look_for_job_env(u.pids)
        return u

    def _poll(self, full: bool = True) -> JobUsage | None:
        if self.cg is None and not self._seen_cgroup and self._look_for_cgroup(full):
            self.cg = find_job_cgroup(self.job_id, self.uid, self.node, self.root, sluid=self.sluid)
        if self.cg is not None:
            populated = self.cg.populated()  # v2: read first (re-arms the POLLPRI wake-up)
            ending = populated is False and self._was_populated
            # the job's end (v2 populated 1 -> 0, before slurmstepd removes the directory): the last
            # chance to read memory.peak as well as cpu.stat, so a peak in the last interval is kept
            u = self.cg.read(pids=full, mem=full or ending, into=self.usage)
            if u is not None:
                self._seen_cgroup = True
                self._was_populated = self._was_populated or bool(populated)
                if populated is False and self._was_populated:
                    self._ended = True  # the last process exited: this reading is the job's last
                self._gone = self._ended
                return u
            self.cg = None  # removed: the job's processes are gone
            self._gone = True
            return None
        if self._seen_cgroup:
            self._gone = True
            return None
        if self._clock() - self._t0 < self._fallback_after:
            return None
        # a listing of /proc per scan: every pid_rescan_s once the job's PIDs are known (a late find of
        # a long-lived process loses nothing: its CPU time is cumulative), every 0.25 s until then
        rescan_s = self._pid_rescan_s if self._pids else min(self._pid_rescan_s, 0.25)
        if (full or not self._pids) and self._clock() - self._last_scan >= rescan_s:
            self._pids = self._scanner.pids()
            self._last_scan = self._clock()
            self._stat.retain(stat_paths(self._pids))
        pids = self._pids
        cpu, rss = pids_usage(pids, files=self._stat)
        if cpu is None:
            self._gone = True
            return None
        self._gone = False
        self._best_cpu = max(self._best_cpu, cpu)
        self._max_mem = max(self._max_mem, rss or 0)
        u = self.usage
        u.cpu_time_s, u.mem_bytes, u.max_mem_bytes, u.source = self._best_cpu, rss, self._max_mem, "psutil"
        u.pids = pids or u.pids
        return u

    def _look_for_cgroup(self, full: bool) -> bool:
        """Whether to look for the job's cgroup now: at every poll for ``pid_fallback_after_s``
        (it appears ~20 ms after the Prolog), then at full polls at most every ``pid_rescan_s``
        (PID mode: each look stats several paths that do not exist, and the in-between CPU-time
        polls came several times a sample). A late cgroup loses nothing: its CPU time is cumulative."""
        now = self._clock()
        if now - self._t0 < self._fallback_after:
            return True
        if not full or now - self._last_cg_look < self._pid_rescan_s:
            return False
        self._last_cg_look = now
        return True

    def gone(self) -> bool:
        return self._gone


def real_uid(pid: int, proc: str = "/proc") -> int | None:
    """The process's real uid (``Uid:`` in /proc/PID/status, its first field): what a process of an
    ordinary user cannot change, unlike /proc/PID's owner, which turns root's when it makes itself
    non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``) or runs a setuid program. None when gone."""
    try:
        with open(f"{proc}/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class StepdScanner:
    """The PIDs of one job where no cgroup names them (proctrack/linuxproc): the descendants of the
    job's ``slurmstepd`` processes (``[<job>.extern]``, ``[<job>.batch]``, ``[<job>.<step>]``: comm
    ``slurmstepd``, real uid 0, cmdline ``slurmstepd: [<job>.``; slurmstepd sets its title so) whose
    real uid is the job's (``uid``; None: any). Nothing a job's process can change decides it: not
    its environment (it can drop SLURM_JOB_ID, or make /proc/PID/environ root's by turning itself
    non-dumpable), not /proc/PID's owner. A process that leaves the tree (double fork, reparented
    to init) is not followed, as in Slurm's own proctrack/linuxproc.

    Each :meth:`pids` lists /proc once and reads ``stat`` (and for a ``slurmstepd``, ``cmdline``)
    of new PIDs only; the descendants through :class:`~slurm_energy.sampling.proctree.ProcTree`."""

    def __init__(self, job_id: str, proc: str = "/proc", uid: int | None = None):
        self.uid, self.proc = uid, proc
        self.title = f"slurmstepd: [{job_id}.".encode()
        self._is_stepd: dict[str, bool] = {}
        self._trees: dict[int, ProcTree] = {}
        self._uid_of: dict[int, int | None] = {}

    def _stepd(self, name: str) -> bool:
        try:
            with open(f"{self.proc}/{name}/stat", "rb") as f:
                if b"(slurmstepd)" not in f.read(64):
                    return False
            with open(f"{self.proc}/{name}/cmdline", "rb") as f:
                return f.read(len(self.title)) == self.title and real_uid(int(name), self.proc) == 0
        except OSError:
            return False

    def pids(self) -> list[int]:
        """The job's live PIDs (its slurmstepd processes left out), sorted; [] if none is found."""
        import os

        try:
            now = set(os.listdir(self.proc))
        except OSError:
            return []
        seen = self._is_stepd
        for name in seen.keys() - now:
            del seen[name]
        for name in now - seen.keys():
            seen[name] = name.isdigit() and self._stepd(name)
        roots = {int(n) for n, j in seen.items() if j}
        for r in self._trees.keys() - roots:
            del self._trees[r]
        out: set[int] = set()
        for r in roots:
            tree = self._trees.setdefault(r, ProcTree(r, self.proc))
            out.update(p for p in tree.pids() if p not in roots)
        for p in self._uid_of.keys() - out:
            del self._uid_of[p]
        for p in out - self._uid_of.keys():
            self._uid_of[p] = real_uid(p, self.proc)
        return sorted(p for p in out if self.uid is None or self._uid_of[p] == self.uid)


def proc_umask(pid: int) -> dict[str, str]:
    """``{"umask": "0022"}``: the process's umask as the kernel shows it (``Umask:`` in
    ``/proc/PID/status``, Linux >= 4.7), or ``{}`` when unreadable.

    Slurm 22.05's batch script environment carries no SLURM_UMASK (seen on the test cluster: only
    srun's tasks had it), so a single-node job's reports fell back to the private 077; the batch
    script's own umask is the user's word for their files, as SLURM_UMASK would have been."""
    from slurm_energy.slurm.processes import status_field

    v = status_field(pid, b"Umask")
    return {"umask": v.decode("ascii", "replace")} if v else {}

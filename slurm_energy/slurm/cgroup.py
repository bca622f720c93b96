"""Find and read a Slurm job's cgroup (v1 and v2): the job's CPU time, memory and PIDs.

Layouts (Slurm 22.05, see ../shared/notes/slurm-on-debian12.md):

* cgroup v1: ``<root>/<controller>/slurm[_<node>]/uid_<uid>/job_<id>/step_*/``; ``cpuacct.usage`` is
  the job's CPU time in ns (user + system, all steps), ``memory.usage_in_bytes`` /
  ``memory.max_usage_in_bytes`` its memory. ``slurm_<node>`` is used by builds with several slurmd
  per host (``--enable-multiple-slurmd``, as Debian's); stock builds use ``slurm``.
* cgroup v2: a unified tree; slurmd puts jobs under ``.../system.slice/slurmstepd.scope/job_<id>``
  (the exact parent depends on where slurmd runs), with ``cpu.stat`` (``usage_usec``, us) and
  ``memory.current`` / ``memory.peak`` (bytes). Slurm 26.05 names the job directory by the run's
  SLUID instead (``.../slurmstepd.scope/<SLUID>/``) unless ``CgroupJobIdPaths=yes``.
  (The test machine has cgroup v1 only: the v2 layouts are tested on fake trees, tests/test_cgroup*.)

The job cgroup does not exist while the Prolog runs (it appears ~20 ms after) and is removed before
the Epilog runs, so the sampler looks for it repeatedly and keeps its last reading.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Optional

DEFAULT_ROOT = "/sys/fs/cgroup"


@dataclass
class CgroupUsage:
    """One reading of a job cgroup."""

    cpu_time_s: Optional[float]  # s of CPU time (user + system) since the cgroup was created
    mem_bytes: Optional[int]  # memory in use now, bytes
    max_mem_bytes: Optional[int]  # peak memory, bytes (None where the kernel has no peak file)
    pids: list[int]


@dataclass
class JobCgroup:
    """Where a job's cgroup lives. ``version`` is 1 or 2."""

    version: int
    cpu_dir: str  # v1: cpuacct job dir; v2: the job dir
    mem_dir: Optional[str]  # v1: memory job dir (None if the memory controller is not used)

    @property
    def source(self) -> str:
        return f"cgroup-v{self.version}"

    def exists(self) -> bool:
        """True while the job's cgroup directory exists."""
        return os.path.isdir(self.cpu_dir)

    def read(self, pids: bool = True) -> Optional[CgroupUsage]:
        """Read CPU time, memory and (if ``pids``) PIDs now; ``None`` once the cgroup is gone.

        Listing PIDs walks every step's cgroup.procs: the sampler does it once per sample, not at
        every 0.25 s CPU-time poll."""
        try:
            if self.version == 1:
                cpu = _read_int(os.path.join(self.cpu_dir, "cpuacct.usage"))
                cpu_s = cpu / 1e9 if cpu is not None else None  # ns -> s
                mem = mx = None
                if self.mem_dir:
                    mem = _read_int(os.path.join(self.mem_dir, "memory.usage_in_bytes"))
                    mx = _read_int(os.path.join(self.mem_dir, "memory.max_usage_in_bytes"))
            else:
                stat = _read_kv(os.path.join(self.cpu_dir, "cpu.stat"))
                usec = stat.get("usage_usec")
                cpu_s = usec / 1e6 if usec is not None else None  # us -> s
                mem = _read_int(os.path.join(self.cpu_dir, "memory.current"))
                mx = _read_int(os.path.join(self.cpu_dir, "memory.peak"))
            if cpu_s is None and not self.exists():
                return None
            return CgroupUsage(cpu_s, mem, mx, _pids_under(self.cpu_dir) if pids else [])
        except OSError:
            return None


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_kv(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1].isdigit():
                    out[parts[0]] = int(parts[1])
    except OSError:
        pass
    return out


def _pids_under(d: str) -> list[int]:
    pids: set[int] = set()
    for dirpath, _dirs, files in os.walk(d):
        if "cgroup.procs" in files:
            try:
                with open(os.path.join(dirpath, "cgroup.procs")) as f:
                    pids.update(int(x) for x in f.read().split() if x.isdigit())
            except OSError:
                continue
    return sorted(pids)


def find_job_cgroup(job_id: str, uid: int, node: str = "", root: str = DEFAULT_ROOT,
                    sluid: str = "") -> Optional[JobCgroup]:
    """Locate job ``job_id``'s cgroup under ``root`` (v1 first, then v2).

    Args:
        job_id: raw Slurm job id.
        uid: the job's uid (v1 paths contain ``uid_<uid>``).
        node: SLURMD_NODENAME, preferred in ``slurm_<node>`` (several slurmd on one host).
        root: cgroup mount point (tests pass a fake tree).
        sluid: SLURM_JOB_SLUID where Slurm gives one (>= 25.11): Slurm 26.05 names the v2 job
            directory by it (``.../slurmstepd.scope/<SLUID>``; ``job_<id>`` with
            ``CgroupJobIdPaths=yes``), so both names are looked for, the SLUID first.
    Returns:
        JobCgroup, or None if the job's cgroup does not exist (yet, or any more).
    """
    v1_cpu = os.path.join(root, "cpuacct")
    if not os.path.isdir(v1_cpu) and os.path.isdir(os.path.join(root, "cpu,cpuacct")):
        v1_cpu = os.path.join(root, "cpu,cpuacct")
    if os.path.isdir(v1_cpu):
        tail = os.path.join(f"uid_{uid}", f"job_{job_id}")
        for top in ([f"slurm_{node}"] if node else []) + ["slurm"]:
            cpu_dir = os.path.join(v1_cpu, top, tail)
            if os.path.isdir(cpu_dir):
                mem_dir = os.path.join(root, "memory", top, tail)
                return JobCgroup(1, cpu_dir, mem_dir if os.path.isdir(mem_dir) else None)
        return None
    if os.path.isfile(os.path.join(root, "cgroup.controllers")):  # unified (v2) hierarchy
        names = ([glob.escape(sluid)] if sluid else []) + [f"job_{job_id}"]
        patterns = [p.format(n) for n in names for p in (
            "system.slice/slurmstepd.scope/{}",
            "system.slice/*slurmstepd*.scope/{}",
            "*/slurmstepd.scope/{}",
            "*/*/slurmstepd.scope/{}",
            "*/*/*/{}",  # bounded depth: this runs every poll until the cgroup appears
        )]
        for pat in patterns:
            hits = sorted(glob.glob(os.path.join(root, pat)))
            hits = [h for h in hits if os.path.isfile(os.path.join(h, "cpu.stat"))]
            if node and len(hits) > 1:
                hits = [h for h in hits if node in h] or hits
            if hits:
                return JobCgroup(2, hits[0], None)
    return None

"""Find and read a Slurm job's cgroup (v1 and v2): the job's CPU time, memory and PIDs.

Layouts (Slurm 22.05, see ../shared/notes/slurm-on-debian12.md):

* cgroup v1: ``<root>/<controller>/slurm[_<node>]/uid_<uid>/job_<id>/step_*/``; ``cpuacct.usage`` is
  the job's CPU time in ns (user + system, all steps), ``memory.usage_in_bytes`` /
  ``memory.max_usage_in_bytes`` its memory. ``slurm_<node>`` is used by builds with several slurmd
  per host (``--enable-multiple-slurmd``, as Debian's); stock builds use ``slurm``.
* cgroup v2: a unified tree. Where Slurm puts it is fixed by its cgroup/v2 plugin
  (SchedMD/slurm src/plugins/cgroup/v2/cgroup_v2.c, ``_set_int_cg_ns`` and ``_get_init_cg_path``):
  ``<mount>/<PID 1's cgroup minus init.scope>/system.slice/<NodeName>_slurmstepd.scope`` on builds
  with several slurmd per host (``--enable-multiple-slurmd``, as Debian's), else
  ``.../system.slice/slurmstepd.scope``; in it ``system`` (the stepds) and one directory per job:
  ``job_<id>``, or from Slurm 26.05 the run's SLUID (``s1XHM8XWWDZC00``) unless
  ``CgroupJobIdPaths=yes``; below it ``step_extern``, ``step_batch``, ``step_<n>``, each with
  ``slurm`` (slurmstepd) and ``user`` (the tasks). The job directory has ``cpu.stat``
  (``usage_usec``, us) and ``memory.current`` / ``memory.peak`` (bytes). Seen on Slurm 26.05 under
  systemd in the project's VM (scripts/vmcluster.sh; listing in tests/slurm/data/cgroup-v2-vm.txt).

The job cgroup does not exist while the Prolog runs (it appears ~20 ms after) and is removed before
the Epilog runs, so the sampler looks for it repeatedly and keeps its last reading.

Reads go through descriptors kept open (one ``pread`` per file, no open/close per poll). The kernel
does not answer through them once the directory is removed: ``pread`` fails with ENODEV on v1
(``cpuacct.usage``) and v2 (``cpu.stat``), checked on this project's test machine (Linux 6.18,
both hierarchies mounted), so the last reading must be taken before removal. On v2,
``cgroup.events`` (``populated 0`` once the job's last process has exited, before slurmstepd
removes the directory) wakes a ``poll()`` waiting for POLLPRI: :meth:`JobCgroup.events_fd`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from slurm_energy.core import JobUsage
from slurm_energy.sampling.files import KeptFiles

DEFAULT_ROOT = "/sys/fs/cgroup"


@dataclass
class JobCgroup:
    """Where a job's cgroup lives. ``version`` is 1 or 2.

    Files are read through descriptors opened on first use and kept (:meth:`close` releases them;
    a plain file, in a fake tree, is watched for its removal, which only ``st_nlink`` shows;
    cgroupfs files answer ENODEV once removed)."""

    version: int
    cpu_dir: str  # v1: cpuacct job dir; v2: the job dir
    mem_dir: str | None  # v1: memory job dir (None if the memory controller is not used)
    _files: KeptFiles = field(default_factory=lambda: KeptFiles(watch_unlinked=True), repr=False, compare=False)
    _procs_files: list[str] = field(default_factory=list, repr=False, compare=False)
    _walked_at: float | None = field(default=None, repr=False, compare=False)
    _paths: dict[str, str | None] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        d, m = self.cpu_dir, self.mem_dir
        if self.version == 1:
            self._paths = {"cpu": os.path.join(d, "cpuacct.usage"),
                           "mem": os.path.join(m, "memory.usage_in_bytes") if m else None,
                           "max": os.path.join(m, "memory.max_usage_in_bytes") if m else None}
        else:
            self._paths = {"cpu": os.path.join(d, "cpu.stat"), "mem": os.path.join(d, "memory.current"),
                           "max": os.path.join(d, "memory.peak"), "events": os.path.join(d, "cgroup.events")}

    @property
    def source(self) -> str:
        return f"cgroup-v{self.version}"

    def exists(self) -> bool:
        """True while the job's cgroup directory exists."""
        return os.path.isdir(self.cpu_dir)

    def _pread(self, path: str | None) -> bytes | None:
        """The file's content through a kept descriptor; None if it cannot be opened or read (a
        removed cgroup answers ENODEV: the descriptor is then dropped)."""
        if path is None:
            return None
        try:
            return self._files.read(path, 4096)
        except OSError:
            return None

    def close(self) -> None:
        """Close the kept descriptors (the reader reopens them if used again)."""
        self._files.close()

    def cpu_time_s(self) -> float | None:
        """The job's CPU time (user + system, all steps), s; None if unreadable (e.g. removed)."""
        if self.version == 1:
            ns = _first_int(self._pread(self._paths["cpu"]))
            return ns / 1e9 if ns is not None else None  # ns -> s
        usec = _kv(self._pread(self._paths["cpu"])).get("usage_usec")
        return usec / 1e6 if usec is not None else None  # us -> s

    def events_fd(self) -> int | None:
        """v2 only: a descriptor on ``cgroup.events`` to ``poll()`` for POLLPRI (it fires when
        ``populated`` changes; reading the file, :meth:`populated`, re-arms it); None on v1 or when
        the file cannot be opened."""
        if self.version != 2:
            return None
        path = self._paths["events"]
        try:
            return self._files.fd(path) if path is not None else None
        except OSError:
            return None

    def populated(self) -> bool | None:
        """v2: whether any process is in the job's cgroup (``cgroup.events``); None on v1 or when
        unreadable."""
        if self.version != 2:
            return None
        v = _kv(self._pread(self._paths["events"])).get("populated")
        return None if v is None else v != 0

    def read(self, pids: bool = True, mem: bool = True, into: JobUsage | None = None) -> JobUsage | None:
        """The job's usage now, in ``into`` (updated in place; default a new one): CPU time, memory
        and peak (if ``mem``), the PID list (if ``pids`` and one could be read), ``source``; None
        (``into`` unchanged) once the cgroup is gone.

        Listing PIDs walks every step's cgroup.procs: the sampler does it once per sample, not at
        its in-between CPU-time polls (which pass ``pids=False, mem=False``: one ``pread``)."""
        cpu_s = self.cpu_time_s()
        if cpu_s is None and not self.exists():
            self.close()
            return None
        u = JobUsage() if into is None else into
        u.cpu_time_s, u.source = cpu_s, self.source
        if mem:  # v1 without the memory controller: unknown, not 0
            u.mem_bytes = _first_int(self._pread(self._paths["mem"]))
            u.max_mem_bytes = _first_int(self._pread(self._paths["max"]))
        if pids:
            try:
                u.pids = self._pids() or u.pids
            except OSError:
                pass
        return u

    #: s between walks of the job's directory tree for step cgroups (new steps appear with srun);
    #: in between the known ``cgroup.procs`` files are read through their kept descriptors
    REWALK_S = 10.0

    def _pids(self) -> list[int]:
        now = time.monotonic()
        if self._walked_at is None or now - self._walked_at >= self.REWALK_S:
            self._procs_files = _procs_files(self.cpu_dir)
            self._walked_at = now
        out: set[int] = set()
        for path in self._procs_files:
            data = self._pread(path)
            if data:
                out.update(int(x) for x in data.split() if x.isdigit())
        return sorted(out)


def _first_int(data: bytes | None) -> int | None:
    try:
        return int(data.split()[0]) if data is not None else None
    except (ValueError, IndexError):
        return None


def _kv(data: bytes | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (data or b"").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0].decode()] = int(parts[1])
    return out


def _procs_files(d: str) -> list[str]:
    """Every ``cgroup.procs`` under the job's directory (the job's and each step's)."""
    return [os.path.join(dirpath, "cgroup.procs") for dirpath, _dirs, files in os.walk(d) if "cgroup.procs" in files]


def find_job_cgroup(job_id: str, uid: int, node: str = "", root: str = DEFAULT_ROOT,
                    sluid: str = "", init_cgroup: str | None = None) -> JobCgroup | None:
    """Locate job ``job_id``'s cgroup under ``root`` (v1 first, then v2).

    Args:
        job_id: raw Slurm job id.
        uid: the job's uid (v1 paths contain ``uid_<uid>``).
        node: SLURMD_NODENAME, preferred in ``slurm_<node>`` (several slurmd on one host).
        root: cgroup mount point (tests pass a fake tree).
        sluid: SLURM_JOB_SLUID where Slurm gives one (>= 25.11): Slurm 26.05 names the v2 job
            directory by it (``.../<node>_slurmstepd.scope/<SLUID>``; ``job_<id>`` with
            ``CgroupJobIdPaths=yes``), so both names are looked for, the SLUID first.
        init_cgroup: v2 only, the directory (relative to ``root``) that holds ``system.slice``;
            default :func:`init_cgroup_dir` (PID 1's cgroup, as Slurm computes it).
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
        slice_dir = os.path.join(root, init_cgroup_dir() if init_cgroup is None else init_cgroup, "system.slice")
        scopes = ([f"{node}_slurmstepd.scope"] if node and "/" not in node else []) + ["slurmstepd.scope"]
        names = ([sluid] if sluid and "/" not in sluid and sluid not in (".", "..") else []) + [f"job_{job_id}"]
        for name in names:  # this run's SLUID first: a reused job id's older job_<id> is not this run
            for scope in scopes:  # the node's own scope first (several slurmd on one host)
                d = os.path.join(slice_dir, scope, name)
                if os.path.isfile(os.path.join(d, "cpu.stat")):
                    return JobCgroup(2, d, None)
    return None


def init_cgroup_dir(proc1_cgroup: str = "/proc/1/cgroup") -> str:
    """The cgroup v2 directory Slurm's stepd scope lives under, relative to the mount: PID 1's
    cgroup without its last part, as Slurm's ``_get_init_cg_path`` computes it (``0::/init.scope``
    -> ``""``; in a container ``0::/docker.slice/docker-X.scope/init.scope`` ->
    ``docker.slice/docker-X.scope``). ``""`` when the file cannot be read or is not a pure v2
    one-liner (hybrid or v1 hosts, where Slurm's cgroup/v2 refuses to run)."""
    try:
        with open(proc1_cgroup, encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    if len(lines) != 1 or not lines[0].startswith("0::/"):
        return ""
    return os.path.dirname(lines[0][3:].strip()).strip("/")

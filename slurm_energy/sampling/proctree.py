"""A process tree's PIDs, CPU time and memory from /proc, at a cost that grows with the tree only.

``psutil.Process.children(recursive=True)`` reads the parent of every process on the machine at
each call (measured: 740 ms per sample with 1,073 processes). Here:

* where the kernel has ``/proc/PID/task/TID/children`` (CONFIG_PROC_CHILDREN, as Debian's and
  RHEL's kernels), the tree is followed from its root through those files: nothing outside the
  tree is read;
* elsewhere (e.g. this project's test VM), each PID's parent is read once, when the PID first
  appears in a listing of /proc, and kept: a poll costs one ``listdir('/proc')`` and a set
  difference, plus one read per new process. (A PID reused between two listings keeps its old
  parent: that process is missed or wrongly counted until the next listing without it.)

CPU time and memory come from ``/proc/PID/stat`` (one read per tree process): utime + stime +
cutime + cstime, clock ticks -> s (``SC_CLK_TCK``, 100 on Linux), and rss, pages -> bytes.
"""

from __future__ import annotations

import os

from slurm_energy.sampling.files import KeptFiles

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def read_stat(pid: int, proc: str = "/proc", files: KeptFiles | None = None) -> tuple[str, int, float, int] | None:
    """(state, ppid, CPU time s incl. reaped children, rss bytes) of ``pid``; None if it is gone.
    ``files``: kept descriptors to read through (a descriptor names the process, not its number:
    once the process is reaped it answers ESRCH, and is dropped, so a reused PID is never read as
    the old process).

    A zombie (state ``Z``: exited, not yet reaped) still answers, with its final CPU time."""
    try:
        data = (files or _ONCE).read(f"{proc}/{pid}/stat", 4096)
    except OSError:
        return None
    return _parse_stat(data) if data else None


_ONCE = KeptFiles(limit=0)  # no descriptor kept: open, read, close (os-level: no fstat, ioctl, lseek)


def stat_paths(pids: list[int], proc: str = "/proc") -> list[str]:
    """The ``/proc/PID/stat`` paths of ``pids`` (what :meth:`KeptFiles.retain` keeps)."""
    return [f"{proc}/{p}/stat" for p in pids]


def _parse_stat(data: bytes) -> tuple[str, int, float, int] | None:
    f = data[data.rfind(b")") + 2:].split()  # after "pid (comm) "; comm may hold spaces and ")"
    try:
        ticks = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
        return f[0].decode(), int(f[1]), ticks / CLK_TCK, int(f[21]) * PAGE
    except (IndexError, ValueError):
        return None


class ProcTree:
    """The descendants of one root PID (the root included), found without a walk of all /proc
    where the kernel allows (see the module docstring)."""

    def __init__(self, root: int, proc: str = "/proc"):
        self.root = root
        self.proc = proc
        self.has_children_files = os.path.exists(f"{proc}/{root}/task/{root}/children")
        self._ppid: dict[int, int] = {}  # pid -> parent, for the /proc-listing fallback
        self._kids: dict[int, set[int]] = {}

    def pids(self) -> list[int]:
        """The root and its live descendants (root first); [] once the root is gone."""
        if self.has_children_files:
            return self._by_children_files()
        return self._by_listing()

    def _by_children_files(self) -> list[int]:
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            try:
                tids = os.listdir(f"{self.proc}/{pid}/task")
            except OSError:
                if pid == self.root:
                    return []
                continue
            out.append(pid)
            for tid in tids:
                try:
                    with open(f"{self.proc}/{pid}/task/{tid}/children", "rb") as f:
                        todo.extend(int(x) for x in f.read().split())
                except (OSError, ValueError):
                    continue
        return out

    def _by_listing(self) -> list[int]:
        try:
            now = {int(n) for n in os.listdir(self.proc) if n.isdigit()}
        except OSError:
            return []
        if self.root not in now:
            return []
        for pid in self._ppid.keys() - now:  # gone: forget it (its children were reparented)
            self._kids.get(self._ppid.pop(pid), set()).discard(pid)
            self._kids.pop(pid, None)
        for pid in now - self._ppid.keys():
            st = read_stat(pid, self.proc)
            if st is not None:
                self._ppid[pid] = st[1]
                self._kids.setdefault(st[1], set()).add(pid)
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(self._kids.get(pid, ()))
        return out


class EnvScanner:
    """PIDs whose environment holds ``SLURM_JOB_ID=<job_id>`` (root reads /proc/PID/environ): the
    job's processes where proctrack/linuxproc leaves no job cgroup.

    Each :meth:`pids` lists /proc once and reads the environment only of PIDs not seen at an
    earlier call (a process's environment at exec does not change), so a scan costs one listdir
    plus one read per new process, not one per process on the machine.

    ``uid``: only processes of that user count (``SLURM_JOB_ID`` is anyone's to export: another
    user's process claiming the job's id must not be charged to it, nor tell its facts); None: any."""

    def __init__(self, job_id: str, proc: str = "/proc", uid: int | None = None):
        self.uid = uid
        self.needle = f"SLURM_JOB_ID={job_id}".encode()
        self._inner = b"\0" + self.needle + b"\0"  # the variable inside the block (NUL-separated)
        self.proc = proc
        self._is_job: dict[str, bool] = {}  # /proc's entry name -> a process of the job

    def _check(self, pid: str) -> bool:
        """Whether ``pid``'s environment holds the job's variable: one open and one or two reads
        (os-level: Python's open() adds fstat, ioctl and lseek calls; a busy machine starts
        hundreds of processes between two scans), the block searched as bytes, not split."""
        try:
            fd = os.open(f"{self.proc}/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if self.uid is not None and os.fstat(fd).st_uid != self.uid:  # /proc/PID's files: the process's euid
                return False
            env = os.read(fd, 1 << 16)
            while len(env) % (1 << 16) == 0 and env:  # a block over 64 KiB: read the rest
                more = os.read(fd, 1 << 16)
                if not more:
                    break
                env += more
        except OSError:
            return False
        finally:
            os.close(fd)
        return self._inner in b"\0" + env + b"\0"  # whole entries only (SLURM_JOB_ID=47110 is not 4711)

    def pids(self) -> list[int]:
        """The job's live PIDs, sorted; [] if /proc cannot be listed."""
        try:  # the names as they are (no int() of every entry: ~0.4 ms a scan on a busy node, cold)
            now = set(os.listdir(self.proc))
        except OSError:
            return []
        is_job = self._is_job
        for name in is_job.keys() - now:
            del is_job[name]
        for name in now - is_job.keys():
            is_job[name] = name.isdigit() and self._check(name)
        return sorted(int(n) for n, j in is_job.items() if j)


def pids_usage(pids: list[int], proc: str = "/proc", files: KeptFiles | None = None,
               zombies: bool = False) -> tuple[float | None, int | None]:
    """Sum of CPU time (user + system + reaped children, s) and RSS (bytes) of ``pids`` now, from
    /proc/PID/stat (through ``files``' kept descriptors when given); a zombie counts only with
    ``zombies`` (a process tree's root, read for its final CPU time). Returns (None, None) if none
    of them exists. CPU time of processes that exited and were not reaped by one of ``pids`` is
    lost: that is why cgroups are preferred."""
    cpu, rss, seen = 0.0, 0, False
    for pid in pids:
        st = read_stat(pid, proc, files)
        if st is not None and (zombies or st[0] != "Z"):
            cpu, rss, seen = cpu + st[2], rss + st[3], True
    return (cpu, rss) if seen else (None, None)

"""The /proc view: who is at work on a job attempt, and stopping its sampler (checked).

A detached process of ours (:data:`~slurm_energy.slurm.detach.DETACHED_MODULE`: the sampler the Prolog starts, the finalizers
the Epilog starts) is told by its argv in /proc, run by our uid (root) and leading its own process
group: a user's process copying that argv is not root's, and is never signalled. A stopped process
may linger as a zombie (PID 1 here reaps slowly): a zombie counts as stopped. The node finalizers'
runner locks (:func:`lock_taken`) are flocks, freed by the kernel when their holder dies.

Stdlib modules that are light to import only (os, time; select and fcntl where used): the Epilog imports this module.
"""

from __future__ import annotations

import os
import time

from slurm_energy.slurm.attempt import SamplerEnd
from slurm_energy.slurm.detach import DETACHED_MODULE, JOBEND_MODULE

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the Epilog imports this module)
if TYPE_CHECKING:
    from slurm_energy.slurm.attempt import Attempt

__all__ = ["DETACHED_MODULES", "SamplerStop", "busy", "catches", "cmdline", "find_sampler", "is_our_sampler",
           "is_running", "lock_taken", "proc_state", "status_field", "stop_process", "stop_sampler"]

#: Every name a detached process of ours may run under: :data:`~slurm_energy.slurm.detach.DETACHED_MODULE`, and the name it had
#: before (a sampler or finalizer started before an upgrade is still ours to find and stop).
DETACHED_MODULES = (DETACHED_MODULE, JOBEND_MODULE, "slurm_energy.slurm.detached", "slurm_energy.slurm.hooks")
#: Linux's signal numbers (include/uapi/asm-generic/signal.h, the same on x86 and arm64); the
#: ``signal`` module is not imported for two constants on the Epilog's path.
SIGKILL, SIGTERM = 9, 15


def _detached_args(argv: list[str]) -> list[str] | None:
    """The arguments after the module name of a detached process's argv, None if it is not one."""
    for m in DETACHED_MODULES:
        if m in argv:
            return argv[argv.index(m) + 1:]
    return None


def lock_taken(path: str) -> bool | None:
    """True while a process holds the flock on ``path`` (made if missing, mode 0600), False when
    none does (taken and released at once), None when the lock file cannot be opened (a full or
    read-only directory). A holder's death, even by SIGKILL, frees it: the kernel drops the lock."""
    import fcntl  # a small C module: this runs in the Epilog

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)



def status_field(pid: int, key: bytes) -> bytes | None:
    """The value of ``key`` (``b"SigCgt"``, ``b"Umask"``...) in /proc/PID/status
    (Documentation/filesystems/proc.rst), None when the process or the field is not there."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                name, _, value = line.partition(b":")
                if name == key:
                    return value.strip()
    except OSError:
        pass
    return None


def catches(pid: int, sig: int) -> bool:
    """True if ``pid`` has a handler installed for ``sig`` (SigCgt in /proc/PID/status)."""
    try:
        return bool(int(status_field(pid, b"SigCgt") or b"0", 16) >> (sig - 1) & 1)
    except ValueError:
        return False


def proc_state(pid: int) -> str | None:
    """The process state letter from /proc/PID/stat ('R', 'S', 'Z', ...), None if no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
        return data[data.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def is_running(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie or dead."""
    return proc_state(pid) not in (None, "Z", "X", "x")


def cmdline(pid: int) -> list[str]:
    """argv of ``pid`` ([] if unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def is_our_sampler(pid: int, uid: int = 0) -> bool:
    """True if ``pid`` can be a sampler the Prolog started: its real, effective, saved and
    filesystem uids all ``uid`` (``Uid:`` in /proc/PID/status; root's) and leading its own process
    group (``spawn_detached``). A user's process whose argv copies a sampler's fails the first test
    even when /proc/PID is root's -- a setuid-root program it runs (effective uid 0, real uid the
    user's) or a process that made itself non-dumpable: never signalled, never taken for the job's
    sampler."""
    ids = (status_field(pid, b"Uid") or b"").split()
    try:
        return len(ids) == 4 and all(int(x) == uid for x in ids) and os.getpgid(pid) == pid
    except (OSError, ValueError):
        return False


def find_sampler(job_dir_suffix: str, node: str) -> int | None:
    """PID of a detached sampler (``... slurm_energy.slurm.sampler sampler DIR NODE``) whose DIR ends
    with ``job_dir_suffix`` (e.g. ``/jobs/42-r0``, also matching a reused id's ``/jobs/42-r0-<tag>``)
    on ``node``, found by argv in /proc, run by our uid (root) and leading its own process group
    (:func:`is_our_sampler`); or None."""
    me = os.geteuid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        if not is_our_sampler(int(name), me):
            continue
        argv = cmdline(int(name))
        d = argv[-2].rstrip("/") if len(argv) >= 4 else ""
        if (argv[-3:-2] == ["sampler"] and argv[-1] == node and _detached_args(argv) is not None
                and (d.endswith(job_dir_suffix) or d[:d.rfind("-")].endswith(job_dir_suffix))):
            return int(name)
    return None


def _wait_stopped(pid: int, seconds: float) -> bool:
    """True once ``pid`` has exited (a zombie counts), waiting at most ``seconds``. A pidfd
    (Linux >= 5.3) wakes at the exit itself; else /proc is polled every 20 ms."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):  # no pidfd_open (old kernel or Python): poll /proc
        return _poll_stopped(pid, seconds)
    import select  # here: an Epilog that stops no process (its job's node sampler's) never loads it

    try:
        p = select.poll()
        p.register(fd, select.POLLIN)
        p.poll(max(0.0, seconds) * 1000.0)  # readable once the process has exited (zombie or reaped)
    finally:
        os.close(fd)
    return not is_running(pid)


def _poll_stopped(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not is_running(pid):
            return True
        time.sleep(0.02)
    return not is_running(pid)


def stop_process(pid: int, term_wait_s: float = 1.0, kill_wait_s: float = 0.3,
                 handler_wait: bool = False) -> SamplerEnd:
    """TERM, bounded wait, then KILL. Returns what happened (a :class:`~slurm_energy.slurm.attempt.SamplerEnd`):
    NOT_RUNNING, TERMINATED, KILLED or UNKILLABLE (still running after KILL, e.g. stuck in D state).

    ``handler_wait``: for a process that acts on TERM (a last sample) but may still be starting up:
    TERM is sent once it has installed its handler (else TERM's default action would end it on
    the spot, nothing written), within the same ``term_wait_s``."""
    if not is_running(pid):
        return SamplerEnd.NOT_RUNNING
    deadline = time.monotonic() + term_wait_s
    if handler_wait:
        while not catches(pid, SIGTERM) and is_running(pid) and time.monotonic() < deadline:
            time.sleep(0.005)
    for sig, wait_s, outcome in ((SIGTERM, None, SamplerEnd.TERMINATED), (SIGKILL, kill_wait_s, SamplerEnd.KILLED)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return SamplerEnd.NOT_RUNNING if sig == SIGTERM else SamplerEnd.TERMINATED
        if _wait_stopped(pid, max(0.0, deadline - time.monotonic()) if wait_s is None else wait_s):
            return outcome
    return SamplerEnd.UNKILLABLE


def busy(spools: list[str]) -> tuple[set[str], set[str]]:
    """What is at work on this machine or waits for it: (spool job directories a sampler or a
    single-job finalizer runs for, or that wait in a node finalizer's queue in ``spools``;
    ``"<job id>@<node>"`` of each job a spool-less finalizer, ``finalize-env``, runs for). Processes are found by argv in /proc
    (``python -I -m slurm_energy.slurm.sampler sampler ...``, ``python -I -m slurm_energy.slurm.jobend
    {finalize|finalize-env} ...``, or the name both had before, run by root:
    a user's process copying that argv is not root's). The node finalizer's sweep
    (:func:`slurm_energy.slurm.jobend.recover.sweep_node`) leaves these alone."""
    import json

    from slurm_energy.slurm.attempt import FINALIZE_QUEUE, entries

    dirs: set[str] = set()
    job_ids: set[str] = set()  # "<job id>@<node>"
    me = os.geteuid()
    for name in os.listdir("/proc"):
        try:
            if not name.isdigit() or int(name) == os.getpid() or os.stat(f"/proc/{name}").st_uid != me:
                continue
        except OSError:
            continue
        rest = _detached_args(cmdline(int(name)))
        if rest is None:
            continue
        if len(rest) >= 2 and rest[0] in ("sampler", "finalize"):
            dirs.add(rest[1].rstrip("/"))
        elif len(rest) >= 2 and rest[0] == "finalize-env" and "@" in rest[1] and not rest[1].startswith("{"):
            job_ids.add(rest[1])  # JOB@NODE (its context is in its environment, not in argv)
        elif len(rest) >= 2 and rest[0] == "finalize-env":
            try:
                ctx = json.loads(rest[1])
                job_ids.add(f"{ctx['job_id']}@{ctx.get('node', '')}")
            except (ValueError, KeyError, TypeError):
                pass
    for sd in spools:
        root = os.path.join(sd, FINALIZE_QUEUE)
        try:
            qdirs = [os.path.join(root, n) for n in os.listdir(root)]
        except OSError:
            continue
        for path in (p for q in qdirs for p in entries(q)):
            try:
                with open(path, encoding="utf-8") as f:
                    dirs.add(str(json.load(f)["dir"]).rstrip("/"))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return dirs, job_ids


class SamplerStop:
    """What :func:`stop_sampler` did: ``outcome`` is :func:`stop_process`'s (``terminated``,
    ``killed``, ``unkillable``, ``not_running``) or ``no_pidfile`` (no sampler found); for a job of
    the node sampler, :func:`slurm_energy.slurm.sampler_join.leave`'s (``terminated``,
    ``not_running``, ``timed_out``)."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: SamplerEnd) -> None:
        self.outcome = outcome

    @property
    def stopped(self) -> bool:
        """True when no sampler of the attempt runs any more (False: one survived KILL)."""
        return self.outcome != SamplerEnd.UNKILLABLE

    @property
    def was_running(self) -> bool:
        """True when a sampler of the attempt was found running and signalled."""
        return self.outcome in (SamplerEnd.TERMINATED, SamplerEnd.KILLED, SamplerEnd.UNKILLABLE)

    def __repr__(self) -> str:
        return f"SamplerStop({self.outcome!r})"


def _pidfile_pid(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def stop_sampler(run: Attempt | str, node: str = "", term_wait_s: float = 1.0,
                 kill_wait_s: float = 0.2) -> SamplerStop:
    """Stop the sampler of one job attempt on this node: ``run`` is its spool (the PID in its
    pidfile, if that is our sampler of this spool; else found in /proc), or, for an attempt without
    a spool, its run directory's name (``<job id>-r<restart count>``, found in /proc on ``node``).
    TERM once it handles TERM, ``term_wait_s``, KILL, ``kill_wait_s``
    (:func:`stop_process`). The Epilog's waits by default; ``collect`` passes longer ones for a
    sampler that outlived its job."""
    from slurm_energy.slurm.detach import unnice

    spool = None if isinstance(run, str) else run
    if spool is not None and os.path.exists(spool.path("nodesampler", "join")):  # the node sampler's job
        from slurm_energy.slurm import sampler_join

        return SamplerStop(SamplerEnd(sampler_join.leave(spool.dir, spool.spool_dir, spool.node, time.time(), term_wait_s)))
    pid = None if spool is None else _pidfile_pid(spool.pidfile)
    if pid is None:  # pidfile gone or unreadable (a spool full or remounted): look in /proc
        suffix = "/jobs/" + (os.path.basename(spool.dir) if spool is not None else str(run))
        pid = find_sampler(suffix, spool.node if spool is not None else node)
        if pid is None:
            return SamplerStop(SamplerEnd.NO_PIDFILE)
    else:
        argv = cmdline(pid)
        if argv and (spool is None or spool.dir not in argv or "sampler" not in argv
                     or not is_our_sampler(pid, os.geteuid())):
            return SamplerStop(SamplerEnd.NOT_RUNNING)  # the PID was reused by another process (a user's): never signal it
    # worst case (a sampler ignoring TERM): ~0.4 s start-up + 1.0 + 0.2 s, inside the 1.9 s guard;
    # a sampler still starting (a short job) gets TERM once it handles it, at the Epilog's priority
    unnice(pid)
    return SamplerStop(stop_process(pid, term_wait_s=term_wait_s, kill_wait_s=kill_wait_s, handler_wait=True))

"""Start a process detached from the hook, and stop it again: the two things slurmd punishes.

* slurmd kills the Prolog's whole process group when the Prolog exits (TERM, then KILL ~2 ms
  later), so the child must lead a process group of its own *before* the Prolog exits:
  ``posix_spawn(setpgroup=0)`` makes it ``setpgid`` in the child before its exec, and we check
  ``getpgid(pid) == pid`` when it returns.
* It stays in slurmd's session: with CONFIG_SCHED_AUTOGROUP (Debian's and Ubuntu's default) each
  session is one scheduling group, and a child with a session of its own would compete with
  slurmd's whole session -- every Prolog and Epilog -- as an equal whatever its nice value. In
  slurmd's session the samplers and finalizers, niced, yield to the hooks, and together take no
  more than slurmd's one share from the jobs.
* slurmd reads the Prolog's stdout/stderr to EOF, so the child must not inherit them: stdin is
  /dev/null, stdout and stderr go to a log file, every other fd is closed.
* A stopped process may linger as a zombie (PID 1 here reaps slowly): a zombie counts as stopped.

Stdlib modules that are light to import only (the Epilog imports this module): ``os.posix_spawn``
(glibc's vfork + exec, no Python code in the child) rather than ``subprocess``, whose import alone
was ~5 % of a hook's CPU.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the Epilog imports this module)
if TYPE_CHECKING:
    from collections.abc import Iterator


def _inheritable_fds() -> list[int]:
    """Our open descriptors above 2 that an exec would keep (inherited without close-on-exec,
    e.g. from slurmd): the child must not hold them."""
    out: list[int] = []
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for n in names:
        fd = int(n)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    out.append(fd)
            except OSError:  # listdir's own descriptor, closed by now
                continue
    return out


def spawn_detached(argv: list[str], log_path: str, wait_s: float = 1.0, env: dict | None = None,
                   nice: int = 0) -> int:
    """Start ``argv`` (``argv[0]`` an absolute path: no PATH search) in a process group of its own
    with stdio detached; return its PID.

    Returns once the child leads its process group (or raises after ``wait_s``). ``nice`` > 0: the
    child's niceness is raised by that much as soon as it runs (:func:`_renice`). The child's working
    directory is the caller's (the hooks run in ``/``; the children are started with ``python -I``).
    Raises:
        OSError: the program cannot be started, or the log cannot be opened.
        TimeoutError: the child did not lead its own process group within ``wait_s`` seconds.
    """
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        actions: list = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
        actions += [(os.POSIX_SPAWN_DUP2, fd, 1), (os.POSIX_SPAWN_DUP2, fd, 2)] if fd > 2 else [
            (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW, 0),
            (os.POSIX_SPAWN_DUP2, 1, 2)]  # our stdio was closed, so the log got fd 0-2: reopen it
        actions += [(os.POSIX_SPAWN_CLOSE, i) for i in _inheritable_fds() if i != fd]
        pid = os.posix_spawn(argv[0], argv, env if env is not None else {"LANG": "C.UTF-8"},
                             file_actions=actions, setpgroup=0)
    finally:
        os.close(fd)
    if nice > 0:
        _renice(pid, nice)
    # posix_spawn returns after the exec, and setpgid() ran before it: this loop normally ends at once.
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if os.getpgid(pid) == pid:
                return pid
        except ProcessLookupError:
            raise OSError(f"{argv[0]} exited at once; see {log_path}") from None
        if time.monotonic() > deadline:
            raise TimeoutError(f"child {pid} did not lead its own process group within {wait_s} s")
        time.sleep(0.005)


def _renice(pid: int, nice: int) -> None:
    """Raise ``pid``'s niceness by ``nice`` (errors ignored). Its autogroup is slurmd's session's,
    shared with the hooks: never changed."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice))
    except OSError:
        pass


@contextlib.contextmanager
def slot(lock_dir: str, name: str, n: int, poll_s: float = 0.2) -> Iterator[int | None]:
    """Hold one of ``n`` slots (``lock_dir/.<name>-slot-<i>``, flock'ed) for the ``with`` body: a
    free one at once, else the first to be freed (looked for every ``poll_s``: a few syscalls, no
    measurable CPU while waiting). Yields the slot number, or None
    when no lock file can be made there (a read-only or missing dir): the body then runs unlimited
    rather than never. A holder's death (even SIGKILL) frees its slot: the kernel drops the lock."""
    import fcntl

    fds: list[int] = []
    try:
        for i in range(n):
            try:
                fds.append(os.open(os.path.join(lock_dir, f".{name}-slot-{i}"),
                                   os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            except OSError:
                break
        if not fds:
            yield None
            return
        while True:
            for i, fd in enumerate(fds):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield i
                return
            time.sleep(poll_s)  # all taken: look again (flock cannot wait for any one of several)
    finally:
        for fd in fds:
            os.close(fd)  # releases the lock


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


def unnice(pid: int) -> None:
    """Lower ``pid``'s niceness to the caller's where it is higher (undoes :func:`spawn_detached`'s
    ``nice``; lowering needs root: CAP_SYS_NICE). Errors ignored."""
    try:
        own = os.getpriority(os.PRIO_PROCESS, 0)
        if os.getpriority(os.PRIO_PROCESS, pid) > own:
            os.setpriority(os.PRIO_PROCESS, pid, own)
    except OSError:
        pass


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
    """PID of a detached sampler (``... slurm_energy.slurm.hooks sampler DIR NODE``) whose DIR ends
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
        if (argv[-3:-2] == ["sampler"] and argv[-1] == node and "slurm_energy.slurm.hooks" in argv
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


def stop_process(pid: int, term_wait_s: float = 1.0, kill_wait_s: float = 0.3, handler_wait: bool = False) -> str:
    """TERM, bounded wait, then KILL. Returns what happened: "not_running", "terminated",
    "killed" or "unkillable" (still running after KILL, e.g. stuck in D state).

    ``handler_wait``: for a process that acts on TERM (a last sample) but may still be starting up:
    TERM is sent once it has installed its handler (else TERM's default action would end it on
    the spot, nothing written), within the same ``term_wait_s``."""
    if not is_running(pid):
        return "not_running"
    deadline = time.monotonic() + term_wait_s
    if handler_wait:
        while not catches(pid, signal.SIGTERM) and is_running(pid) and time.monotonic() < deadline:
            time.sleep(0.005)
    for sig, wait_s, outcome in ((signal.SIGTERM, None, "terminated"), (signal.SIGKILL, kill_wait_s, "killed")):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return "not_running" if sig == signal.SIGTERM else "terminated"
        if _wait_stopped(pid, max(0.0, deadline - time.monotonic()) if wait_s is None else wait_s):
            return outcome
    return "unkillable"

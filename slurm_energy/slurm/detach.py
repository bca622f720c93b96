"""Start a process detached from the hook (stopping it again: :mod:`slurm_energy.slurm.processes`).

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

Stdlib modules that are light to import only (the Prolog and Epilog import this module):
``os.posix_spawn`` (glibc's vfork + exec, no Python code in the child) rather than ``subprocess``,
whose import alone was ~5 % of a hook's CPU; ``contextlib`` only where a finalizer takes a
:func:`slot`.
"""

from __future__ import annotations

import os
import sys
import time

from slurm_energy.slurm.log import FALLBACK_LOG_DIR, get

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the Epilog imports this module)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager

    from slurm_energy.slurm.attempt import Attempt, SamplerEnd


#: The module the detached sampler and finalizers run as (``python -I -m DETACHED_MODULE KIND ...``);
#: :mod:`slurm_energy.slurm.processes` finds them in /proc by it.
DETACHED_MODULE = "slurm_energy.slurm.sampler"
#: The module the job end's finalizers run as (``python -I -m JOBEND_MODULE {finalize-queue|finalize|
#: finalize-env} ...``: :mod:`slurm_energy.slurm.jobend`).
JOBEND_MODULE = "slurm_energy.slurm.jobend"

log = get(__name__)
#: Niceness of the detached finalizers: their CPU (imports, summary, store, report: a second or more
#: each) must not slow the Prolog/Epilog of the jobs starting and ending meanwhile (a burst), nor the
#: jobs themselves. 19 (CFS weight 15 against a hook's 1024): a burst's dozens of finalizers queued
#: at once still leave a hook most of the CPU it can get.
FINALIZER_NICE = 19
#: Niceness of the detached sampler: its start-up (imports, readers) and interims yield to the hooks
#: and the jobs; samples are timestamped when read, so a late wake-up costs no accuracy. The Epilog
#: lowers it again (:func:`slurm_energy.slurm.detach.unnice`) before its TERM: the last sample and
#: the exit it waits for run at the Epilog's priority.
SAMPLER_NICE = 10
#: The spool-less finalizer's arguments (the job's context as JSON, its end, exit code, sampler
#: outcome, errors) travel in this environment variable of the root process, not in its argv,
#: which ``ps`` shows every user (a job's name, work dir, user, account).
FINALIZE_ENV_VAR = "SLURM_ENERGY_FINALIZE_ENV"

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


def spawn_detached(argv: list[str], log_path: str, wait_s: float = 1.0, env: dict[str, str] | None = None,
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
        actions: list[tuple[int | str, ...]] = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
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


def slot(lock_dir: str, name: str, n: int, poll_s: float = 0.2) -> AbstractContextManager[int | None]:
    """Hold one of ``n`` slots (``lock_dir/.<name>-slot-<i>``, flock'ed) for the ``with`` body: a
    free one at once, else the first to be freed (looked for every ``poll_s``: a few syscalls, no
    measurable CPU while waiting). Yields the slot number, or None
    when no lock file can be made there (a read-only or missing dir): the body then runs unlimited
    rather than never. A holder's death (even SIGKILL) frees its slot: the kernel drops the lock."""
    import contextlib  # here: the hooks, which import this module for spawn_detached, take no slot

    return contextlib.contextmanager(_slot)(lock_dir, name, n, poll_s)


def _slot(lock_dir: str, name: str, n: int, poll_s: float) -> Iterator[int | None]:
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


def unnice(pid: int) -> None:
    """Lower ``pid``'s niceness to the caller's where it is higher (undoes :func:`spawn_detached`'s
    ``nice``; lowering needs root: CAP_SYS_NICE). Errors ignored."""
    try:
        own = os.getpriority(os.PRIO_PROCESS, 0)
        if os.getpriority(os.PRIO_PROCESS, pid) > own:
            os.setpriority(os.PRIO_PROCESS, pid, own)
    except OSError:
        pass


def _python() -> str:
    return sys.executable or "/usr/bin/python3"


def spawn(args: list[str], logf: str, log_dir: str = FALLBACK_LOG_DIR, nice: int = 0,
          private: dict[str, str] | None = None) -> int:
    """Start ``python -I args...`` detached (see :func:`spawn_detached`); isolated, so only
    the installed package is imported (never one from a working directory or PYTHONPATH). Its
    stdout/stderr go to ``logf``, else (full or read-only spool) ``log_dir``, else /dev/null.
    ``nice``: added to its niceness (0: as the hook's). ``private``: more environment variables, for
    what ``ps`` must not show other users (a root process's environment is root's to read only).
    Raises OSError/TimeoutError (not started)."""
    env = {"LANG": "C.UTF-8", **(private or {})}
    for var in ("SLURM_ENERGY_CONFIG", "SLURM_CONF", "SLURM_ENERGY_MARKS_DIR"):  # the finalizer asks scontrol for the job's state
        if os.environ.get(var):
            env[var] = os.environ[var]
    for lf in (logf, os.path.join(log_dir, os.path.basename(logf)), os.devnull):
        try:
            os.close(os.open(lf, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            break
        except OSError:
            continue
    pid = spawn_detached([_python(), "-I", *args], lf, env=env, nice=nice)
    try:  # PrologFlags=RunInJob: the hook runs in the job's extern step; the child must not
        from slurm_energy.slurm.cgroup_move import leave_job_cgroups

        moved = leave_job_cgroups(pid)
        if moved:
            log("INFO", f"moved pid {pid} out of the job's cgroups ({len(moved)} hierarchies: RunInJob)")
    except OSError as e:
        log("WARNING", f"pid {pid} stays in the job's cgroups: {e}")
    return pid


def hand_over(spool: Attempt, t_end: float, exit_code: str, outcome: SamplerEnd, log_dir: str) -> None:
    """Give the ended job attempt to its node's finalizer: queue it
    (:func:`slurm_energy.slurm.attempt.enqueue_finalize`) and start the queue's finalizer only when
    none runs or none stands by (:mod:`slurm_energy.slurm.jobend.queue`: two flock probes); when
    the entry cannot be written (a full or read-only spool), a finalizer for this job alone, as
    before. Raises OSError/TimeoutError (not started: ``collect`` finishes the job)."""
    from slurm_energy.slurm.attempt import RUNNER_LOG, enqueue_finalize, needs_runner

    try:
        qdir = enqueue_finalize(spool, t_end, exit_code, outcome)
    except OSError as e:
        log("WARNING", f"job {spool.job_id}: not queued for the node's finalizer ({e}): one started for it alone")
        spawn(["-m", JOBEND_MODULE, "finalize", spool.dir, spool.node, repr(t_end), exit_code, str(outcome)],
              os.path.join(spool.dir, f"finalize-{spool.node}.log"), log_dir, nice=FINALIZER_NICE)
        return
    if needs_runner(qdir):
        spawn(["-m", JOBEND_MODULE, "finalize-queue", qdir, spool.node], os.path.join(qdir, RUNNER_LOG),
              log_dir, nice=FINALIZER_NICE)

"""How a job joins and leaves its node's sampler (``sampling.sampler: node``): the files and signals
the Prolog, the Epilog and the node sampler (:mod:`slurm_energy.slurm.sampler.node`) share.

Stdlib only and light (the Prolog and Epilog import it: os, json, time; fcntl where the lock is
probed). In the node's spool (``spool_dir``):

* ``node-sampler-<node>.lock``: flocked by the one node sampler of that spool and node (the
  kernel drops it when the process dies, even by SIGKILL); ``node-sampler-<node>.pid`` its PID,
  written once it holds the lock; ``node-sampler-<node>.starting``: the claim (O_EXCL) of the one
  hook that starts it, so a burst of Prologs starts one process, not one each (removed by the node
  sampler once its PID is written, or by that hook when the start failed; an Epilog that finds it
  fresh waits for the sampler);
  ``node-sampler-<node>.beat``: touched at each of its ticks and removed when it leaves cleanly, so
  a sampler started after one that died knows since when nothing was sampled;
* in each job's directory: ``nodesampler-<node>.join`` (the Prolog: sample this job),
  ``nodesampler-<node>.stop`` (the Epilog: the job ended at ``t``; write its last row),
  ``nodesampler-<node>.claim`` (O_EXCL: made by whichever of the node sampler and the waiting
  Epilog is first; the node sampler writes the job's ``final`` row only when it made it, so an
  Epilog that gave up and a finalizer's own reading never race a late ``final`` row) and
  ``nodesampler-<node>.ended`` (the node sampler: the ``final`` row the Epilog asked for is written
  and synced; a sampler stopped by a signal writes none, so the Epilog finds it gone).

After writing its file the hook sends SIGUSR1 to the node sampler (its PID from the pidfile, only
while the lock is held: then the PID is the sampler's), which wakes it to look at once.
"""

from __future__ import annotations

import json
import os
import time

from slurm_energy.slurm import attempt
from slurm_energy.slurm.attempt import Journal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hook's milliseconds)
if TYPE_CHECKING:
    from collections.abc import Callable

    #: how a hook starts a detached process: (argv after the interpreter, its log file) -> PID
    Start = Callable[[list[str], str], int]

# the file names are the journal's (slurm/attempt.py), the one owner of the spool's layout
LOCK = attempt.NODE_SAMPLER_LOCK
PIDFILE = attempt.NODE_SAMPLER_PIDFILE
STARTING = attempt.NODE_SAMPLER_STARTING
BEAT = attempt.NODE_SAMPLER_BEAT
LOG = attempt.NODE_SAMPLER_LOG
JOIN = attempt.NODE_SAMPLER_JOIN
STOP = attempt.NODE_SAMPLER_STOP
CLAIM = attempt.NODE_SAMPLER_CLAIM
ENDED = attempt.NODE_SAMPLER_ENDED
#: a start claim older than this is a starter that died: the next hook starts the sampler again
STARTING_STALE_S = 30.0
#: the signal a hook wakes the node sampler with: SIGUSR1 (10 in Linux's
#: include/uapi/asm-generic/signal.h and on x86; :mod:`slurm_energy.slurm.processes` takes TERM and
#: KILL the same way), a number so that the hooks do not import ``signal`` for one constant; the
#: node sampler handles this same number
WAKE = 10
MODULE = "slurm_energy.slurm.sampler.node"


def node_path(spool_dir: str, what: str, node: str) -> str:
    return os.path.join(spool_dir, what.format(node=node))


def job_path(job_dir: str, what: str, node: str) -> str:
    return os.path.join(job_dir, what.format(node=node))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def running_pid(spool_dir: str, node: str) -> int | None:
    """The node sampler's PID while one holds the lock; None when none runs (or the lock or
    pidfile cannot be read)."""
    import fcntl

    try:
        fd = os.open(node_path(spool_dir, LOCK, node), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # free: none runs
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    try:
        with open(node_path(spool_dir, PIDFILE, node), "rb") as f:  # bytes: no codec module to load
            return int(f.read(32).strip())
    except (OSError, ValueError):
        return None  # it holds the lock but has not written its PID yet: it scans at its start


def wake(spool_dir: str, node: str) -> int | None:
    """Wake the node sampler (SIGUSR1) to look at the joins and stops now. Returns its PID, or
    None when none runs."""
    pid = running_pid(spool_dir, node)
    if pid is not None:
        try:
            os.kill(pid, WAKE)
        except OSError:
            return None
    return pid


def claim_start(spool_dir: str, node: str) -> bool:
    """True when the caller should start the node sampler: the O_EXCL claim is ours, or the last
    one is stale, or the spool is read-only (the lock keeps the process single anyway)."""
    claim = node_path(spool_dir, STARTING, node)
    try:
        os.close(os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        return True
    except FileExistsError:
        try:
            if time.time() - os.stat(claim).st_mtime < STARTING_STALE_S:
                return False  # another hook is starting it
            os.utime(claim)
            return True
        except OSError:
            return False
    except OSError:
        return True


def starting(spool_dir: str, node: str) -> bool:
    """True while a hook's claim to start the node sampler is fresh: one is being started (its
    process removes the claim once its PID is written)."""
    try:
        return time.time() - os.stat(node_path(spool_dir, STARTING, node)).st_mtime < STARTING_STALE_S
    except OSError:
        return False


def join(job_dir: str, spool_dir: str, node: str) -> int | None:
    """The Prolog's half: ask the node sampler to sample the job of ``job_dir``. Returns the
    running sampler's PID (woken), or None when the caller must start one (:func:`claim_start`
    said so) or one is being started by another hook. Raises OSError (the join file)."""
    _write(job_path(job_dir, JOIN, node), json.dumps({"t": time.time()}))
    return wake(spool_dir, node)


def start_args(spool_dir: str, node: str) -> tuple[list[str], str]:
    """The node sampler's argv (after ``python -I``) and its log file in the spool."""
    return ["-m", MODULE, spool_dir, node], os.path.join(spool_dir, LOG)


def join_or_start(job_dir: str, spool_dir: str, node: str, start: Start) -> int | None:
    """The Prolog's call: join the job; start the node sampler with ``start`` when none runs and
    no other hook is starting one. Returns its PID (None: another hook is starting it). Raises
    OSError (the join file: nothing samples the job) and what ``start`` raises."""
    pid = join(job_dir, spool_dir, node)
    if pid is None and claim_start(spool_dir, node):
        pid = _start_claimed(spool_dir, node, start)
    return pid


def _start_claimed(spool_dir: str, node: str, start: Start) -> int:
    """Start the node sampler under this hook's claim; a start that fails drops the claim (the next
    hook tries again, not after STARTING_STALE_S) and raises."""
    try:
        return start(*start_args(spool_dir, node))
    except BaseException:
        try:
            os.unlink(node_path(spool_dir, STARTING, node))
        except OSError:
            pass
        raise


def restart_for_others(job_dir: str, spool_dir: str, node: str, start: Start) -> int | None:
    """The Epilog's call after its job's node sampler was found gone (``not_running``): start a new
    one when other jobs are still joined (it records on each the span nothing was sampled).
    Returns its PID, or None when none was needed or another hook starts it."""
    if running_pid(spool_dir, node) is None and others_joined(spool_dir, node, but=job_dir) \
            and claim_start(spool_dir, node):
        return _start_claimed(spool_dir, node, start)
    return None


def joined(job_dir: str, node: str) -> bool:
    return os.path.exists(job_path(job_dir, JOIN, node))


def leave(job_dir: str, spool_dir: str, node: str, t_end: float, wait_s: float = 1.0) -> str:
    """The Epilog's half: ask for the job's last row and wait up to ``wait_s`` for it. Returns the
    outcome the finalizer reads as a per-job sampler's: ``terminated`` (the ``final`` row is
    written), ``not_running`` (no node sampler runs: the finalizer takes its own reading; the
    record says since when nothing was sampled), ``timed_out`` (it did not answer in time; the
    finalizer takes its own reading, and the node sampler writes no late row). A node sampler
    that a hook is still starting (a job shorter than its start-up) is waited for within ``wait_s``:
    its first look at the joins finds the stop and writes the job's ``start`` and ``final`` rows."""
    ended = job_path(job_dir, ENDED, node)
    deadline = time.monotonic() + wait_s
    try:
        _write(job_path(job_dir, STOP, node), json.dumps({"t": t_end}))
    except OSError:
        pass  # a full spool: the node sampler still sees the job end by its cgroup
    pid = wake(spool_dir, node)
    while pid is None and not os.path.exists(ended) and starting(spool_dir, node) and time.monotonic() < deadline:
        time.sleep(0.01)
        pid = wake(spool_dir, node)
    if pid is None and not os.path.exists(ended):
        try:  # a node sampler started later must not write into the file the finalizer now closes
            os.unlink(job_path(job_dir, JOIN, node))
        except OSError:
            pass
        try:  # nor one that took the job up just now write its final row
            os.close(os.open(job_path(job_dir, CLAIM, node), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        except OSError:
            pass
        return "not_running"
    while time.monotonic() < deadline:
        if os.path.exists(ended):
            return "terminated"
        time.sleep(0.01)
    try:
        os.close(os.open(job_path(job_dir, CLAIM, node), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        return "timed_out"  # ours: the node sampler will not write the row now
    except FileExistsError:  # the node sampler is writing it: a little longer, inside the hook's guard
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            if os.path.exists(ended):
                return "terminated"
            time.sleep(0.01)
        return "timed_out"
    except OSError:
        return "timed_out"


def others_joined(spool_dir: str, node: str, but: str = "") -> bool:
    """True when a job other than ``but`` (a job directory) is joined and not stopped: the Epilog
    then restarts a node sampler that died."""
    gone = but.rstrip("/")
    return any(d != gone and not os.path.exists(job_path(d, STOP, node)) for d in Journal([spool_dir]).joined(node))

"""One finalizer per node and spool, taking the node's queue of finished jobs (docs/design/finalizer.md: "A job's
end: the node's finalizer").

The Epilog (or a sampler that saw no Epilog) leaves the job attempt in the node's queue
(:func:`slurm_energy.slurm.attempt.enqueue_finalize`: ``<spool>/finalize-queue/<node>/<run>``) and
starts a finalizer only when :func:`~slurm_energy.slurm.attempt.needs_runner` says so, so a burst
pays the finalizer's start-up (~1 CPU-s of imports) once. No daemon: a runner exits
:data:`LINGER_S` after its queue emptied. Two flock'ed lock files in the queue directory:

* ``.runner.lock``: held by the one runner working the queue;
* ``.standby.lock``: held by at most one process waiting (blocked in ``flock``, no CPU) for the
  runner's lock; a runner that finds work starts one, so a runner killed mid-burst (SIGKILL, OOM) is
  replaced at once; the job it was working on is done again (finalizing is idempotent).

No wake-up is lost: the Epilog writes its entry *before* it looks at the locks, and a runner lists
the queue *after* it took the runner's lock; a runner lingering or about to exit while an entry
arrives either sees it, or is succeeded by the standby, or is seen as gone by that Epilog, which
then starts one. The spool stays the queue of record: what no entry holds (a job whose own
finalizer was killed) is finished by the runner's sweep (:func:`slurm_energy.slurm.jobend.recover.sweep_node`,
every :data:`SWEEP_S` and before it exits), the rest by ``slurm-energy collect``.
"""

from __future__ import annotations

import json
import os
import time

from slurm_energy.slurm.attempt import RUNNER_LOCK, RUNNER_LOG, STANDBY_LOCK, entries
from slurm_energy.slurm.detach import JOBEND_MODULE

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from collections.abc import Callable

    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.jobend.publish import MarkerPending

#: Seconds a runner waits for more jobs after its queue emptied (a burst's next job ends within
#: seconds): a new runner would pay its start-up again. Polled every :data:`POLL_S` (one listdir).
LINGER_S = 30.0
POLL_S = 0.5
#: A job attempt taken this many times without being finished (its runner killed or crashed each
#: time) is left to ``collect``: one bad job must not stop the node's queue.
MAX_ATTEMPTS = 3
#: How often (s) a runner sweeps its node for job attempts whose own finalizer was killed
#: (:func:`slurm_energy.slurm.jobend.recover.sweep_node`; also once before it exits).
SWEEP_S = 30.0
SWEEP_LOCK = ".sweep.lock"
#: An entry this old (s) in a queue no runner holds is stranded (:func:`restart_if_stranded`).
STRANDED_S = 60.0


def _lock_file(path: str) -> int:
    """A lock file's descriptor (made if missing, 0600, no symlink followed). Raises OSError."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _children_s() -> float:
    t = os.times()
    return t.children_user + t.children_system


def _say(qdir: str, msg: str) -> None:
    """One line on stdout (the runner's log, :data:`RUNNER_LOG`)."""
    try:
        os.write(1, f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {os.getpid()} {msg}\n".encode())
    except OSError:
        pass


def run_queue(qdir: str, node: str, linger_s: float = LINGER_S,
              start: Callable[[list[str]], None] | None = None) -> int:
    """The node's finalizer: take the runner's lock (or wait for it as the standby, or exit when a
    runner and a standby exist), then finalize each queued job oldest first until the queue has been
    empty for ``linger_s`` seconds. ``start(argv)`` starts the standby (default: detached, as the
    Epilog starts finalizers). Returns the number of jobs finalized. Never raises for one job."""
    import fcntl

    t0, cpu0 = time.monotonic(), 0.0  # the process's CPU from its start: Python's and its imports included
    try:
        fd = _lock_file(os.path.join(qdir, RUNNER_LOCK))
    except OSError as e:
        fd = -1  # no lock possible (read-only queue dir): work unlocked rather than never
        _say(qdir, f"no runner lock in {qdir}: {e}")
    role = "runner"
    if fd >= 0:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sb = _lock_file(os.path.join(qdir, STANDBY_LOCK))
            try:
                fcntl.flock(sb, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(sb)
                os.close(fd)
                _say(qdir, f"finalize-queue node={node} role=none jobs=0 cpu_s={_cpu_s() - cpu0:.3f}")
                return 0  # a runner and its standby exist
            role = "standby"
            fcntl.flock(fd, fcntl.LOCK_EX)  # until the runner exits or dies
            os.close(sb)  # the next standby may come
    n = 0
    try:
        if entries(qdir):
            n = _work(qdir, node, linger_s, start, lambda: _still_ours(fd, os.path.join(qdir, RUNNER_LOCK)))
    finally:
        _say(qdir, f"finalize-queue node={node} role={role} jobs={n} cpu_s={_cpu_s() - cpu0:.3f} "
                   f"wall_s={time.monotonic() - t0:.1f}")
        if fd >= 0:
            os.close(fd)
    return n


def _still_ours(fd: int, path: str) -> bool:
    """True while ``path`` is the lock file this runner holds (``fd``): a queue directory replaced or
    mounted over (a spool remounted) hides it, and the Epilogs then start a runner on the new one:
    this one must stop, or two would finalize the same jobs."""
    if fd < 0:
        return True
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _work(qdir: str, node: str, linger_s: float, start: Callable[[list[str]], None] | None,
          ours: Callable[[], bool] = lambda: True) -> int:
    import logging

    from slurm_energy.slurm.config_cache import load_config
    from slurm_energy.slurm.log import setup_logging

    cfg = load_config([])  # its problems are on each job (finalize_main loads it again, per job)
    setup_logging(cfg.paths.log_dir, "finalize.log")
    log = logging.getLogger("slurm_energy.finalize")
    try:
        (start or _start_standby)(["-m", JOBEND_MODULE, "finalize-queue", qdir, node])
    except Exception as e:
        log.warning("finalize-queue %s: no standby started: %s", qdir, e)
    n, idle_since = 0, time.monotonic()
    next_sweep = idle_since  # the first right after the first batch
    pending: list[tuple[float, MarkerPending]] = []
    taken: set[str] = set()  # entries this process finalized: one it could not remove (a read-only
    while True:              # spool) is not taken again, or the runner would loop on it
        batch = [p for p in entries(qdir) if p not in taken]
        taken.update(batch)
        for path in batch:
            if not ours():
                log.warning("finalize-queue %s: its lock file was replaced (the spool remounted?): left to the "
                            "runner of the new one", qdir)
                return n
            n += finalize_entry(path, log, pending)
        pending[:] = [(t, m) for t, m in pending if not m.retry(0) and time.monotonic() < t]
        last = not batch and (time.monotonic() - idle_since >= linger_s or not ours())
        if (last or time.monotonic() >= next_sweep) and ours():
            _sweep(qdir, node, log)
            next_sweep = time.monotonic() + SWEEP_S
        if batch:
            idle_since = time.monotonic()
        elif last:
            return n
        else:
            time.sleep(POLL_S)


def _sweep(qdir: str, node: str, log: logging.Logger) -> None:
    """:func:`slurm_energy.slurm.jobend.recover.sweep_node` for this node, by one of its runners at a time
    (``.sweep.lock`` in the first spool's queue directory: a runner per spool may work the node),
    its lines logged. Never raises."""
    import fcntl

    from slurm_energy.slurm.attempt import finalize_queue_dir, spool_dirs
    from slurm_energy.slurm.config_cache import load_config

    t0, cpu0 = time.monotonic(), _cpu_s()
    fd = -1
    try:
        cfg = load_config([])
        for sd in spool_dirs(cfg):
            try:
                fd = _lock_file(os.path.join(finalize_queue_dir(sd, node), SWEEP_LOCK))
                break
            except OSError:
                continue
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another runner of this node sweeps now
        from slurm_energy.slurm.jobend.recover import sweep_node

        lines = sweep_node(cfg, node, time.time())
        lines += [f"restarted the stranded finalizer of {q}" for q in restart_stranded_queues(spool_dirs(cfg), node, time.time())]
        for line in lines:
            log.warning("finalize-queue %s: sweep: %s", node, line)
        log.info("finalize-queue %s: sweep: %d thing(s) done, cpu_s=%.3f wall_s=%.3f", node, len(lines),
                 _cpu_s() - cpu0, time.monotonic() - t0)
    except Exception:
        log.exception("finalize-queue %s (%s): sweep failed; collect finishes what it left", node, qdir)
    finally:
        if fd >= 0:
            os.close(fd)


def restart_if_stranded(qdir: str, node: str, now: float, start: Callable[[list[str]], None] | None = None) -> bool:
    """Start the node's finalizer for ``qdir`` when an entry has waited there :data:`STRANDED_S`
    seconds (epoch ``now``) and no runner holds the queue: its runner and standby were both killed
    after the node's last Epilog, and no Epilog comes to start another. A running job's sampler
    calls this at its interim flush (:mod:`slurm_energy.slurm.sampler.main`). Returns True when started."""
    from slurm_energy.slurm.processes import lock_taken

    if not entries(qdir, older_than=now - STRANDED_S) or lock_taken(os.path.join(qdir, RUNNER_LOCK)) is not False:
        return False
    (start or _start_standby)(["-m", JOBEND_MODULE, "finalize-queue", qdir, node])
    return True


def restart_stranded_queues(spools: list[str], node: str, now: float,
                            start: Callable[[list[str]], None] | None = None) -> list[str]:
    """:func:`restart_if_stranded` for ``node``'s queue in each of ``spools``: a runner's sweep
    restarts the finalizer of the other spool's queue (the fallback spool's, filled while the spool
    was full) when that one's runner and standby were both killed and no Epilog there comes to start
    another (seen in the job-end fault burst: five entries waited for collect). Returns the queue
    directories whose finalizer was started."""
    from slurm_energy.slurm.attempt import finalize_queue_dir

    return [q for q in (finalize_queue_dir(sd, node) for sd in spools) if restart_if_stranded(q, node, now, start)]


def _start_standby(argv: list[str]) -> None:
    from slurm_energy.slurm.detach import FINALIZER_NICE, spawn
    from slurm_energy.slurm.log import FALLBACK_LOG_DIR

    spawn(argv, os.path.join(argv[-2], RUNNER_LOG), FALLBACK_LOG_DIR, nice=FINALIZER_NICE)


def finalize_entry(path: str, log: logging.Logger, pending: list[tuple[float, MarkerPending]] | None = None) -> int:
    """Finalize the job attempt of one queue entry (:func:`slurm_energy.slurm.jobend.finish.finalize_main`,
    then its report as the job's user), then remove the entry. Returns 1 when finalized here, 0 when
    skipped (already finalized, e.g. by ``collect``; gone; given up after :data:`MAX_ATTEMPTS`).
    ``pending``: where a ``finalized`` marker that could not be written goes, as ``(give up at
    (monotonic s), MarkerPending)``, for the caller to retry (:func:`_work`, between jobs)."""
    from slurm_energy.slurm.attempt import Attempt, SamplerEnd, write_private

    try:
        with open(path, encoding="utf-8") as f:
            e = json.load(f)
        sp = Attempt.from_dir(e["dir"], e["node"])
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.error("finalize-queue: entry %s unreadable (%s): dropped; collect finishes its job", path, err)
        _remove(path)
        return 0
    if sp.is_finalized() or not os.path.isdir(sp.dir):
        _remove(path)
        return 0
    attempts = int(e.get("attempts") or 0) + 1
    if attempts > MAX_ATTEMPTS:
        sp.record_error(f"finalizer: taken {MAX_ATTEMPTS} times and never finished (killed or crashed each "
                        "time); left to slurm-energy collect")
        log.error("finalize-queue: %s taken %d times, never finished: left to collect", sp.dir, MAX_ATTEMPTS)
        _remove(path)
        return 0
    try:
        write_private(path, json.dumps(dict(e, attempts=attempts)))
    except OSError:
        pass  # a full spool: counted from the next take on
    from slurm_energy.slurm.jobend.finish import AfterSlot, finalize_main
    from slurm_energy.slurm.jobend.publish import MARKER_RETRY_S

    t0, cpu0, sub0 = time.monotonic(), _cpu_s(), _children_s()
    after = AfterSlot()
    try:
        finalize_main(e["dir"], e["node"], float(e["t"]), str(e.get("exit_code") or ""),
                      SamplerEnd.parse(e.get("sampler"), SamplerEnd.TERMINATED), deferred=after, logging_ready=True)
        run_reports(sp, after.reports, log)
        if pending is not None:  # a marker not written (the spool filled up): retried while the queue is worked
            pending += [(time.monotonic() + MARKER_RETRY_S, j) for j in after.markers]
    except Exception:
        log.exception("finalize-queue: %s failed", sp.dir)
    _remove(path)
    # cpu_s: this process's and its children's (scontrol, sacct, sacctmgr, the report's writer as the user)
    log.info("finalized job_dir=%s node=%s cpu_s=%.3f children_s=%.3f wall_s=%.3f lag_s=%.1f", sp.dir, sp.node,
             _cpu_s() - cpu0, _children_s() - sub0, time.monotonic() - t0, time.time() - float(e["t"]))
    return 1


#: uid -> when (monotonic s) that user's report writer last ran into safe_write's timeout: their
#: reports are written by a forked child for :data:`SLOW_WRITER_S` after, so the queue -- other
#: users' jobs -- waits for one hung writer of theirs, not one per job (docs/PRIVACY.md, point 4).
_SLOW_WRITERS: dict[int, float] = {}
SLOW_WRITER_S = 600.0


def _job_uid(sp: Attempt) -> int | None:
    from slurm_energy.slurm.attempt import read_json

    uid = read_json(sp.context).get("uid")
    return uid if isinstance(uid, int) else None


def run_reports(sp: Attempt, deferred: list[Callable[[], object]], log: logging.Logger) -> None:
    """Run the job's deferred report writing (after its record is stored): here, bounded by
    safe_write's timeout; in a forked child, not waited for, when this user's writer hung lately."""
    from slurm_energy.reporting.safe_write import REPORT_TIMEOUT_S

    jobs = list(deferred)
    if not jobs:
        return
    uid, now = _job_uid(sp), time.monotonic()
    _reap()
    if uid is not None and now - _SLOW_WRITERS.get(uid, -SLOW_WRITER_S) < SLOW_WRITER_S:
        if os.fork() == 0:  # the child writes and exits; the queue goes on (reaped by _reap)
            try:
                for job in jobs:
                    job()
            finally:
                os._exit(0)
        return
    for job in jobs:
        t0 = time.monotonic()
        try:
            job()
        except Exception:
            log.exception("report of %s failed", sp.dir)
        if uid is not None and time.monotonic() - t0 >= 0.9 * REPORT_TIMEOUT_S:
            _SLOW_WRITERS[uid] = time.monotonic()
            log.warning("finalize-queue: uid %s's report writer took %.1f s: their next reports for %.0f s are "
                        "written apart", uid, time.monotonic() - t0, SLOW_WRITER_S)


def _reap() -> None:
    """Reap the report children that have exited (never waits)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


"""The node sampler: one process per node and spool samples every job on it (``sampling.sampler: node``).

``python -I -m slurm_energy.slurm.sampler.node SPOOL_DIR NODE``, started by a Prolog when none runs
(the protocol: :mod:`slurm_energy.slurm.sampler_join`). Each interval it reads the node's counters
once (``/proc/stat``, ``/proc/meminfo`` and the node's readers: RAPL zones, the CPU TDP and RAM
models), then every joined job's usage (its cgroup, else its PIDs: :class:`.probe.SlurmJobProbe`)
and the job's own GPUs, and appends each job's row to that job's sample file. All the jobs' rows of
one tick carry the same node reading and the same time: their CPU shares of an interval have one
denominator and add up to at most the node's busy time, so the energy shared out adds up to at
most the node's counter delta.

The rest is the per-job sampler's (:mod:`.main`), per job: the Prolog's row from its files first,
a ``start`` row at the join, a ``cgroup_gone`` row when the job's cgroup v2 reports it empty (every
job's ``cgroup.events`` is in the one ``poll()``), a ``final`` row when the Epilog asks (its stop
file: the row is synced before the Epilog is answered), the Epilog-less finish after
``sampling.epilog_wait_s``. One interim worker (forked, never waited on) stores the running records
of the jobs whose sample files grew since its last flush. The process leaves once no job is
joined; a job joining meanwhile finds the lock free and starts a new one.

Failure: a node sampler that dies (SIGKILL, OOM) frees its lock; the next Prolog, or the Epilog of a
job while others are joined, starts another, which records on every joined job the span nothing
was sampled (``node sampler not running from ... to ...``); the Epilog of a job whose sampler is
gone answers ``not_running`` and the finalizer takes its own last reading, as for a per-job sampler.
A TERM (from anyone) ends the sampling of every job with a ``final`` row, as a per-job sampler's:
rows before their Epilogs, which the finalizer reads as stopped early.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from slurm_energy.core import JobUsage, NodeUsage
from slurm_energy.sampling.nodestats import hold_snapshot, read_node_stats
from slurm_energy.sampling.readers.base import Reader, close_readers, read_all
from slurm_energy.sampling.samplefile import SampleWriter
from slurm_energy.slurm import sampler_join as sj
from slurm_energy.slurm.attempt import Journal

log = logging.getLogger("slurm_energy.nodesampler")

#: the interim worker keeps each job's running summary (it reads only new rows); once this many
#: jobs have left since it was forked, a fresh worker is forked, so a node sampler that runs for
#: weeks keeps no state of jobs long gone
REFORK_AFTER_JOBS = 256
#: the interim flushes of all the node's jobs together take at most this fraction of one core: the
#: next flush comes ``sampling.interim_s`` after the last, or later when the last one's CPU time
#: divided by this is longer (128 jobs: ~1 s of CPU a flush, so every ~2.5 min instead of every
#: minute; a per-job sampler allows each job's flushes 2 %, 128 jobs 256 % of a core)
INTERIM_CPU_SHARE = 0.006

__all__ = ["JobSampling", "NodeSampler", "main"]


class _Probe(Protocol):
    def poll(self, full: bool = True) -> JobUsage | None: ...

    def gone(self) -> bool: ...


@dataclass
class JobSampling:
    """One joined job: where its rows go and what is its own."""

    key: str  # the job's spool directory
    probe: _Probe
    writer: SampleWriter
    readers: list[Reader] = field(default_factory=list)  # the job's own devices (its GPUs)
    usage: JobUsage | None = None
    seen: bool = False
    gone_since: float | None = None
    announced_gone: bool = False
    last_sync: float = -math.inf
    #: what happens once its sampling ends (the Slurm glue: the ack, the Epilog-less finish)
    on_end: Callable[[JobSampling, str, float], None] | None = None

    def poll(self, full: bool = True) -> None:
        u = self.probe.poll(full)
        if u is not None:
            self.usage = u
            self.seen = True


class NodeSampler:
    """Every joined job's rows from one node reading per tick (the loop is :meth:`run`)."""

    def __init__(self, node_readers: list[Reader], interval_s: float = 5.0, gone_after_s: float = 60.0,
                 clock: Callable[[], float] = time.time, fsync_every_s: float = 30.0):
        if interval_s <= 0:
            raise ValueError(f"sampling interval must be > 0 s, got {interval_s!r}: fix sampling.interval_s")
        self.node_readers = node_readers
        self.interval_s = float(interval_s)
        self.gone_after_s = gone_after_s
        self.clock = clock
        self.fsync_every_s = fsync_every_s
        self.jobs: dict[str, JobSampling] = {}
        self.n_ticks = 0  # node readings taken

    def write_rows(self, jobs: list[JobSampling], kind: str | Callable[[JobSampling], str], poll: bool = True) -> float:
        """One node reading, then a row in each of ``jobs``' files (their usage polled first when
        ``poll``, so every job's CPU time and the node's busy time are read at nearly one instant:
        128 polls take ~5 ms). ``kind``: a row kind, or a function of the job. Returns the rows' time."""
        if poll:
            for j in jobs:
                j.poll()
        try:
            ns: NodeUsage | None = read_node_stats()
        except OSError:
            ns = None
        hold_snapshot(ns)
        try:
            node = read_all(self.node_readers)
            t = self.clock()
            now = time.monotonic()
            for j in jobs:
                k = kind if isinstance(kind, str) else kind(j)
                sync = k != "sample" or now - j.last_sync >= self.fsync_every_s
                try:
                    j.writer.write_sample(t, k, j.usage, ns, node + read_all(j.readers) if j.readers else node, sync=sync)
                except OSError as e:  # one job's full or removed spool must not stop the others' rows
                    log.warning("job %s: row not written: %s", j.key, e)
                if sync:
                    j.last_sync = now
        finally:
            hold_snapshot(None)
        self.n_ticks += 1
        return t

    def add(self, job: JobSampling) -> None:
        """Join a job: its ``start`` row now."""
        self.jobs[job.key] = job
        self.write_rows([job], "start")

    def end(self, keys: list[str], kind: str = "final", poll: bool = True) -> None:
        """The last rows of ``keys``' jobs (one node reading), then their sampling ends."""
        jobs = [self.jobs.pop(k) for k in keys if k in self.jobs]
        if not jobs:
            return
        t = self.write_rows(jobs, kind, poll=poll)
        for j in jobs:
            self.close_job(j, kind, t)

    def close_job(self, j: JobSampling, how: str, t: float) -> None:
        """The job's sampling ends (``how``: final, epilog_missing, timed_out; ``t``: its last row's
        time, or when it was first seen gone): files closed, then ``on_end``."""
        for r in j.readers:
            try:
                r.close()
            except Exception:
                log.exception("closing reader %s", r.name)
        try:
            j.writer.close()
        except OSError as e:
            log.warning("job %s: sample file not closed: %s", j.key, e)
        if j.on_end is not None:
            j.on_end(j, how, t)

    def tick(self) -> None:
        """The interval's sample: every job's usage, one node reading, a row each; a job seen gone
        gets its ``cgroup_gone`` row instead (its last usage), once."""
        jobs = list(self.jobs.values())
        for j in jobs:
            j.poll()
        self.write_rows(jobs, self._kind, poll=False)
        self.check_gone()

    def _kind(self, j: JobSampling) -> str:
        if j.seen and j.probe.gone() and not j.announced_gone:
            j.announced_gone = True
            return "cgroup_gone"
        return "sample"

    def job_ended(self, keys: list[str]) -> None:
        """Jobs whose end woke the loop (cgroup v2 ``populated 0``): their ``cgroup_gone`` rows now."""
        jobs = [self.jobs[k] for k in keys if k in self.jobs and not self.jobs[k].announced_gone]
        for j in jobs:
            j.poll(full=False)
        ended = [j for j in jobs if j.seen and j.probe.gone()]
        if ended:
            for j in ended:
                j.announced_gone = True
            self.write_rows(ended, "cgroup_gone", poll=False)
        self.check_gone()

    def check_gone(self) -> None:
        """Jobs gone for ``gone_after_s`` without an Epilog: their sampling ends (no row: their
        ``cgroup_gone`` row was their last usage)."""
        now = self.clock()
        done = []
        for j in self.jobs.values():
            if j.probe.gone():
                j.gone_since = j.gone_since if j.gone_since is not None else now
                if now - j.gone_since >= self.gone_after_s:
                    done.append(j.key)
            else:
                j.gone_since = None
        for k in done:
            j = self.jobs.pop(k)
            self.close_job(j, "epilog_missing", j.gone_since if j.gone_since is not None else now)

    def wakeups(self) -> dict[int, tuple[str, int]]:
        """{fd: (job key, poll events)} of the jobs whose probes announce their end."""
        out: dict[int, tuple[str, int]] = {}
        for j in self.jobs.values():
            w = getattr(j.probe, "wakeup", None)
            fd_ev = w() if w is not None and not j.announced_gone else None
            if fd_ev is not None:
                out[fd_ev[0]] = (j.key, fd_ev[1])
        return out

    def close(self) -> None:
        close_readers(self.node_readers)


# --- the Slurm glue: the process ----------------------------------------------------------------

class _Process:
    """The node sampler process of ``spool_dir`` and ``node``: joins, stops, the loop, leaving."""

    def __init__(self, cfg: Any, spool_dir: str, node: str, lock_fd: int, stay: bool = False):
        self.cfg, self.spool_dir, self.node, self.lock_fd = cfg, spool_dir, node, lock_fd
        self.stay = stay  # a systemd unit's: runs with no job too (--stay)
        from slurm_energy.sampling.reading import open_readers

        readers, _ = open_readers(cfg, [], [])  # the node's own devices, once for every job
        self.ns = NodeSampler(readers, interval_s=cfg.sampling.interval_s, gone_after_s=cfg.sampling.epilog_wait_s)
        self.stop_signal: int | None = None
        self.woken = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.worker: Any = None
        self.interim: Any = None
        self.failed: set[str] = set()  # job directories whose join failed (not retried)
        self.left_since_fork = 0  # jobs whose sampling ended since the interim worker was forked

    # signals: a flag and the self-pipe
    def _on_wake(self, *_a: Any) -> None:
        self.woken = True
        self._poke()

    def _on_stop(self, signum: int, *_a: Any) -> None:
        self.stop_signal = signum
        self._poke()

    def _poke(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def joined_dirs(self) -> list[str]:
        return Journal([self.spool_dir]).joined(self.node)

    def scan(self) -> None:
        """New joins get their start rows (a job whose Epilog already asked too: start, then final,
        as a per-job sampler stopped while starting); stop requests their final rows (one reading)."""
        for d in self.joined_dirs():
            if d in self.ns.jobs or d in self.failed:
                continue
            try:
                self.ns.add(self._open(d))
            except Exception as e:
                self.failed.add(d)
                log.exception("node sampler node=%s: job %s not joined", self.node, d)
                from slurm_energy.slurm.attempt import Attempt

                Attempt.from_dir(d, self.node).record_error(f"node sampler: job not joined: {type(e).__name__}: {e}")
        stops = [k for k in self.ns.jobs if os.path.exists(sj.job_path(k, sj.STOP, self.node))]
        if stops:
            claimed = [k for k in stops if self._claim(k)]
            for k in set(stops) - set(claimed):  # the Epilog gave up on it: no late row, just stop
                j = self.ns.jobs.pop(k)
                j.on_end = None
                self.ns.close_job(j, "timed_out", time.time())
                self._unjoin(k)
            self.ns.end(claimed, "final")

    def _claim(self, d: str) -> bool:
        try:
            os.close(os.open(sj.job_path(d, sj.CLAIM, self.node), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            return True
        except OSError:
            return False

    def _open(self, d: str) -> JobSampling:
        from slurm_energy.slurm.attempt import write_private
        from slurm_energy.slurm.node_reading import prolog_reading_by_sampler, readers_for, spool_from_dir
        from slurm_energy.slurm.sampler.main import start_node_meter
        from slurm_energy.slurm.sampler.probe import SlurmJobProbe

        spool, ctx = spool_from_dir(d, self.node)
        prolog_reading_by_sampler(self.cfg, ctx, spool)
        errors: list[str] = []
        readers, _ = readers_for(self.cfg, ctx, spool, errors)  # the job's inventory, written once
        own = [r for r in readers if r.device_class == "gpu"]
        for r in readers:
            if r.device_class != "gpu":
                r.close()
        for e in errors:
            spool.record_error(e)
        start_node_meter(self.cfg, spool)
        probe = SlurmJobProbe(ctx.job_id, ctx.uid if ctx.uid is not None else -1, ctx.node, sluid=ctx.sluid,
                              on_job_env=lambda facts: write_private(spool.jobenv, json.dumps(facts)))
        return JobSampling(d, probe, SampleWriter(spool.samples), own, on_end=self._ended)

    def _ended(self, j: JobSampling, how: str, t: float) -> None:
        from slurm_energy.slurm.node_reading import spool_from_dir

        self.left_since_fork += 1

        spool, ctx = spool_from_dir(j.key, self.node)
        if how == "final":
            if self.stop_signal is not None:  # stopped by a signal, not by the Epilog: the finalizer tells
                from slurm_energy.slurm.sampler_end import record_stop

                # no ended file: the job's Epilog then finds no node sampler (not_running) and its
                # finalizer takes the reading after the Epilog, as after a per-job sampler stopped so
                record_stop(spool, self.stop_signal)
                return  # still joined: a restarted node sampler takes the job up again
            try:
                with open(sj.job_path(j.key, sj.ENDED, self.node), "w", encoding="ascii") as f:
                    f.write(f"{t}\n")
            except OSError as e:
                log.warning("job %s: %s not written: %s", ctx.job_id, sj.ENDED, e)
        elif how == "epilog_missing":
            from slurm_energy.slurm.sampler.main import finish_without_epilog

            finish_without_epilog(self.cfg, spool, ctx, t)
        self._unjoin(j.key)

    def _unjoin(self, d: str) -> None:
        try:
            os.unlink(sj.job_path(d, sj.JOIN, self.node))
        except OSError:
            pass

    def note_missed(self) -> None:
        """A node sampler before this one died (its beat file is left): every joined job's record
        says from when to when nothing was sampled."""
        beat = sj.node_path(self.spool_dir, sj.BEAT, self.node)
        try:
            last = os.stat(beat).st_mtime
        except OSError:
            return
        now = time.time()
        from slurm_energy.slurm.attempt import Attempt

        for d in self.joined_dirs():
            try:
                a = Attempt.from_dir(d, self.node)
                # the job's own span only: a job whose Prolog started this sampler missed nothing before it
                began = max(last, float(json.loads(a.context_json()).get("prolog_time") or 0.0))
                missed = int((now - began) // self.ns.interval_s) - 1
                if missed < 1:
                    continue
                a.record_error(
                    f"node sampler not running from {time.strftime('%H:%M:%S', time.localtime(began))} to "
                    f"{time.strftime('%H:%M:%S', time.localtime(now))} ({now - began:.0f} s, about "
                    f"{missed} intervals missed: it died, "
                    "a later hook started it again); the energy of that span is shared from the rows around it")
            except (ValueError, OSError):
                pass
        log.warning("node sampler node=%s: the previous one died; nothing sampled for %.0f s", self.node, now - last)

    def beat(self) -> None:
        p = sj.node_path(self.spool_dir, sj.BEAT, self.node)
        try:
            os.utime(p)
        except FileNotFoundError:
            try:
                os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            except OSError:
                pass
        except OSError:
            pass

    def run(self) -> int:
        signal.signal(sj.WAKE, self._on_wake)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self._on_stop)
        self.note_missed()
        self.scan()
        from slurm_energy.sampling.sampler import freeze_gc

        self.interim = NodeInterim(self.spool_dir, self.node)
        freeze_gc()
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)
        self._registered: dict[int, tuple[str, int]] = {}
        interim_s = float(self.cfg.sampling.interim_s)
        next_tick = time.time() + self.ns.interval_s
        next_interim = time.time() + min(interim_s, 2 * self.ns.interval_s)
        next_scan = next_tick
        while self.stop_signal is None:
            self.beat()
            if not self.ns.jobs and not self.stay and not self._stay():
                break
            fired = self._wait(min(next_tick, next_interim))
            if self.stop_signal is not None:
                break
            now = time.time()
            if self.woken or now >= next_scan:
                self.woken = False
                self.scan()
                next_scan = now + self.ns.interval_s
            if fired:
                self.ns.job_ended(fired)
            if now >= next_tick:
                if self.ns.jobs:
                    self.ns.tick()
                next_tick += self.ns.interval_s * max(1, int((now - next_tick) // self.ns.interval_s) + 1)
            if now >= next_interim:
                next_interim = now + max(interim_s, self._request_interim() / INTERIM_CPU_SHARE)
        return self._leave()

    def _wait(self, until: float) -> list[str]:
        """Sleep until ``until`` (epoch s), a hook's wake-up or a job's end; returns the keys of
        the jobs whose end descriptors fired."""
        want = self.ns.wakeups()
        for fd in set(self._registered) - set(want):
            self._poller.unregister(fd)
        for fd, (_, mask) in want.items():
            if self._registered.get(fd, ("", -1))[1] != mask:
                self._poller.register(fd, mask)
        self._registered = want
        left = until - time.time()
        ev = self._poller.poll(left * 1000.0) if left > 0 else []
        if any(fd == self._wake_r for fd, _ in ev):
            try:
                os.read(self._wake_r, 4096)
            except OSError:
                pass
        return [want[fd][0] for fd, _ in ev if fd in want]

    def _request_interim(self) -> float:
        """Ask the one interim worker for a flush (forked at the first); returns its last flush's CPU s."""
        from slurm_energy.sampling.interimworker import InterimWorker

        if self.worker is not None and self.left_since_fork >= REFORK_AFTER_JOBS and not self.worker.busy:
            self.worker.kill()  # its running summaries of jobs long gone: a fresh worker forgets them
            self.worker.reap_killed()
            self.worker = None
        if self.worker is None:
            self.worker = InterimWorker(self.interim)
            self.left_since_fork = 0
        if not self.worker.request():
            log.info("interim flush skipped: the previous one is still running")
        return float(self.worker.last_cpu_s)

    def _leave(self) -> int:
        if self.worker is not None:
            self.worker.kill()
        if self.stop_signal is not None:  # every job's last row, as a per-job sampler's on TERM
            self.ns.end(list(self.ns.jobs), "final")
            log.warning("node sampler node=%s stopped by signal %d", self.node, self.stop_signal)
        else:
            try:
                os.unlink(sj.node_path(self.spool_dir, sj.BEAT, self.node))
            except OSError:
                pass
        self.ns.close()
        if self.worker is not None:
            self.worker.reap_killed()
        log.info("node sampler node=%s leaves after %d readings", self.node, self.ns.n_ticks)
        return 0

    def _stay(self) -> bool:
        """No job left: release the lock, look once more (a Prolog that joined meanwhile saw the lock
        held and started none), and keep going only if a job is there and the lock is ours again."""
        fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
        if not [d for d in self.joined_dirs() if d not in self.failed]:
            return False
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a hook started another: that one samples them
        self.scan()
        return bool(self.ns.jobs)


class NodeInterim:
    """The node's interim flush, in one forked worker: the running record of each joined job whose
    sample file grew since the worker's last flush (O(changed jobs), not O(jobs) per job), then the
    stranded-queue check once."""

    def __init__(self, spool_dir: str, node: str):
        self.spool_dir, self.node = spool_dir, node
        self.sizes: dict[str, int] = {}
        self.per_job: dict[str, Any] = {}
        self.cfg: Any = None

    def __call__(self) -> None:
        from slurm_energy.slurm.config_cache import load_config
        from slurm_energy.slurm.sampler.main import check_stranded

        if self.cfg is None:
            self.cfg = load_config([])
        dirs = Journal([self.spool_dir]).joined(self.node)
        for gone in set(self.per_job) - set(dirs):
            del self.per_job[gone]
            self.sizes.pop(gone, None)
        from slurm_energy.outputs.prometheus import one_rewrite

        with one_rewrite():  # the changed jobs' entries, then the node's textfile once
            self._flush(dirs)
        check_stranded(self.cfg, self.node, "node")

    def _flush(self, dirs: list[str]) -> None:
        from slurm_energy.slurm.node_reading import spool_from_dir
        from slurm_energy.slurm.sampler.main import Interim

        for d in dirs:
            try:
                spool, ctx = spool_from_dir(d, self.node)
                size = os.stat(spool.samples).st_size
                if self.sizes.get(d) == size:
                    continue
                self.sizes[d] = size
                if d not in self.per_job:
                    self.per_job[d] = Interim(spool, ctx)
                    self.per_job[d].cfg = self.cfg
                self.per_job[d].flush()
            except Exception:
                log.exception("node sampler node=%s: interim of %s failed", self.node, d)


def _lock(fd: int, tries: int = 50) -> bool:
    """The node's lock: a hook probing it (:func:`slurm_energy.slurm.sampler_join.running_pid`
    takes and drops it) can hold it for microseconds just as this process starts, so it is tried
    for 0.5 s before this one takes another node sampler for the holder."""
    for _ in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.01)
    return False


def main(argv: list[str] | None = None) -> int:
    """``python -m slurm_energy.slurm.sampler.node SPOOL_DIR NODE [--stay]``: exits 0 at once when
    another node sampler holds the node's lock. ``--stay`` (a systemd unit): it does not leave when
    the node has no job. Always 0 once it runs; 2 for a wrong command line, 1 when the spool
    cannot be made or locked (both said on stderr: a systemd unit's journal)."""
    argv = sys.argv[1:] if argv is None else argv
    stay = "--stay" in argv
    argv = [a for a in argv if a != "--stay"]
    if len(argv) != 2 or not all(argv):
        sys.stderr.write("usage: python -I -m slurm_energy.slurm.sampler.node SPOOL_DIR NODE [--stay]\n"
                         "  SPOOL_DIR: the site's paths.spool_dir (default /var/spool/slurm-energy); "
                         "NODE: the node's Slurm name (slurmd -N)\n")
        return 2
    spool_dir, node = argv
    try:
        from slurm_energy.slurm.attempt import mkdir_private

        mkdir_private(spool_dir)  # a systemd unit may start before the node's first Prolog made it
        fd = os.open(sj.node_path(spool_dir, sj.LOCK, node), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        sys.stderr.write(f"node sampler: spool {spool_dir} cannot be used ({e}); it must be a root-owned local "
                         "directory (0700), the site's paths.spool_dir\n")
        return 1
    if not _lock(fd):
        os.close(fd)
        return 0  # one runs already
    try:
        from slurm_energy.slurm.attempt import write_private

        # a hook wakes the PID it reads here: until run() handles it, a wake-up must not end the
        # process (SIGUSR1's default); run() scans every join first anyway
        signal.signal(sj.WAKE, signal.SIG_IGN)
        write_private(sj.node_path(spool_dir, sj.PIDFILE, node), str(os.getpid()))
        try:
            os.unlink(sj.node_path(spool_dir, sj.STARTING, node))
        except OSError:
            pass
        from slurm_energy.slurm.config_cache import load_light_config
        from slurm_energy.slurm.log import setup_logging

        errors: list[str] = []
        cfg = load_light_config(errors)
        setup_logging(cfg.paths.log_dir, sj.LOG)
        for problem in errors:
            log.warning("node sampler node=%s: %s", node, problem)
        return _Process(cfg, spool_dir, node, fd, stay).run()
    except BaseException:
        log.exception("node sampler node=%s failed", node)
        return 0
    finally:
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main())

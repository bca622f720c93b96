"""The sampling scheduler: polls the job's usage and the readers, writes the sample file.

Knows nothing of Slurm: the job is a :class:`UsageProbe` (a Slurm job cgroup, or a process tree
for ``slurm-energy run -- CMD`` / attach by PID). Timing:

* every ``interval_s`` (default 5 s): a full sample (usage + node counters + all readers), one
  flushed line in the sample file (fsync'ed, when the writer asks for it, only every
  ``fsync_every_s``, 30 s, and for the start/cgroup_gone/final rows: an fsync cost more than the
  rest of a sample; a killed sampler still loses nothing written, a node crash at most 30 s).
  /proc/stat and /proc/meminfo are read once per sample for the row and every reader
  (:func:`~slurm_energy.sampling.nodestats.hold_snapshot`). Between samples the process sleeps
  in one ``poll()`` on a self-pipe (written by :meth:`Sampler.stop`, from a signal handler or
  another thread) and, where the probe has one, a descriptor that fires at the job's end
  (``UsageProbe.wakeup``: cgroup v2 ``cgroup.events``, a pidfd for a process tree): no periodic
  wake-up at all;
* in between samples, only for probes that cannot see the job's end by themselves
  (``needs_tail_poll``: cgroup v1, PID mode, attach): a CPU-time poll (one ``pread`` on v1) every
  ``tail_frac`` (2 %) of the time since the job was first seen, at least ``poll_s`` (0.02 s)
  apart, none once that reaches ``interval_s`` (the samples' own polls then suffice), and every
  ``LOOK_S`` (0.25 s) until the job is first seen (the cgroup appears ~20 ms after the Prolog;
  its CPU time is cumulative). The job's CPU time after its last poll is lost, so this bounds the
  loss to ~2 % of a steady job's CPU time (also at 1 s, as the 0.02 s floor allows), while a job
  costs ~50 + 50 ln(age / 1 s) polls (~40 us each) until age = 50 x interval_s, none after.
  ``run`` needs none: the child's wait4 rusage gives the tree's exact CPU time at its end
  (:meth:`slurm_energy.sampling.local.LocalSampler.stop`); cgroup v2 and attach wake at the end;
* when the job is seen gone (its end woke the loop, or a poll found it gone): a full sample at
  once (kind ``cgroup_gone``) with the job's last usage;
* on SIGTERM/SIGINT/SIGHUP (the Epilog's TERM, or anyone's): a last full sample (kind ``final``),
  then exit 0; the signal is kept in :attr:`Sampler.stop_signal` (the Slurm glue tells the
  Epilog's TERM from an early stop by the time of that row: :mod:`slurm_energy.slurm.sampler_end`);
* by itself once the job is gone (no cgroup and no job PIDs) for ``gone_after_s`` (60 s), so a
  lost Epilog leaves no process behind;
* every ``interim_every_s`` (60 s; longer when one call costs more than 2 % of that in CPU)
  ``on_interim()`` is called (the Slurm glue stores the job's energy so far) in a forked worker
  (:mod:`~slurm_energy.sampling.interimworker`): the loop never waits on it, so the Epilog's TERM
  is answered within a sample's time whatever the store is doing (the worker is SIGKILLed then).
"""

from __future__ import annotations

import logging
import math
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any, Protocol

from slurm_energy.core import JobUsage, NodeUsage
from slurm_energy.sampling.interimworker import InterimWorker
from slurm_energy.sampling.nodestats import hold_snapshot, read_node_stats
from slurm_energy.sampling.readers.base import Reader, close_readers, read_all
from slurm_energy.sampling.samplefile import SampleWriter

log = logging.getLogger("slurm_energy.sampler")

LOOK_S = 0.25  # s between looks for a job not seen yet (its cgroup, its PIDs)


class UsageProbe(Protocol):
    """What the sampler measures the job by."""

    def poll(self, full: bool = True) -> JobUsage | None:
        """The probe's own usage, updated in place to now, or None if the job cannot be seen right
        now. ``full=False`` (the in-between CPU-time poll) may leave the PID list and memory as
        they were at the last full poll."""

    def gone(self) -> bool:
        """True once the job has ended (no cgroup and no PIDs). Cheap: no walk of /proc."""

    # Optional (looked up with getattr; absent: in-between polls needed, no wake-up descriptor):
    # needs_tail_poll: bool -- False when the probe sees the job's end exactly by itself
    # wakeup() -> Optional[tuple[int, int]] -- (fd, poll() event mask) that fires at the job's end


def freeze_gc() -> None:
    """Leave every object made so far (imports, config, readers: ~30,000 in a sampler) out of later
    garbage collections (:func:`gc.freeze`): a long-lived sampler's full collections then walk only
    what it made since. Called by the sampling processes once set up, never by a library call."""
    import gc

    gc.freeze()


class Sampler:
    """Runs until stopped by a signal, by :meth:`stop`, or by the job being gone for a while."""

    def __init__(self, readers: list[Reader], probe: UsageProbe, writer: SampleWriter, interval_s: float = 5.0,
                 poll_s: float = 0.02, gone_after_s: float = 60.0, interim_every_s: float = 60.0,
                 on_interim: Callable[[], None] | None = None, clock: Callable[[], float] = time.time,
                 tail_frac: float = 0.02, fsync_every_s: float = 30.0, interim_in_worker: bool = False):
        if interval_s <= 0:
            raise ValueError(f"sampling interval must be > 0 s, got {interval_s!r}: fix sampling.interval_s")
        self.readers = readers
        self.probe = probe
        self.writer = writer
        self.interval_s = float(interval_s)
        self.poll_s = min(float(poll_s), self.interval_s)
        self.gone_after_s = gone_after_s
        self.interim_every_s = interim_every_s
        self.on_interim = on_interim
        self.clock = clock
        self.tail_frac = tail_frac
        self.fsync_every_s = fsync_every_s
        self._last_fsync = -math.inf
        self.last_usage: JobUsage | None = None
        self._stop = False
        self._now_asked = False  # request_sample(): a row now, before the next interval's
        #: on_interim runs in a forked worker (:class:`InterimWorker`): for a single-threaded
        #: sampling process (the Slurm sampler); False: in the loop's thread (a library caller's)
        self.interim_in_worker = interim_in_worker
        self._worker: InterimWorker | None = None
        self._seen_job = False
        self._t_seen: float | None = None  # when the job was first seen (clock)
        self.n_samples = 0
        #: epoch s at which the job was first seen gone, when the loop ended by itself (no stop()):
        #: no Epilog came within ``gone_after_s``; None when stopped (a signal: the Epilog)
        self.gone_at: float | None = None
        #: the signal number that stopped the loop (None: stop() called directly, or not stopped)
        self.stop_signal: int | None = None
        self.n_polls = 0  # in-between CPU-time polls (not counting the samples' own)
        self._mute_until = -math.inf  # the probe's wake-up descriptor is not waited on before this
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)
        self._registered: tuple[int, int] | None = None  # the probe's (fd, events) in _poller

    def stop(self, *_args: Any) -> None:
        """Ask the loop to take its final sample and return (safe from a signal handler and from
        another thread: wakes the loop through its self-pipe)."""
        self._stop = True
        if _args and isinstance(_args[0], int) and self.stop_signal is None:
            self.stop_signal = _args[0]
        try:
            os.write(self._wake_w, b"x")
        except OSError:  # full (already woken) or closed (the loop has ended)
            pass

    def request_sample(self, *_args: Any) -> None:
        """Ask the loop for one sample now (safe from a signal handler: a flag and the self-pipe),
        e.g. ``track().result()`` in its first interval; the next interval's sample stays due."""
        self._now_asked = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT/SIGHUP -> :meth:`stop`."""
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self.stop)

    def sample(self, kind: str = "sample") -> None:
        """Take one full sample and append it to the sample file.

        The job's usage is polled right before the node's counters, so the job's CPU-time delta and
        the node's busy delta cover the same instants (the CPU share's numerator and denominator).
        """
        if kind != "cgroup_gone":
            self._poll()
        self._write_row(kind)

    def _write_row(self, kind: str) -> None:
        """The node's counters (/proc/stat and /proc/meminfo once, for the row and every reader),
        every reader, then one line from the objects (no dict per reading): fsync'ed every
        ``fsync_every_s`` and for every row that is not a plain sample."""
        try:
            ns: NodeUsage | None = read_node_stats()
        except OSError:
            ns = None  # the row's node is {}; the readers read (or fail) by themselves
        now = time.monotonic()
        sync = kind != "sample" or now - self._last_fsync >= self.fsync_every_s
        hold_snapshot(ns)
        try:
            readings = read_all(self.readers)
        finally:
            hold_snapshot(None)
        self.writer.write_sample(self.clock(), kind, self.last_usage, ns, readings, sync=sync)
        if sync:
            self._last_fsync = now
        self.n_samples += 1

    def _poll(self, full: bool = True) -> None:
        """Poll the job's usage: :attr:`last_usage` is then the probe's own (updated in place), or
        stays as it was where the probe cannot see the job now (or a caller set a final one)."""
        u = self.probe.poll(full)
        if u is None:
            return
        self.last_usage = u
        if not self._seen_job:
            self._seen_job = True
            self._t_seen = self.clock()

    def _tail_poll_s(self, now: float) -> float:
        """Seconds to the next in-between CPU-time poll (inf when the probe needs none)."""
        if not getattr(self.probe, "needs_tail_poll", True):
            return math.inf
        if self._t_seen is None:
            return min(self.interval_s, max(self.poll_s, LOOK_S))
        p = max(self.poll_s, self.tail_frac * (now - self._t_seen))
        return p if p < self.interval_s else math.inf  # the samples' own polls are often enough

    def run(self) -> int:
        """The loop. Returns the number of samples written."""
        self.sample("start")  # sample() polls the job's usage first
        next_sample = self.clock() + self.interval_s
        # the first interim soon (2 intervals), so a running job shows up early; then every interim_every_s
        next_interim = self.clock() + min(self.interim_every_s, 2 * self.interval_s) if self.on_interim else math.inf
        gone_since: float | None = None
        announced_gone = False
        next_poll = self.clock() + self._tail_poll_s(self.clock())
        while not self._stop:
            woke = self._wait(min(next_sample, next_interim, next_poll if gone_since is None else math.inf))
            if self._stop:
                break
            now = self.clock()
            due = now >= next_sample
            asked, self._now_asked = self._now_asked, False
            if asked and not due:
                self.sample()  # polls first, as the interval's own sample does
            if due:  # the sample's own poll, before the gone check (the job may just have ended)
                self._poll()
            elif woke or now >= next_poll:
                self._poll(full=False)  # woken: the probe reads the job's end
                self.n_polls += 1
            next_poll = now + self._tail_poll_s(now)
            if self.probe.gone():
                if self._seen_job and not announced_gone:
                    self._write_row("cgroup_gone")  # the job's last usage, before anything else is lost
                    announced_gone = True
                    due = False
                gone_since = gone_since or now
                if now - gone_since >= self.gone_after_s:
                    log.info("job gone for %.0f s: sampler exits by itself", now - gone_since)
                    self.gone_at = gone_since
                    break
            else:
                gone_since = None
            if now >= next_sample:
                if due:
                    self._write_row("sample")  # polled above
                next_sample += self.interval_s * max(1, int((now - next_sample) // self.interval_s) + 1)
            if now >= next_interim and not self._stop:
                next_interim = self._interim(now)
        if self._worker is not None:
            self._worker.kill()  # an interim record is a progress view: the finalizer's is the record
        self.sample("final")
        self._close()
        if self._worker is not None:
            self._worker.reap_killed()
        return self.n_samples

    def _interim(self, now: float) -> float:
        """Asks for an interim flush; returns when to ask next. With ``interim_in_worker`` the flush
        runs in a forked :class:`InterimWorker` (never waited on: the Epilog's TERM gets the final
        sample within its 1 s whatever the store is doing); else in this thread (a caller with
        other threads: fork() copies only this one, and the locks the others hold)."""
        if not self.interim_in_worker:
            t_cpu = time.process_time()
            try:
                self.on_interim()  # type: ignore[misc]
            except Exception:
                log.exception("interim summary failed")
            cpu_s = time.process_time() - t_cpu
        else:
            if self._worker is None:
                self._worker = InterimWorker(self.on_interim)  # type: ignore[arg-type]
            if not self._worker.request():
                log.info("interim flush skipped: the previous one is still running")
            cpu_s = self._worker.last_cpu_s
        # it re-reads the sample file's new rows: keep it under 2 % of a core on long jobs
        return now + max(self.interim_every_s, 50 * cpu_s)

    def _wait(self, t: float) -> bool:
        """Sleep until clock ``t``, :meth:`stop`, or the probe's end-of-job descriptor firing (then
        True). One ``poll()``; a signal's handler (:meth:`stop`) wakes it through the self-pipe."""
        p = self._poller
        w = getattr(self.probe, "wakeup", None)
        fd_ev = w() if w is not None else None
        if fd_ev is not None and self.clock() < self._mute_until:  # muted: wait without it until the mute ends
            t = min(t, self._mute_until)
            fd_ev = None
        if fd_ev != self._registered:  # one poll object for the loop's life; re-registered on change
            if self._registered is not None:
                try:
                    p.unregister(self._registered[0])
                except KeyError:
                    pass
            if fd_ev is not None:
                p.register(fd_ev[0], fd_ev[1])
            self._registered = fd_ev
        while not self._stop:
            left = t - self.clock()
            if left <= 0:
                return False
            ev = p.poll(min(left, 3600.0) * 1000.0)
            if not ev:
                continue  # timed out: the loop's test ends it (no generator per wake-up)
            if any(fd == self._wake_r for fd, _ in ev):
                return False
            # the probe's descriptor: one that keeps firing must not spin the loop, ignore it a while
            self._mute_until = self.clock() + max(self.poll_s, LOOK_S)
            return True
        return False

    def _close(self) -> None:
        close_readers(self.readers)

    def __del__(self) -> None:
        # the self-pipe is closed only here: stop() may still be called after run() returned, and
        # writing to a closed (maybe reused) descriptor number must never happen
        for fd in (getattr(self, "_wake_r", -1), getattr(self, "_wake_w", -1)):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

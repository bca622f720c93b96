"""The sampling scheduler: polls the job's usage and the readers, writes the sample file.

Knows nothing of Slurm: the job is a :class:`UsageProbe` (a Slurm job cgroup, or a process tree
for ``slurm-energy run -- CMD`` / attach by PID). Timing:

* every ``poll_s`` (0.25 s): the job's usage (cheap: one cgroup file read), so the job's CPU time
  is known to within 0.25 s of its end even though the cgroup is removed before the Epilog runs;
* every ``interval_s`` (default 5 s): a full sample (usage + node counters + all readers), one
  flushed line in the sample file;
* when the job's cgroup disappears: a full sample at once (kind ``cgroup_gone``);
* on SIGTERM/SIGINT (the Epilog): a last full sample (kind ``final``), then exit 0;
* by itself once the job is gone (no cgroup and no job PIDs) for ``gone_after_s`` (60 s), so a
  lost Epilog leaves no process behind;
* every ``interim_every_s`` (60 s; longer when one call costs more than 2 % of that in CPU)
  ``on_interim()`` is called (the Slurm glue stores the job's energy so far).
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

from slurm_energy.sampling.nodestats import read_node_stats
from slurm_energy.sampling.readers.base import Reader, Reading
from slurm_energy.sampling.samplefile import SampleWriter

log = logging.getLogger("slurm_energy.sampler")


@dataclass
class Usage:
    """The job's usage at one instant (cumulative CPU time, s; memory, bytes)."""

    cpu_time_s: Optional[float]
    mem_bytes: Optional[int]
    max_mem_bytes: Optional[int]
    pids: list[int]
    source: str

    def to_dict(self) -> dict:
        return {"cpu_time_s": self.cpu_time_s, "mem_bytes": self.mem_bytes, "max_mem_bytes": self.max_mem_bytes,
                "pids": self.pids[:256], "source": self.source}


class UsageProbe(Protocol):
    """What the sampler measures the job by."""

    def poll(self, full: bool = True) -> Optional[Usage]:
        """Usage now, or None if the job cannot be seen right now. ``full=False`` (the fast 0.25 s
        poll) may skip the PID list; the previous sample's PIDs are kept then."""

    def gone(self) -> bool:
        """True once the job has ended (no cgroup and no PIDs)."""


class Sampler:
    """Runs until stopped by a signal, by :meth:`stop`, or by the job being gone for a while."""

    def __init__(self, readers: list[Reader], probe: UsageProbe, writer: SampleWriter, interval_s: float = 5.0,
                 poll_s: float = 0.25, gone_after_s: float = 60.0, interim_every_s: float = 60.0,
                 on_interim: Optional[Callable[[], None]] = None, clock: Callable[[], float] = time.time):
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
        self.last_usage: Optional[Usage] = None
        self._stop = False
        self._seen_job = False
        self.n_samples = 0
        #: epoch s at which the job was first seen gone, when the loop ended by itself (no stop()):
        #: no Epilog came within ``gone_after_s``; None when stopped (a signal: the Epilog)
        self.gone_at: Optional[float] = None

    def stop(self, *_args) -> None:
        """Ask the loop to take its final sample and return (safe from a signal handler)."""
        self._stop = True

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT/SIGHUP -> :meth:`stop`."""
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self.stop)

    def _read_all(self) -> list[dict]:
        out: list[dict] = []
        for r in self.readers:
            try:
                out.extend(x.to_dict() for x in r.read())
            except Exception as e:  # a reader must not raise; if one does, record it, keep going
                log.exception("reader %s failed", r.name)
                out.append(Reading(r.device_class, r.name, "unavailable", flags=[f"reader_error:{type(e).__name__}"]).to_dict())
        return out

    def sample(self, kind: str = "sample") -> dict:
        """Take one full sample and append it to the sample file; returns the row.

        The job's usage is polled right before the node's counters, so the job's CPU-time delta and
        the node's busy delta cover the same instants (the CPU share's numerator and denominator).
        """
        if kind != "cgroup_gone":
            self._poll()
        try:
            node = read_node_stats().to_dict()
        except OSError:
            node = {}
        row = {"t": self.clock(), "kind": kind,
               "job": self.last_usage.to_dict() if self.last_usage else None,
               "node": node, "readings": self._read_all()}
        self.writer.write(row)
        self.n_samples += 1
        return row

    def _poll(self, full: bool = True) -> None:
        u = self.probe.poll(full)
        if u is not None and not u.pids and self.last_usage is not None:
            u.pids = self.last_usage.pids
        if u is not None:
            self.last_usage = u
            self._seen_job = True

    def run(self) -> int:
        """The loop. Returns the number of samples written."""
        self.sample("start")  # sample() polls the job's usage first
        next_sample = self.clock() + self.interval_s
        # the first interim soon (2 intervals), so a running job shows up early; then every interim_every_s
        next_interim = self.clock() + min(self.interim_every_s, 2 * self.interval_s)
        gone_since: Optional[float] = None
        announced_gone = False
        while not self._stop:
            self._sleep_until(min(next_sample, self.clock() + self.poll_s))
            if self._stop:
                break
            self._poll(full=False)
            now = self.clock()
            if self.probe.gone():
                if self._seen_job and not announced_gone:
                    self.sample("cgroup_gone")  # the job's last usage, before anything else is lost
                    announced_gone = True
                gone_since = gone_since or now
                if now - gone_since >= self.gone_after_s:
                    log.info("job gone for %.0f s: sampler exits by itself", now - gone_since)
                    self.gone_at = gone_since
                    break
            else:
                gone_since = None
            if now >= next_sample:
                self.sample()
                next_sample += self.interval_s * max(1, int((now - next_sample) // self.interval_s) + 1)
            if self.on_interim and now >= next_interim:
                t_cpu = time.process_time()
                try:
                    self.on_interim()
                except Exception:
                    log.exception("interim summary failed")
                # it re-reads the whole sample file: keep it under 2 % of a core on long jobs
                next_interim = now + max(self.interim_every_s, 50 * (time.process_time() - t_cpu))
        self.sample("final")
        for r in self.readers:
            try:
                r.close()
            except Exception:
                log.exception("closing reader %s", r.name)
        return self.n_samples

    def _sleep_until(self, t: float) -> None:
        # short slices so a signal is acted on within 0.2 s
        while not self._stop:
            left = t - self.clock()
            if left <= 0:
                return
            time.sleep(min(0.2, left))

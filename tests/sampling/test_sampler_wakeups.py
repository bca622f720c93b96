"""When the sampler wakes (issue 12): only for samples, its end-of-job descriptor and stop(); the
in-between CPU-time polls only for probes that cannot see the job's end; fsync cadence."""

import math
import os
import threading
import time

from slurm_energy.core import JobUsage as Usage
from slurm_energy.sampling.samplefile import SampleWriter
from slurm_energy.sampling.sampler import LOOK_S, Sampler
from tests.helpers.samplefile_rows import read_samples


class Probe:
    """A job burning CPU at 1 s/s from t0; ``end()`` stops it (and fires the wake-up pipe)."""

    def __init__(self, needs_tail_poll=True, with_fd=False):
        self.needs_tail_poll = needs_tail_poll
        self.t0 = time.monotonic()
        self.t_end = None
        self.readable_after_end = with_fd  # v2: populated 0 comes before the removal
        self.polls = 0
        self._r, self._w = os.pipe() if with_fd else (None, None)

    def cpu(self):
        return (self.t_end or time.monotonic()) - self.t0

    def poll(self, full=True):
        self.polls += 1
        if self.t_end is not None and not self.readable_after_end:
            return None  # removed with the job (a cgroup v1 directory)
        return Usage(self.cpu(), 1, 1, [1], "fake")

    def gone(self):
        return self.t_end is not None

    def wakeup(self):
        import select

        return None if self._r is None or self.gone() else (self._r, select.POLLIN)

    def end(self):
        self.t_end = time.monotonic()
        if self._w is not None:
            os.write(self._w, b"x")


def _run(s):
    th = threading.Thread(target=s.run)
    th.start()
    return th


def test_no_polls_between_samples_when_the_probe_sees_the_end(tmp_path):
    probe = Probe(needs_tail_poll=False)
    s = Sampler([], probe, SampleWriter(str(tmp_path / "s"), fsync=False), interval_s=0.25)
    th = _run(s)
    time.sleep(1.1)
    s.stop()
    th.join(5)
    rows = list(read_samples(str(tmp_path / "s")))
    assert s.n_polls == 0
    assert probe.polls == len(rows)  # one poll per row: start, ~4 samples, final; nothing else
    assert 5 <= len(rows) <= 7


def test_stop_wakes_a_long_sleep_at_once(tmp_path):
    s = Sampler([], Probe(needs_tail_poll=False), SampleWriter(str(tmp_path / "s"), fsync=False), interval_s=60)
    th = _run(s)
    time.sleep(0.3)
    t = time.monotonic()
    s.stop()  # as the SIGTERM handler does: through the self-pipe
    th.join(5)
    assert time.monotonic() - t < 0.5
    assert [r["kind"] for r in read_samples(str(tmp_path / "s"))] == ["start", "final"]


def test_end_of_job_descriptor_gives_the_exact_last_cpu_time(tmp_path):
    probe = Probe(needs_tail_poll=False, with_fd=True)
    s = Sampler([], probe, SampleWriter(str(tmp_path / "s"), fsync=False), interval_s=60, gone_after_s=0)
    th = _run(s)
    time.sleep(0.7)
    probe.end()
    th.join(5)
    assert not th.is_alive() and time.monotonic() - probe.t_end < 1.0  # woken, not after 60 s
    rows = list(read_samples(str(tmp_path / "s")))
    gone = next(r for r in rows if r["kind"] == "cgroup_gone")
    # by hand: the fake job burns 1 CPU-s per s from t0 to end(): its CPU time is t_end - t0
    assert abs(gone["job"]["cpu_time_s"] - (probe.t_end - probe.t0)) < 1e-6
    assert s.n_polls == 1  # the one poll the descriptor asked for


def test_tail_poll_period_grows_with_the_jobs_age(tmp_path):
    s = Sampler([], Probe(), SampleWriter(str(tmp_path / "s"), fsync=False), interval_s=5.0)
    assert s._tail_poll_s(1000.0) == LOOK_S  # job not seen yet: look every 0.25 s
    s._t_seen = 1000.0
    assert s._tail_poll_s(1000.5) == 0.02  # 2 % of 0.5 s = 0.01 s: the 0.02 s floor
    assert abs(s._tail_poll_s(1010.0) - 0.2) < 1e-9  # 2 % of 10 s
    assert abs(s._tail_poll_s(1200.0) - 4.0) < 1e-9  # 2 % of 200 s
    assert s._tail_poll_s(1250.0) == math.inf  # 5 s = the interval: the samples' polls suffice
    s.probe.needs_tail_poll = False
    assert s._tail_poll_s(1010.0) == math.inf


def test_tail_polls_bound_the_missed_cpu_time(tmp_path):
    probe = Probe(needs_tail_poll=True)
    s = Sampler([], probe, SampleWriter(str(tmp_path / "s"), fsync=False), interval_s=60, gone_after_s=0)
    th = _run(s)
    time.sleep(1.0)
    probe.end()
    th.join(5)
    assert not th.is_alive()
    gone = next(r for r in read_samples(str(tmp_path / "s")) if r["kind"] == "cgroup_gone")
    true_cpu = probe.t_end - probe.t0  # by hand, as above (~1.0 CPU-s)
    # the last poll was at most max(0.02 s, 2 % x 1 s) = 0.02 s (+ scheduling) before the end
    assert 0 <= true_cpu - gone["job"]["cpu_time_s"] <= 0.03 * true_cpu + 0.02


class RecWriter:
    def __init__(self):
        self.fsync = True
        self.calls = []

    def write_sample(self, t, kind, job, node, readings, sync=True):  # SampleWriter's: fsync'ed if sync and fsync
        self.calls.append((kind, sync and self.fsync))


def test_fsync_only_every_fsync_every_s_and_for_the_boundary_rows():
    w = RecWriter()
    s = Sampler([], Probe(needs_tail_poll=False), w, interval_s=0.1, fsync_every_s=0.35)
    th = _run(s)
    time.sleep(1.0)
    s.stop()
    th.join(5)
    assert w.fsync is True  # the writer's own setting is left as it was
    assert w.calls[0] == ("start", True) and w.calls[-1] == ("final", True)
    synced = [k for k, f in w.calls[1:-1] if f]
    assert 1 <= len(synced) <= 3 and len(w.calls) - 2 >= 7  # ~9 samples in 1 s, fsync'ed ~every 0.35 s

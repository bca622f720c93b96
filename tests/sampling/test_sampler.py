"""The sampling scheduler with real files and a scripted job probe."""

import threading
import time

from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading
from slurm_energy.sampling.samplefile import SampleWriter, read_samples
from slurm_energy.sampling.sampler import Sampler, Usage


class CountingReader(Reader):
    device_class = "cpu"
    name = "fake"

    def __init__(self):
        self.n = 0

    def devices(self):
        return [DeviceStatic("cpu", "fake0")]

    def read(self):
        self.n += 1
        return [Reading("cpu", "fake0", "counter", energy_uj=self.n * 1000)]


class BrokenReader(CountingReader):
    name = "broken"

    def read(self):
        raise RuntimeError("boom")


class Probe:
    def __init__(self):
        self.cpu = 0.0
        self.alive = True

    def poll(self, full=True):
        if not self.alive:
            return None
        self.cpu += 0.1
        return Usage(self.cpu, 1000, 2000, [1], "cgroup-v1")

    def gone(self):
        return not self.alive


def test_samples_flushed_every_interval_and_final_on_stop(tmp_path):
    path = str(tmp_path / "s.jsonl")
    probe = Probe()
    s = Sampler([CountingReader(), BrokenReader()], probe, SampleWriter(path, fsync=False), interval_s=0.2, poll_s=0.05)
    th = threading.Thread(target=s.run)
    th.start()
    time.sleep(0.7)
    rows_while_running = list(read_samples(path))  # flushed: readable while the sampler runs
    s.stop()
    th.join(5)
    assert not th.is_alive()
    rows = list(read_samples(path))
    assert len(rows_while_running) >= 3  # start + >= 2 samples at 0.2 s in 0.7 s
    assert rows[0]["kind"] == "start" and rows[-1]["kind"] == "final"
    ts = [r["t"] for r in rows]
    assert ts == sorted(ts)
    # a reader that raises is recorded as unavailable, the others go on
    broken = [x for x in rows[-1]["readings"] if x["device_id"] == "broken"]
    assert broken[0]["method"] == "unavailable" and broken[0]["flags"] == ["reader_error:RuntimeError"]
    assert rows[-1]["job"]["source"] == "cgroup-v1" and rows[-1]["job"]["cpu_time_s"] > 0


def test_job_gone_sample_then_exits_by_itself(tmp_path):
    path = str(tmp_path / "s.jsonl")
    probe = Probe()
    s = Sampler([CountingReader()], probe, SampleWriter(path, fsync=False), interval_s=0.2, poll_s=0.05,
                gone_after_s=0.3)
    th = threading.Thread(target=s.run)
    th.start()
    time.sleep(0.3)
    last_cpu = probe.cpu
    probe.alive = False
    th.join(5)
    assert not th.is_alive()  # no Epilog needed: it ended by itself
    rows = list(read_samples(path))
    kinds = [r["kind"] for r in rows]
    assert "cgroup_gone" in kinds and kinds[-1] == "final"
    gone = rows[kinds.index("cgroup_gone")]
    assert abs(gone["job"]["cpu_time_s"] - last_cpu) < 1e-9  # the last usage seen, kept


def test_torn_last_line_is_skipped(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"t": 1, "kind": "sample"}\n{"t": 2, "ki')
    assert [r["t"] for r in read_samples(str(p))] == [1]


def test_bad_interval_names_setting(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="sampling.interval_s"):
        Sampler([], Probe(), SampleWriter(str(tmp_path / "x"), fsync=False), interval_s=0)


def test_stop_signal_during_an_interim_flush_cuts_it_short(tmp_path):
    """The Epilog's TERM waits 1 s for the final sample; an interim flush (the first one imports
    the store and writes it: ~1 s) must not hold it up. CI saw a 2-node job end during its first
    flush: the Epilog SIGKILLed the sampler and the record was partial."""
    import os
    import signal

    path = str(tmp_path / "s.jsonl")
    entered: list[float] = []

    def slow_flush():
        entered.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)  # the Epilog's TERM arrives during the flush
        time.sleep(5.0)  # a flush that would take 5 s
        entered.append(-1.0)  # never reached

    s = Sampler([CountingReader()], Probe(), SampleWriter(path, fsync=False), interval_s=0.1, poll_s=0.05,
                interim_every_s=0.1, on_interim=slow_flush)
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        s.install_signal_handlers()
        t0 = time.monotonic()
        s.run()  # in the main thread, where Python runs signal handlers
        took = time.monotonic() - t0
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    assert len(entered) == 1  # the flush began and was cut short
    assert took < 2.0  # not the flush's 5 s
    rows = list(read_samples(path))
    assert rows[-1]["kind"] == "final"  # the final sample was still written

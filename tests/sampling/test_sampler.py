"""The sampling scheduler with real files and a scripted job probe."""

import threading
import time

from slurm_energy.core import JobUsage as Usage
from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading
from slurm_energy.sampling.samplefile import SampleWriter
from slurm_energy.sampling.sampler import Sampler
from tests.helpers.samplefile_rows import read_samples


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


def test_term_is_answered_while_the_interim_flush_blocks_in_a_locked_sqlite_store(tmp_path):
    """The Epilog's TERM waits 1 s for the final sample, then SIGKILLs the sampler. A burst of 34
    jobs saw an interim flush (its store write) hold the sampler past that: the signal handler
    cannot run while sqlite3 busy-waits in C. The flush now runs in a forked worker: here it blocks
    on a store whose write lock another connection holds (sqlite3 timeout 30 s), the TERM arrives
    meanwhile, and the sampler still writes its final sample and returns within the Epilog's 1 s;
    the worker is killed and its cut-off write leaves the store as it was (no row)."""
    import os
    import signal
    import sqlite3

    path, db = str(tmp_path / "s.jsonl"), str(tmp_path / "store.db")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE jobs (job TEXT, status TEXT)")
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the store's write lock
    sampler_pid = os.getpid()

    def blocking_flush():
        c = sqlite3.connect(db, timeout=30.0, isolation_level=None)
        os.kill(sampler_pid, signal.SIGTERM)  # the Epilog's TERM comes while the store blocks
        c.execute("INSERT INTO jobs VALUES ('1', 'running')")  # busy-waits in C for 30 s

    s = Sampler([CountingReader()], Probe(), SampleWriter(path, fsync=False), interval_s=0.1, poll_s=0.05,
                interim_every_s=0.1, on_interim=blocking_flush, interim_in_worker=True)
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        s.install_signal_handlers()
        t0 = time.monotonic()
        s.run()  # in the main thread, where Python runs signal handlers
        took = time.monotonic() - t0
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    worker = s._worker.killed_pid if s._worker is not None else None
    first_interim_s = 2 * 0.1  # the first flush is due 2 intervals after the start
    assert took < first_interim_s + 1.0  # inside the Epilog's 1 s after its TERM, not the store's 30 s
    rows = list(read_samples(path))
    assert rows[-1]["kind"] == "final"
    assert s.stop_signal == signal.SIGTERM  # kept for the Slurm glue (slurm.sampler_end)
    assert worker is not None  # a worker ran the flush and was killed at the stop
    for _ in range(500):  # SIGKILLed: it ends (reaped here if the sampler had not yet)
        try:
            if os.waitpid(worker, os.WNOHANG)[0] == worker:
                break
        except ChildProcessError:
            break
        time.sleep(0.01)
    else:
        raise AssertionError(f"interim worker {worker} still running")
    assert holder.execute("SELECT COUNT(*) FROM jobs").fetchone() == (0,)  # the cut-off write left nothing
    holder.execute("ROLLBACK")


def test_interim_flushes_run_in_one_forked_worker_that_keeps_its_state(tmp_path):
    """The worker is forked once and serves every flush (the running summary's incremental state
    lives there); a flush still running when the next is due is skipped, not queued."""
    import os

    path, out = str(tmp_path / "s.jsonl"), str(tmp_path / "flushes")
    state = {"n": 0}

    def flush():
        state["n"] += 1  # the worker's memory: 1, 2, 3... if one process serves them all
        with open(out, "a") as f:
            f.write(f"{os.getpid()} {state['n']}\n")

    def gone_after_3_flushes():  # the job ends once 3 flushes were written
        try:
            with open(out) as f:
                return len(f.read().splitlines()) >= 3
        except FileNotFoundError:
            return False

    probe = Probe()
    probe.gone = gone_after_3_flushes  # type: ignore[method-assign]
    s = Sampler([CountingReader()], probe, SampleWriter(path, fsync=False), interval_s=0.05, poll_s=0.05,
                interim_every_s=0.05, on_interim=flush, gone_after_s=0.0, interim_in_worker=True)
    s.run()
    with open(out) as f:
        lines = [ln.split() for ln in f.read().splitlines()]
    assert [int(n) for _, n in lines[:3]] == [1, 2, 3]  # state kept between flushes
    assert len({pid for pid, _ in lines}) == 1 and int(lines[0][0]) != os.getpid()  # one forked worker


def test_stop_keeps_the_first_signal_and_none_without_one(tmp_path):
    import signal

    s = Sampler([], Probe(), SampleWriter(str(tmp_path / "a.jsonl"), fsync=False))
    s.stop()
    assert s.stop_signal is None  # stopped by a call (run's end, a test), not a signal
    s = Sampler([], Probe(), SampleWriter(str(tmp_path / "b.jsonl"), fsync=False))
    s.stop(signal.SIGHUP, None)
    s.stop(signal.SIGTERM, None)
    assert s.stop_signal == signal.SIGHUP

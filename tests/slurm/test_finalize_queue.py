"""The node's finalizer takes the queue of ended jobs (issue 24): one process finalizes a burst's
jobs in turn; the Epilog starts one only when none runs or none stands by; a job already finished
(by ``collect``) or taken too often is dropped from the queue; a killed runner's job is done again by
the next one, and nothing is lost."""

from __future__ import annotations

import fcntl
import json
import os

import pytest
from test_no_data import T0, _row, _spool, rapl

from slurm_energy.slurm.attempt import enqueue_finalize, finalize_queue_dir, needs_runner
from slurm_energy.slurm.jobend import finish, publish
from slurm_energy.slurm.jobend import queue as fq
from slurm_energy.store import open_store
from tests.fakes.slurm_facts import no_slurm  # noqa: F401  (a fixture)


@pytest.fixture()
def site(tmp_path, monkeypatch, no_slurm):  # no slurmctld or slurmdbd here
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: c1\npaths:\n  spool_dir: {tmp_path}/spool\n  spool_fallback_dir: {tmp_path}/spool2\n"
                    f"  results_dir: {tmp_path}/results\n"
                    f"  store_url: sqlite:///{tmp_path}/jobs.db\n  log_dir: {tmp_path}/log\n"
                    "outputs:\n  prometheus:\n    enabled: false\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    return tmp_path


def _job(tmp_path, job_id: str, e0_uj: int, e1_uj: int):
    """A job attempt on n1 whose RAPL package went from e0 to e1 µJ over 10 s, the job all of the busy CPU."""
    spool, _ = _spool(tmp_path, [_row(0, "prolog", 0.0, 0.0, rapl(e0_uj)), _row(10, "final", 4.0, 4.0, rapl(e1_uj))],
                      job_id=job_id)
    return spool


def _hold(path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_one_runner_finalizes_every_queued_job_in_turn_and_empties_the_queue(site):
    a, b = _job(site, "71", 5_000_000, 65_000_000), _job(site, "72", 1_000_000, 31_000_000)
    q = enqueue_finalize(a, T0 + 10, "0:0", "terminated")
    assert enqueue_finalize(b, T0 + 10, "0:0", "terminated") == q == finalize_queue_dir(str(site / "spool"), "n1")
    assert [os.path.basename(p) for p in fq.entries(q)] == ["71-r0", "72-r0"]
    started: list[list[str]] = []
    assert fq.run_queue(q, "n1", linger_s=0, start=started.append) == 2
    assert started == [["-m", "slurm_energy.slurm.jobend", "finalize-queue", q, "n1"]]  # its standby, once
    assert fq.entries(q) == []
    assert os.path.exists(a.finalized) and os.path.exists(b.finalized)
    store = open_store(f"sqlite:///{site}/jobs.db", readonly=True)
    # 65 J - 5 J and 31 J - 1 J, the job's share of busy CPU 4/4
    assert [(r.job_id, r.nodes[0].devices[0].energy_j) for j in ("71", "72") for r in store.get_job(j)] == [
        ("71", 60.0), ("72", 30.0)]


def test_the_epilog_starts_a_finalizer_only_when_none_runs_or_none_stands_by(tmp_path):
    q = str(tmp_path)
    assert needs_runner(q)  # nobody
    runner = _hold(tmp_path / fq.RUNNER_LOCK)
    assert needs_runner(q)  # a runner, no standby: one is started (it waits as the standby)
    standby = _hold(tmp_path / fq.STANDBY_LOCK)
    assert not needs_runner(q)  # both: the runner will see the entry, or its standby will
    os.close(runner)  # the runner died (the kernel drops its lock, even after SIGKILL)
    assert needs_runner(q)
    os.close(standby)


def test_a_third_finalizer_exits_at_once_and_leaves_the_queue_to_the_runner(site):
    q = enqueue_finalize(_job(site, "73", 5_000_000, 65_000_000), T0 + 10, "0:0", "terminated")
    fds = [_hold(os.path.join(q, fq.RUNNER_LOCK)), _hold(os.path.join(q, fq.STANDBY_LOCK))]
    assert fq.run_queue(q, "n1", linger_s=0, start=lambda argv: None) == 0
    assert len(fq.entries(q)) == 1  # untouched: the runner holding the lock takes it
    for fd in fds:
        os.close(fd)


def test_a_job_already_finished_is_dropped_and_one_taken_too_often_is_left_to_collect(site):
    done, bad = _job(site, "74", 5_000_000, 65_000_000), _job(site, "75", 5_000_000, 65_000_000)
    enqueue_finalize(done, T0 + 10, "0:0", "terminated")
    q = enqueue_finalize(bad, T0 + 10, "0:0", "terminated")
    open(done.finalized, "w").close()  # collect finished it while it waited in the queue
    entry = os.path.join(q, "75-r0")
    with open(entry) as f:
        e = json.load(f)
    with open(entry, "w") as f:  # three runners were killed while finalizing it
        json.dump(dict(e, attempts=fq.MAX_ATTEMPTS), f)
    assert fq.run_queue(q, "n1", linger_s=0, start=lambda argv: None) == 0
    assert fq.entries(q) == []
    assert not os.path.exists(bad.finalized)  # collect's to finish: the spool is the queue of record
    assert any("taken 3 times and never finished" in x for x in bad.read_errors())
    assert not os.path.exists(site / "jobs.db")  # neither finalized again here: nothing stored


def test_a_job_whose_runner_was_killed_mid_way_is_finalized_by_the_next_runner(site):
    sp = _job(site, "76", 5_000_000, 65_000_000)
    q = enqueue_finalize(sp, T0 + 10, "0:0", "terminated")
    entry = os.path.join(q, "76-r0")
    with open(entry) as f:
        e = json.load(f)
    with open(entry, "w") as f:  # as a runner SIGKILLed after taking it leaves it
        json.dump(dict(e, attempts=1), f)
    assert fq.run_queue(q, "n1", linger_s=0, start=lambda argv: None) == 1
    (rec,) = open_store(f"sqlite:///{site}/jobs.db", readonly=True).get_job("76")
    assert rec.nodes[0].devices[0].energy_j == 60.0 and fq.entries(q) == []


def test_the_runner_waits_for_jobs_that_end_while_it_lingers(site, monkeypatch):
    import time as real

    first, late = _job(site, "77", 5_000_000, 65_000_000), _job(site, "78", 5_000_000, 35_000_000)
    q = enqueue_finalize(first, T0 + 10, "0:0", "terminated")

    class Clock:  # the runner's clock: each poll's sleep advances it; the next Epilog queues during the first
        now, naps = 0.0, 0

        def monotonic(self):
            return self.now

        def sleep(self, s):
            self.now += s
            self.naps += 1
            if self.naps == 1:
                enqueue_finalize(late, T0 + 12, "0:0", "terminated")

        time, strftime = real.time, real.strftime

    clock = Clock()
    monkeypatch.setattr(fq, "time", clock)
    assert fq.run_queue(q, "n1", linger_s=5.0, start=lambda argv: None) == 2
    assert os.path.exists(late.finalized)
    assert clock.naps == 1 + 10  # the one poll that found the late job, then 5 s of 0.5 s polls: then it exits


def test_a_marker_the_full_spool_refused_is_written_once_there_is_room(site, monkeypatch):
    # the record is stored, but the spool has no room for finalized-n1.done: without the marker
    # collect would finish the job a second time; the runner retries it between jobs
    from slurm_energy.slurm import attempt as spool_mod

    sp = _job(site, "79", 5_000_000, 65_000_000)
    q = enqueue_finalize(sp, T0 + 10, "0:0", "terminated")
    real, refused = spool_mod.write_private, []

    def write_private(path, text):
        if path == sp.finalized and len(refused) < 2:  # ENOSPC twice, then the spool was freed
            refused.append(path)
            raise OSError(28, "No space left on device")
        real(path, text)

    monkeypatch.setattr(spool_mod, "write_private", write_private)
    assert fq.run_queue(q, "n1", linger_s=0, start=lambda argv: None) == 1
    assert refused == [sp.finalized] * 2 and os.path.exists(sp.finalized)
    (rec,) = open_store(f"sqlite:///{site}/jobs.db", readonly=True).get_job("79")
    assert rec.nodes[0].devices[0].energy_j == 60.0


def test_a_single_job_finalizer_retries_its_marker_for_a_while_then_gives_up(tmp_path):
    path = tmp_path / "full" / "finalized-n1.done"  # its directory is missing: every write fails
    naps: list[float] = []
    assert not publish.MarkerPending(str(path)).retry(12.0, every_s=5.0, sleep=naps.append)
    assert naps == [5.0, 5.0]  # tries at 0, 5 and 10 s; a fourth would pass the 12 s
    (tmp_path / "full").mkdir()
    assert publish.MarkerPending(str(path)).retry(12.0, every_s=5.0, sleep=naps.append) and path.exists()


def test_a_user_whose_report_writer_hung_has_their_next_reports_written_apart(tmp_path, monkeypatch):
    # the queue waits for a user's hung writer once (safe_write's timeout), not once per job of theirs
    import logging
    import time
    import types

    from slurm_energy.reporting import safe_write

    monkeypatch.setattr(safe_write, "REPORT_TIMEOUT_S", 0.2)
    monkeypatch.setattr(fq, "_SLOW_WRITERS", {})
    (tmp_path / "context-n1.json").write_text(json.dumps({"uid": 4242}))
    sp = types.SimpleNamespace(context=str(tmp_path / "context-n1.json"), dir=str(tmp_path))
    log = logging.getLogger("test")
    ran: list[int] = []
    fq.run_reports(sp, [lambda: (time.sleep(0.25), ran.append(os.getpid()))], log)  # ran into the timeout
    assert ran == [os.getpid()] and 4242 in fq._SLOW_WRITERS
    done = tmp_path / "written-by"
    t0 = time.monotonic()
    fq.run_reports(sp, [lambda: (time.sleep(0.5), done.write_text(str(os.getpid())))], log)
    assert time.monotonic() - t0 < 0.4  # not waited for: the next job of the queue goes on
    for _ in range(100):
        if done.exists() and done.read_text():
            break
        time.sleep(0.05)
    assert int(done.read_text()) != os.getpid()  # written by a child of the runner
    fq._reap()


def test_a_runner_whose_queue_dir_was_mounted_over_stops_and_leaves_it_to_the_new_runner(site):
    # seen in the fault run: a runner still lingering when a tmpfs was mounted over the spool went
    # on listing the new queue (by path) beside the runner the Epilogs started there: one job twice
    a, b = _job(site, "80", 5_000_000, 65_000_000), _job(site, "81", 5_000_000, 65_000_000)
    q = enqueue_finalize(a, T0 + 10, "0:0", "terminated")
    enqueue_finalize(b, T0 + 10, "0:0", "terminated")
    lock = os.path.join(q, fq.RUNNER_LOCK)

    def start(argv):  # when it starts its standby, the queue dir's lock file is replaced under it
        os.unlink(lock)
        open(lock, "w").close()

    assert fq.run_queue(q, "n1", linger_s=0, start=start) == 0
    assert len(fq.entries(q)) == 2  # both left for the runner of the new lock
    assert fq.run_queue(q, "n1", linger_s=0, start=lambda argv: None) == 2


def test_an_entry_the_read_only_spool_keeps_is_finalized_once_not_in_a_loop(site, monkeypatch):
    # seen in the fault run: the spool went read-only after the Epilog queued the job; the entry
    # could not be removed and the runner finalized it again and again for 40 s
    sp = _job(site, "82", 5_000_000, 65_000_000)
    q = enqueue_finalize(sp, T0 + 10, "0:0", "terminated")
    monkeypatch.setattr(fq, "_remove", lambda path: None)  # unlink refused (EROFS)
    calls: list[str] = []
    real = finish.finalize_main
    monkeypatch.setattr(finish, "finalize_main", lambda *a, **kw: calls.append(a[0]) or real(*a, **kw))

    class Clock:  # 3 s of linger in 0.5 s polls, no real sleeping
        now = 0.0

        def monotonic(self):
            return self.now

        def sleep(self, s):
            self.now += s

        time, strftime = __import__("time").time, __import__("time").strftime

    monkeypatch.setattr(fq, "time", Clock())
    assert fq.run_queue(q, "n1", linger_s=3.0, start=lambda argv: None) == 1
    assert calls == [sp.dir]  # once, though its entry is still there
    assert len(fq.entries(q)) == 1


def _age(spool, s: float = 60.0) -> None:
    """Every file of the attempt (and its directory) last changed ``s`` seconds ago."""
    import time

    t = time.time() - s
    for name in os.listdir(spool.dir):
        os.utime(os.path.join(spool.dir, name), (t, t))
    os.utime(spool.dir, (t, t))


@pytest.fixture()
def ended(no_slurm):
    """slurmdbd says every job has ended (COMPLETED), slurmctld knows none: no client asked."""
    no_slurm.every_row = {"job_state": "COMPLETED"}


def _fake_hook(*argv: str):
    """A live process whose argv reads as one of the hooks' (``python -c <sleep> -m
    slurm_energy.slurm.detached ARGV...``): what busy() finds in /proc."""
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "slurm_energy.slurm.detached",
                          *argv])
    for _ in range(200):  # Popen may return before the exec: /proc shows the new argv only after it
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            if b"slurm_energy.slurm.detached" in f.read():
                break
        time.sleep(0.01)
    return p


def test_the_runner_finishes_an_attempt_whose_single_job_finalizer_was_killed(site, ended):
    # issue 24: a job the Epilog could not queue (a full spool) got a finalizer of its own, which was
    # SIGKILLed; no entry, no marker. The node's next runner sweeps it: collect finds nothing left
    killed, queued = _job(site, "83", 5_000_000, 65_000_000), _job(site, "84", 1_000_000, 31_000_000)
    _age(killed)  # untouched for 60 s: older than SWEEP_AGE_S (20 s)
    q = enqueue_finalize(queued, T0 + 10, "0:0", "terminated")
    assert fq.run_queue(q, "n1", linger_s=0, start=lambda argv: None) == 1  # one from the queue ...
    assert os.path.exists(killed.finalized) and os.path.exists(queued.finalized)  # ... and one by the sweep
    store = open_store(f"sqlite:///{site}/jobs.db", readonly=True)
    (rec,) = store.get_job("83")
    assert rec.nodes[0].devices[0].energy_j == 60.0  # 65 J - 5 J, its whole measurement kept
    assert any(e.endswith("finalizer did not finish (killed or never started); finished by the node finalizer's sweep")
               for e in rec.errors)
    assert [r.nodes[0].devices[0].energy_j for r in store.get_job("84")] == [30.0]


def test_the_sweep_leaves_alone_what_a_process_is_at_work_on(site, ended):
    from slurm_energy.slurm.config_cache import load_config
    from slurm_energy.slurm.jobend.recover import sweep_node
    from slurm_energy.slurm.processes import busy

    young, working, waiting = (_job(site, j, 5_000_000, 65_000_000) for j in ("85", "86", "87"))
    _age(working)
    _age(waiting)
    enqueue_finalize(waiting, T0 + 10, "0:0", "terminated")  # in the queue: its runner takes it
    other = _job(site, "88", 5_000_000, 65_000_000)
    other_node = _job(site, "89", 5_000_000, 65_000_000)
    os.rename(other_node.context, other_node.context.replace("context-n1", "context-n2"))  # n2's attempt
    _age(other)
    _age(other_node)
    p = _fake_hook("finalize", working.dir, "n1")  # its own finalizer, slow but alive
    try:
        dirs, _ = busy([str(site / "spool")])
        assert {working.dir, waiting.dir} <= dirs and other.dir not in dirs
        lines = sweep_node(load_config([]), "n1", __import__("time").time())
    finally:
        p.kill()
        p.wait()
    assert lines == [f"finished 88 attempt 0 on n1 ({other.dir}, sampler no_epilog)"]  # only the one nobody had
    assert not any(os.path.exists(sp.finalized) for sp in (young, working, waiting))
    assert [r.job_id for r in open_store(f"sqlite:///{site}/jobs.db", readonly=True).query()] == ["88"]


def test_a_spool_less_job_whose_finalizer_was_killed_is_finished_from_its_entry(site):
    # both spools full: the Epilog hands the job to a finalizer on its command line and leaves its
    # arguments in <log_dir>/no-spool-jobs; that finalizer was SIGKILLed: the sweep runs it again
    import time

    from slurm_energy.slurm.attempt import leave_no_spool_entry
    from slurm_energy.slurm.config_cache import load_config
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.recover import sweep_node

    ctx = JobContext(job_id="90", uid=0, gid=0, node="n1", nodelist="n1", prolog_time=T0, cpus_per_node="4")
    args = [ctx.to_json(), repr(T0 + 30), "0:0", "no_pidfile", json.dumps(["spool full: No space left on device"])]
    entry = leave_no_spool_entry(str(site / "log"), "90", 0, "n1", args)
    assert entry == str(site / "log" / "no-spool-jobs" / "90-r0-n1.json")
    assert sweep_node(load_config([]), "n1", time.time()) == []  # 0 s old: its finalizer may be at work
    p = _fake_hook("finalize-env", *args)
    try:
        assert sweep_node(load_config([]), "n1", time.time() + 60) == []  # it is: left alone
    finally:
        p.kill()
        p.wait()
    assert sweep_node(load_config([]), "n2", time.time() + 60) == []  # another node's
    assert sweep_node(load_config([]), "n1", time.time() + 60) == ["finished 90 on n1 (no spool: its finalizer "
                                                                    "was killed)"]
    assert not os.path.exists(entry)
    (rec,) = open_store(f"sqlite:///{site}/jobs.db", readonly=True).get_job("90")
    assert (rec.status.value, rec.start_time, rec.end_time) == ("no_data", T0, T0 + 30)  # the Epilog's times
    assert rec.it_kwh is None and any("spool full" in e for e in rec.errors)
    assert any("finalizer did not finish (killed); finished by the node finalizer's sweep" in e for e in rec.errors)
    assert sweep_node(load_config([]), "n1", time.time() + 60) == []  # done once


def test_collect_dry_run_names_a_spool_less_job_and_runs_nothing(site):
    # collect --dry-run reads the spool-less entries through the same loop as the run, which then
    # only says what it would do: the entry stays, no record is stored
    import time

    from slurm_energy.slurm.attempt import leave_no_spool_entry
    from slurm_energy.slurm.config_cache import load_config
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.finish import Trigger
    from slurm_energy.slurm.jobend.recover import finish_no_spool

    ctx = JobContext(job_id="91", uid=0, gid=0, node="n1", nodelist="n1", prolog_time=T0, cpus_per_node="4")
    args = [ctx.to_json(), repr(T0 + 30), "0:0", "no_pidfile", json.dumps([])]
    entry = leave_no_spool_entry(str(site / "log"), "91", 0, "n1", args)
    cfg = load_config([])
    assert finish_no_spool(cfg, None, time.time() + 60, 20.0, trigger=Trigger.COLLECT, dry_run=True) == [
        "would finish 91-r0-n1 (no spool)"]
    assert finish_no_spool(cfg, None, time.time(), 20.0, dry_run=True) == []  # 0 s old: its finalizer may be at work
    assert os.path.exists(entry) and not os.path.exists(site / "jobs.db")


def test_the_sweeps_hour_counts_a_long_jobs_samples_not_only_its_directory(site):
    # a 2-hour job: its directory last changed at the Prolog (the sampler appends to its samples
    # file); its end hit a read-only spool (no Epilog file) and its finalizer was killed 60 s ago
    import time

    from slurm_energy.slurm.jobend.recover import scan_spool

    sp = _job(site, "91", 5_000_000, 65_000_000)
    _age(sp, 7200.0)
    t = time.time() - 60.0
    os.utime(sp.samples, (t, t))
    now = time.time()
    assert [lo.spool.dir for lo in scan_spool(str(site / "spool"), now, 20.0, node="n1", since=now - 3600)] == [sp.dir]
    os.utime(sp.samples, (now - 7200, now - 7200))  # nothing for 2 h: the collect timer's, not the sweep's
    assert list(scan_spool(str(site / "spool"), now, 20.0, node="n1", since=now - 3600)) == []


def test_a_spool_less_entry_of_a_node_whose_name_ends_like_this_ones_is_left_to_it(site):
    import time

    from slurm_energy.slurm.attempt import leave_no_spool_entry
    from slurm_energy.slurm.config_cache import load_config
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.recover import sweep_node

    ctx = JobContext(job_id="92", uid=0, gid=0, node="gpu-n1", nodelist="gpu-n1", prolog_time=T0)
    entry = leave_no_spool_entry(str(site / "log"), "92", 0, "gpu-n1",
                                 [ctx.to_json(), repr(T0 + 5), "0:0", "no_pidfile", "[]"])
    assert entry.endswith("/92-r0-gpu-n1.json")  # "*-n1.json" matches its name
    assert sweep_node(load_config([]), "n1", time.time() + 60) == [] and os.path.exists(entry)
    assert sweep_node(load_config([]), "gpu-n1", time.time() + 60) == [
        "finished 92 on gpu-n1 (no spool: its finalizer was killed)"]


def test_a_queue_whose_runner_and_standby_were_both_killed_is_restarted_by_a_running_jobs_sampler(site):
    # the fresh tester's case: both SIGKILLed after the node's last Epilog; entries wait, nobody runs
    import time

    q = enqueue_finalize(_job(site, "93", 5_000_000, 65_000_000), T0 + 10, "0:0", "terminated")
    started: list[list[str]] = []
    now = time.time()
    assert not fq.restart_if_stranded(q, "n1", now, start=started.append)  # just queued: its Epilog's runner is due
    assert fq.restart_if_stranded(q, "n1", now + fq.STRANDED_S, start=started.append)
    assert started == [["-m", "slurm_energy.slurm.jobend", "finalize-queue", q, "n1"]]
    runner = _hold(os.path.join(q, fq.RUNNER_LOCK))  # a runner at work on a backlog: left to it
    assert not fq.restart_if_stranded(q, "n1", now + 600, start=started.append) and len(started) == 1
    os.close(runner)
    assert not fq.restart_if_stranded(str(site / "nowhere"), "n1", now + 600, start=started.append)


def test_a_runners_sweep_restarts_the_stranded_queue_of_the_other_spool(site):
    # the job-end fault burst: the fallback spool's queue filled while the spool was full, its runner
    # was SIGKILLed after the last Epilog there, and the spool's own runner swept past it
    import time

    q = enqueue_finalize(_job(site, "94", 5_000_000, 65_000_000), T0 + 10, "0:0", "terminated")
    spools = [str(site / "other-spool"), os.path.dirname(os.path.dirname(q))]  # <spool>/finalize-queue/n1
    started: list[list[str]] = []
    now = time.time()
    assert fq.restart_stranded_queues(spools, "n1", now, start=started.append) == []  # not yet stranded
    assert fq.restart_stranded_queues(spools, "n1", now + fq.STRANDED_S, start=started.append) == [q]
    assert started == [["-m", "slurm_energy.slurm.jobend", "finalize-queue", q, "n1"]]
    runner = _hold(os.path.join(q, fq.RUNNER_LOCK))  # its runner is back: left to it
    assert fq.restart_stranded_queues(spools, "n1", now + 600, start=started.append) == [] and len(started) == 1
    os.close(runner)

"""The node sampler as a process: the Prolog's join, the Epilog's leave, a killed node sampler and
its restart (the missed span on every joined job's record), leaving with the last job.

A real ``python -m slurm_energy.slurm.sampler.node`` on a spool in tmp_path with a site config of
its own (1 s interval); the jobs are contexts as a Prolog writes them, with no cgroup (the probe
then finds none: the rows have no job usage, which these tests do not look at)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from slurm_energy.sampling.samplefile import read_sample_table
from slurm_energy.slurm import sampler_join as sj
from slurm_energy.slurm.attempt import Attempt
from slurm_energy.slurm.context import JobContext

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NODE = "n1"
#: the Epilog waits 1 s; a test on a loaded shared machine waits longer (the protocol is under test, not its speed)
WAIT_S = 20.0


@pytest.fixture
def node(tmp_path, monkeypatch):
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\npaths:\n  spool_dir: {tmp_path}/spool\n  log_dir: {tmp_path}/log\n"
                    f"  store_url: sqlite:///{tmp_path}/jobs.db\nsampling:\n  interval_s: 1\n  interim_s: 3600\n"
                    f"  sampler: node\nnode_meter:\n  source: none\n")
    env = dict(os.environ, SLURM_ENERGY_CONFIG=str(site), PYTHONPATH=REPO)
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    spool_dir = str(tmp_path / "spool")
    started: list[subprocess.Popen[bytes]] = []

    def job(jid: str) -> Attempt:
        sp = Attempt(spool_dir, jid, 0, NODE).ensure()
        with open(sp.context, "w") as f:
            f.write(JobContext(job_id=jid, uid=os.getuid(), gid=os.getgid(), node=NODE, nodelist=NODE,
                               prolog_time=time.time(), cpus_per_node="1").to_json())
        return sp

    def start() -> subprocess.Popen[bytes]:
        p = subprocess.Popen([sys.executable, "-m", sj.MODULE, spool_dir, NODE], env=env, cwd=REPO,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(p)
        return p

    yield spool_dir, job, start
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def _until(cond, timeout: float = 90.0) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _kinds(sp: Attempt) -> list[str]:
    return read_sample_table(sp.samples).kind if os.path.exists(sp.samples) else []


def test_join_leave_and_leaving_with_the_last_job(node):
    spool_dir, job, start = node
    a, b = job("11"), job("12")
    assert sj.join(a.dir, spool_dir, NODE) is None  # none runs yet: the Prolog starts one
    assert sj.claim_start(spool_dir, NODE) and not sj.claim_start(spool_dir, NODE)  # one starter in a burst
    p = start()
    assert _until(lambda: "start" in _kinds(a))
    pid = sj.join(b.dir, spool_dir, NODE)
    assert pid == p.pid  # running: woken, not started again
    assert _until(lambda: "start" in _kinds(b))
    assert _until(lambda: _kinds(a).count("sample") >= 2)
    t_end = time.time()
    assert sj.leave(a.dir, spool_dir, NODE, t_end, WAIT_S) == "terminated"
    rows = read_sample_table(a.samples)
    assert rows.kind[-1] == "final" and rows.t[-1] >= t_end  # after the Epilog's time: not an early stop
    assert not sj.joined(a.dir, NODE) and p.poll() is None  # b is still sampled
    assert sj.leave(b.dir, spool_dir, NODE, time.time(), WAIT_S) == "terminated"
    assert p.wait(60) == 0  # no job left: it leaves
    assert not os.path.exists(sj.node_path(spool_dir, sj.BEAT, NODE))  # a clean leave: nothing was missed
    assert sj.running_pid(spool_dir, NODE) is None


def test_killed_node_sampler_is_restarted_and_the_gap_recorded(node):
    spool_dir, job, start = node
    a, b = job("21"), job("22")
    sj.join(a.dir, spool_dir, NODE)
    sj.join(b.dir, spool_dir, NODE)
    p = start()
    assert _until(lambda: _kinds(a).count("sample") >= 1 and _kinds(b).count("sample") >= 1)
    p.send_signal(signal.SIGKILL)
    p.wait()
    time.sleep(2.0)  # two intervals with no sampler
    # a's Epilog: none runs; the finalizer takes its own reading (outcome not_running)
    assert sj.leave(a.dir, spool_dir, NODE, time.time()) == "not_running"
    assert not sj.joined(a.dir, NODE)  # a's rows end here: a sampler started later leaves its file alone
    assert sj.others_joined(spool_dir, NODE, but=a.dir)  # b is joined: the Epilog starts it again
    n_a = len(_kinds(a))
    c = job("23")  # a job whose Prolog comes after the outage: it missed nothing
    sj.join(c.dir, spool_dir, NODE)
    p2 = start()
    assert _until(lambda: _kinds(b).count("start") == 2 and _kinds(c).count("start") == 1)  # b taken up again
    with open(b.errors, encoding="utf-8") as f:
        errs = [json.loads(x) for x in f]
    assert any("node sampler not running from" in e and "intervals missed" in e for e in errs), errs
    c_errs = [json.loads(x) for x in open(c.errors, encoding="utf-8")] if os.path.exists(c.errors) else []
    assert not any("node sampler not running" in e for e in c_errs), c_errs  # (a tester: 52 s blamed on 8 s jobs)
    assert sj.leave(c.dir, spool_dir, NODE, time.time(), WAIT_S) == "terminated"
    assert sj.leave(b.dir, spool_dir, NODE, time.time(), WAIT_S) == "terminated"
    assert p2.wait(60) == 0
    assert len(_kinds(a)) == n_a


def test_an_epilog_before_the_first_scan_gets_start_and_final(node):
    spool_dir, job, start = node
    a = job("31")
    sj.join(a.dir, spool_dir, NODE)
    with open(sj.job_path(a.dir, sj.STOP, NODE), "w") as f:
        f.write(json.dumps({"t": time.time()}))
    p = start()
    assert p.wait(60) == 0
    assert _kinds(a) == ["start", "final"]  # as a per-job sampler stopped while starting
    assert os.path.exists(sj.job_path(a.dir, sj.ENDED, NODE))


def test_an_epilog_while_its_node_sampler_is_still_starting_waits_for_it(node):
    """A job shorter than the node sampler's start-up (the node's first job): its Epilog finds the
    lock free but a fresh start claim, so it waits (within its wait) for the sampler, whose first
    look at the joins writes the job's start and final rows: terminated, as a per-job sampler
    TERMed while starting; not a not_running record for a sampler that was merely slow to start."""
    import threading

    spool_dir, job, start = node
    a = job("41")
    assert sj.join(a.dir, spool_dir, NODE) is None and sj.claim_start(spool_dir, NODE)  # the Prolog's claim
    out: list[str] = []
    epilog = threading.Thread(target=lambda: out.append(sj.leave(a.dir, spool_dir, NODE, time.time(), WAIT_S)))
    epilog.start()
    time.sleep(0.5)  # the Epilog is waiting: nothing runs yet
    assert epilog.is_alive() and sj.running_pid(spool_dir, NODE) is None
    p = start()  # the Prolog's detached start, slower than the job
    epilog.join(WAIT_S + 5)
    assert out == ["terminated"]
    assert _kinds(a) == ["start", "final"]
    assert p.wait(60) == 0  # no job left: it leaves

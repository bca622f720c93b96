"""Every job Slurm ran gets a record, whatever fails: one test per fault kind (issue 10).

Real hook scripts as slurmd runs them (root, no PATH), real processes, real filesystems: a full or
read-only spool is a small tmpfs mounted by the test over a directory under tmp_path (and
unmounted by it).
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import time
from pathlib import Path

import pytest
from test_hooks import VENV_PY, _env, _hook, _run_hook

from slurm_energy.model import Status
from slurm_energy.slurm import detach
from slurm_energy.store import open_store
from tests.fakes.slurm_facts import FakeSlurmFacts
from tests.helpers.jobrecord_factory import site_yaml

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(VENV_PY),
                                reason="hooks run as root with the installed venv (scripts/setup.sh)")



def _as_nobody():  # the job's processes are its user's: in PID mode only they count (issue 22)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)

def _site(tmp: Path, sampler: str = "") -> None:
    """``sampler``: ``sampling.sampler`` (``job``: a sampler process per job), else the default (the node sampler)."""
    site_yaml(tmp, "sampling:\n  interval_s: 0.5\n" + (f"  sampler: {sampler}\n" if sampler else "")
              + f"hardware:\n  rapl_root: {tmp}/no-powercap\n",
              paths={"spool_fallback_dir": f"{tmp}/spool2", "store_url": f"sqlite:///{tmp}/lib/jobs.db"})


class Tmpfs:
    """A 64 KiB tmpfs over ``path``: ``full()`` fills it (ENOSPC), ``ro()`` remounts it read-only."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(path)], check=True)

    def full(self) -> Tmpfs:
        subprocess.run(["dd", "if=/dev/zero", f"of={self.path}/fill", "bs=4k"], capture_output=True)
        return self

    def ro(self) -> Tmpfs:
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)
        return self

    def umount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)


@pytest.fixture
def mounts():
    made: list[Tmpfs] = []
    yield lambda p: made.append(Tmpfs(p)) or made[-1]
    for m in reversed(made):
        m.umount()


def _wait_final(tmp: Path, job_id: str, timeout_s: float = 40.0):
    recs: list = []
    for _ in range(int(timeout_s * 10)):
        if (tmp / "lib" / "jobs.db").exists():
            try:
                recs = open_store(f"sqlite:///{tmp}/lib/jobs.db", readonly=True).get_job(job_id)
            except RuntimeError:  # the finalizer created the file and is creating the schema
                recs = []
            if recs and all(r.status != Status.RUNNING for r in recs):
                return recs
        time.sleep(0.1)
    raise AssertionError(f"job {job_id}: no final record in {timeout_s} s ({recs}); log: "
                         + "".join(p.read_text()[-1500:] for p in (tmp / "log").glob("*.log")))


def _job(tmp: Path, job_id: str, seconds: float = 1.5) -> dict:
    nobody = pwd.getpwnam("nobody")
    env = _env(job_id, tmp / "nowhere", nobody.pw_uid, nobody.pw_gid)
    rc, dt = _run_hook(_hook(tmp, "prolog"), env)
    assert rc == 0 and dt < 2.0, ("prolog", rc, dt)
    time.sleep(seconds)  # "the job"
    rc, dt = _run_hook(_hook(tmp, "epilog"), dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd", SLURM_JOB_EXIT_CODE2="0:0"))
    assert rc == 0 and dt < 2.0, ("epilog", rc, dt)
    return env


def test_full_spool_falls_back_to_the_second_spool_and_the_job_is_measured(tmp_path, mounts):
    _site(tmp_path)
    mounts(tmp_path / "spool").full()
    _job(tmp_path, "9101")
    (rec,) = _wait_final(tmp_path, "9101")
    assert (tmp_path / "spool2" / "jobs" / "9101-r0" / "samples-h1.jsonl").exists()
    assert rec.status == Status.COMPLETE and rec.nodes[0].n_samples >= 2
    assert any(f"spool {tmp_path}/spool unusable" in e and "No space left on device" in e for e in rec.errors)


def test_read_only_spool_falls_back_too(tmp_path, mounts):
    _site(tmp_path)
    mounts(tmp_path / "spool").ro()
    _job(tmp_path, "9102")
    (rec,) = _wait_final(tmp_path, "9102")
    assert rec.status == Status.COMPLETE
    assert any("Read-only file system" in e for e in rec.errors)


def test_both_spools_unusable_still_stores_a_no_data_record_from_the_environment(tmp_path, mounts):
    _site(tmp_path)
    mounts(tmp_path / "spool").full()
    mounts(tmp_path / "spool2").ro()
    _job(tmp_path, "9103", seconds=0.5)
    (rec,) = _wait_final(tmp_path, "9103")
    assert rec.status == Status.NO_DATA and rec.it_kwh is None  # unmeasured, never 0
    assert rec.user == "nobody" and rec.partition == "debug" and rec.exit_code == "0:0"
    assert rec.errors[0].startswith("no usable spool on this node: ")
    assert "No space left on device" in rec.errors[0] and "Read-only file system" in rec.errors[0]
    # the Epilog left the finalizer's arguments in the log dir (for a sweep, had it been killed); done, it removed them
    entries = tmp_path / "log" / "no-spool-jobs"
    for _ in range(50):
        if entries.is_dir() and not list(entries.iterdir()):
            break
        time.sleep(0.1)
    assert entries.is_dir() and list(entries.iterdir()) == []


def test_killed_sampler_gives_a_partial_record(tmp_path):
    # the per-job sampler's (its own pidfile); the node sampler's twins follow
    import signal

    _site(tmp_path, sampler="job")
    nobody = pwd.getpwnam("nobody")
    env = _env("9104", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    assert _run_hook(_hook(tmp_path, "prolog"), env)[0] == 0
    time.sleep(1.2)
    os.kill(int((tmp_path / "spool" / "jobs" / "9104-r0" / "sampler-h1.pid").read_text()), signal.SIGKILL)
    rc, dt = _run_hook(_hook(tmp_path, "epilog"), dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd"))
    assert rc == 0 and dt < 2.0
    (rec,) = _wait_final(tmp_path, "9104")
    assert rec.status == Status.PARTIAL and any("sampler not_running" in e for e in rec.errors)


def test_sampler_stopped_by_someone_elses_term_mid_job_is_treated_as_killed(tmp_path):
    """The TERM twin of the killed-sampler test (tester 2, job 134): ``kill``/``pkill`` from anyone
    but the Epilog makes the sampler write a final row and exit mid-job. That row is not the job's
    end: the stretch after it is charged as a killed sampler's tail (flag tail_*), its memory there
    is unknown, the node is partial and the record names the signal. (The hand-computed energy of
    such a tail: tests/slurm/test_early_stop.py.) The per-job sampler's; the node sampler's twin:
    test_node_sampler_stopped_by_someone_elses_term_mid_job_is_treated_as_killed."""
    import signal

    from tests.helpers.samplefile_rows import read_samples

    _site(tmp_path, sampler="job")
    nobody = pwd.getpwnam("nobody")
    env = _env("9108", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    prolog, epilog = _hook(tmp_path, "prolog"), _hook(tmp_path, "epilog")
    job = subprocess.Popen(["/bin/sh", "-c", "timeout 4 sh -c 'while :; do :; done'; true"],
                           env={"SLURM_JOB_ID": "9108"}, preexec_fn=_as_nobody)  # the job: 4 s of busy loop
    assert _run_hook(prolog, env)[0] == 0
    spool = tmp_path / "spool" / "jobs" / "9108-r0"
    time.sleep(1.2)
    os.kill(int((spool / "sampler-h1.pid").read_text()), signal.SIGTERM)  # not the Epilog
    job.wait()
    t_epilog = time.time()
    rc, dt = _run_hook(epilog, dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd", SLURM_JOB_EXIT_CODE2="0:0"))
    assert rc == 0 and dt < 2.0
    (rec,) = _wait_final(tmp_path, "9108")
    rows = list(read_samples(str(spool / "samples-h1.jsonl")))
    final = [r["t"] for r in rows if r["kind"] == "final"]
    assert len(final) == 1 and final[0] < t_epilog - 1.0  # written mid-job, > 1 s before the Epilog
    assert rows[-1]["kind"] == "epilog"  # the finalizer's late reading closes the series
    assert rec.status == Status.PARTIAL
    assert any("sampler stopped early by SIGTERM" in e for e in rec.errors), rec.errors
    cpu = next(d for d in rec.nodes[0].devices if d.device_class == "cpu")
    ram = next(d for d in rec.nodes[0].devices if d.device_class == "ram")
    assert {"tail_from_slurm_totalcpu", "tail_estimated"} & set(cpu.flags), cpu.flags
    assert ram.coverage < 0.9 and "share_unknown" in ram.flags  # > 1 s of ~4 s not seen


def test_killed_finalizer_is_finished_by_collect(tmp_path, monkeypatch):
    from slurm_energy.config import load_site_config
    from slurm_energy.slurm.attempt import spool_dirs
    from slurm_energy.slurm.hooks.epilog import epilog
    from slurm_energy.slurm.jobend import recover as M

    _site(tmp_path)
    nobody = pwd.getpwnam("nobody")
    env = _env("9105", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    assert _run_hook(_hook(tmp_path, "prolog"), env)[0] == 0
    samples = tmp_path / "spool" / "jobs" / "9105-r0" / "samples-h1.jsonl"
    for _ in range(300):  # the sampler's first row: on a loaded machine its start-up can outlast the
        text = samples.read_text() if samples.exists() else ""  # Epilog's 1 s wait, which is not what this tests
        if ",start," in text or '"kind": "start"' in text:
            break
        time.sleep(0.1)
    time.sleep(1.2)
    real_spawn = detach.spawn
    # the Epilog as slurmd runs it, whose finalizer is SIGKILLed before it does anything
    monkeypatch.setattr(detach, "spawn", lambda args, *a, **kw: 0 if {"finalize", "finalize-queue"} & set(args)
                        else real_spawn(args, *a, **kw))
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(tmp_path / "site.yaml"))
    epilog(dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd", SLURM_JOB_EXIT_CODE2="0:0"))
    db = tmp_path / "lib" / "jobs.db"  # at most the sampler's interim (running) record
    assert not db.exists() or all(r.status == Status.RUNNING for r in open_store(f"sqlite:///{db}").get_job("9105"))
    cfg = load_site_config(str(tmp_path / "site.yaml"))
    ended = FakeSlurmFacts(every_job={"job_state": "COMPLETED"})  # slurmctld: the job has ended
    lines, _young = M.finish_leftovers(cfg, spool_dirs(cfg), time.time() + 120, 60.0, facts=ended)
    assert lines == [f"finished 9105 attempt 0 on h1 ({tmp_path}/spool/jobs/9105-r0, sampler terminated)"]
    (rec,) = open_store(cfg.paths.store_url, readonly=True).get_job("9105")
    assert rec.status == Status.COMPLETE and rec.job_state == "COMPLETED" and rec.nodes[0].n_samples >= 2
    assert any("finished by slurm-energy collect" in e for e in rec.errors)
    # a second collect finds nothing (the finalized marker): idempotent
    assert M.finish_leftovers(cfg, spool_dirs(cfg), time.time() + 120, 60.0, facts=ended)[0] == []


def test_no_epilog_on_the_node_the_sampler_finishes_it(tmp_path):
    """slurmd ran the Prolog but no Epilog finished (killed by its 1.9 s guard on a loaded node: CI
    saw a 2-node job wait forever for its second node): the sampler, once the job has been gone for
    sampling.epilog_wait_s, finishes the node itself; a late Epilog is then ignored."""
    _site(tmp_path)
    site = tmp_path / "site.yaml"
    site.write_text(site.read_text().replace("  interval_s: 0.5\n", "  interval_s: 0.5\n  epilog_wait_s: 1\n"))
    nobody = pwd.getpwnam("nobody")
    env = _env("9107", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    # the job: a 2 s process of the job's user under a stand-in slurmstepd (a copy of the interpreter
    # named slurmstepd, run as root with its title), as test_hooks' job: PID mode counts the
    # descendants of the job's slurmstepd whose real uid is the job's, so the end is seen when it ends
    import shutil
    import sys

    stepd = tmp_path / "slurmstepd"
    shutil.copy(os.path.realpath(sys.executable), stepd)
    code = (f"import os, time\npid = os.fork()\nif pid == 0:\n    os.setgroups([]); os.setgid({nobody.pw_gid}); "
            f"os.setuid({nobody.pw_uid})\n    time.sleep(2)\n    os._exit(0)\nos.waitpid(pid, 0)\n")
    job = subprocess.Popen(["slurmstepd: [9107.batch]", "-c", code], executable=str(stepd),
                           env={"SLURM_JOB_ID": "9107", "PYTHONHOME": sys.base_prefix})
    assert _run_hook(_hook(tmp_path, "prolog"), env)[0] == 0
    job.wait()
    t_end = time.time()
    (rec,) = _wait_final(tmp_path, "9107")
    assert rec.status == Status.COMPLETE  # the sampler's own last sample closes the node: nothing missing
    assert any("epilog: none finished on h1" in e for e in rec.errors)
    assert abs(rec.end_time - t_end) < 1.0  # when the job was seen gone (0.25 s polls), not 1 s later
    spool = tmp_path / "spool" / "jobs" / "9107-r0"
    assert json.loads((spool / "epilog-h1.done").read_text())["sampler"] == "epilog_missing"
    rc, dt = _run_hook(_hook(tmp_path, "epilog"), dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd"))
    assert rc == 0 and dt < 2.0  # a late Epilog: ignored, as a repeated one is
    time.sleep(1.0)
    assert len(open_store(f"sqlite:///{tmp_path}/lib/jobs.db", readonly=True).get_job("9107")) == 1


# --- the node sampler (the default): the same faults, one process for the node's jobs ---------------

def _rows(spool: Path) -> list[dict]:
    from tests.helpers.samplefile_rows import read_samples

    f = spool / "samples-h1.jsonl"
    return list(read_samples(str(f))) if f.exists() else []


def _node_sampler_took_up(tmp: Path, *spools: Path, timeout_s: float = 40.0) -> int:
    """The node sampler's PID once it has written the ``start`` row of every job in ``spools``
    (a loaded machine's start-up can outlast a short wait: the fault, not the speed, is tested)."""
    pidfile = tmp / "spool" / "node-sampler-h1.pid"
    for _ in range(int(timeout_s * 10)):
        if pidfile.exists() and all(any(r["kind"] == "start" for r in _rows(sp)) for sp in spools):
            return int(pidfile.read_text())
        time.sleep(0.1)
    raise AssertionError(f"the node sampler took {spools} up not within {timeout_s} s")


def _epilog(tmp: Path, env: dict) -> float:
    """The Epilog as slurmd runs it; returns its start (epoch s)."""
    t = time.time()
    rc, dt = _run_hook(_hook(tmp, "epilog"), dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd", SLURM_JOB_EXIT_CODE2="0:0"))
    assert rc == 0 and dt < 2.0, (rc, dt)
    return t


def test_killed_node_sampler_gives_a_partial_record_that_says_since_when(tmp_path):
    """SIGKILL (the OOM killer) of the node sampler mid-job, no other job on the node: the Epilog
    finds none running (outcome not_running, nothing to restart), the finalizer takes its own
    reading, and the record is partial and says how long before the Epilog the last row was."""
    import re
    import signal

    _site(tmp_path, sampler="node")
    nobody = pwd.getpwnam("nobody")
    env = _env("9111", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    assert _run_hook(_hook(tmp_path, "prolog"), env)[0] == 0
    spool = tmp_path / "spool" / "jobs" / "9111-r0"
    pid = _node_sampler_took_up(tmp_path, spool)
    time.sleep(1.2)  # two 0.5 s intervals sampled
    os.kill(pid, signal.SIGKILL)
    t_kill = time.time()
    last_row = max(r["t"] for r in _rows(spool))
    time.sleep(1.0)  # the job runs on, unsampled
    t_epilog = _epilog(tmp_path, env)
    (rec,) = _wait_final(tmp_path, "9111")
    assert rec.status == Status.PARTIAL
    assert any("epilog: sampler not_running" in e for e in rec.errors), rec.errors
    gone = next(e for e in rec.errors if e.startswith("sampler gone without a final sample"))
    gap_s = float(re.search(r"its last row ([0-9.]+) s before the Epilog", gone).group(1))
    # by hand: the Epilog's time (taken inside it, just after t_epilog) less the last row's, the
    # node sampler's last row before its kill (read back here); >= the 1.0 s slept after the kill
    assert gap_s >= 1.0 and t_epilog - last_row - 0.05 <= gap_s <= t_epilog - last_row + 0.5, (gap_s, t_epilog - last_row)
    assert last_row <= t_kill
    rows = _rows(spool)
    assert rows[0]["kind"] == "prolog" and rows[-1]["kind"] == "epilog"  # the finalizer's reading closes the series
    assert not any(r["kind"] == "final" for r in rows)


def test_node_sampler_killed_under_two_jobs_is_restarted_by_an_epilog_and_the_gap_is_on_the_record(tmp_path):
    """The node sampler killed while two jobs run: the first job's Epilog finds none running and
    starts another for the second job, which records on that job the span nothing was sampled
    (its intervals missed); the second job ends normally. Both jobs get records."""
    import re
    import signal

    _site(tmp_path, sampler="node")
    nobody = pwd.getpwnam("nobody")
    env_a = _env("9112", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    env_b = _env("9113", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    a, b = tmp_path / "spool" / "jobs" / "9112-r0", tmp_path / "spool" / "jobs" / "9113-r0"
    assert _run_hook(_hook(tmp_path, "prolog"), env_a)[0] == 0
    assert _run_hook(_hook(tmp_path, "prolog"), env_b)[0] == 0
    pid = _node_sampler_took_up(tmp_path, a, b)
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    t_kill = time.time()
    time.sleep(2.0)  # four 0.5 s intervals with no node sampler
    _epilog(tmp_path, env_a)
    for _ in range(400):  # b taken up again by the node sampler a's Epilog started: a second start row
        if [r["kind"] for r in _rows(b)].count("start") == 2:
            break
        time.sleep(0.1)
    t_restart = max(r["t"] for r in _rows(b) if r["kind"] == "start")
    new_pid = int((tmp_path / "spool" / "node-sampler-h1.pid").read_text())
    assert new_pid != pid
    _epilog(tmp_path, env_b)
    (ra,) = _wait_final(tmp_path, "9112")
    (rb,) = _wait_final(tmp_path, "9113")
    assert ra.status == Status.PARTIAL and any("epilog: sampler not_running" in e for e in ra.errors), ra.errors
    missed = next(e for e in rb.errors if "node sampler not running from" in e)
    span_s, intervals = (int(x) for x in re.search(r"\((\d+) s, about (\d+) intervals missed", missed).groups())
    # by hand: from the dead sampler's last beat (at most one 0.5 s interval before the kill) to the
    # new one's start (just before b's second start row): >= 2.0 s; "about" = whole intervals less
    # the one the rows around the span already cover: >= 2.0 / 0.5 - 1 = 3
    assert t_restart - t_kill >= 2.0 and abs(span_s - (t_restart - t_kill)) <= 1.0, (span_s, t_restart - t_kill)
    assert intervals >= 3
    kinds = [r["kind"] for r in _rows(b)]
    assert kinds[0] == "prolog" and kinds[-1] == "final" and kinds.count("start") == 2  # b's Epilog: its last row
    assert not any(r["kind"] == "start" and r["t"] > t_kill for r in _rows(a))  # a's file left alone after its Epilog


def test_node_sampler_stopped_by_someone_elses_term_mid_job_is_treated_as_killed(tmp_path):
    """The node sampler's twin of the TERM test above: a TERM from anyone but an Epilog makes it write
    every job's ``final`` row and leave mid-job. That row is not the job's end: the job's Epilog
    finds no node sampler running, the finalizer takes its own reading, the node is partial and
    the record names the signal."""
    import signal

    _site(tmp_path, sampler="node")
    nobody = pwd.getpwnam("nobody")
    env = _env("9114", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    job = subprocess.Popen(["/bin/sh", "-c", "timeout 4 sh -c 'while :; do :; done'; true"],
                           env={"SLURM_JOB_ID": "9114"}, preexec_fn=_as_nobody)  # the job: 4 s of busy loop
    assert _run_hook(_hook(tmp_path, "prolog"), env)[0] == 0
    spool = tmp_path / "spool" / "jobs" / "9114-r0"
    pid = _node_sampler_took_up(tmp_path, spool)
    time.sleep(1.2)
    os.kill(pid, signal.SIGTERM)  # not the Epilog
    job.wait()
    t_epilog = _epilog(tmp_path, env)
    (rec,) = _wait_final(tmp_path, "9114")
    rows = _rows(spool)
    final = [r["t"] for r in rows if r["kind"] == "final"]
    assert len(final) == 1 and final[0] < t_epilog - 1.0  # written mid-job, > 1 s before the Epilog
    assert rows[-1]["kind"] == "epilog"  # the finalizer's late reading closes the series
    assert rec.status == Status.PARTIAL
    assert any("sampler stopped early by SIGTERM" in e for e in rec.errors), rec.errors
    cpu = next(d for d in rec.nodes[0].devices if d.device_class == "cpu")
    assert {"tail_from_slurm_totalcpu", "tail_estimated"} & set(cpu.flags), cpu.flags


def test_node_sampler_that_does_not_answer_the_epilog_costs_it_one_wait_and_writes_no_late_row(tmp_path):
    """A node sampler that does not answer (stopped: SIGSTOP, a stuck disk): the Epilog waits 1 s for
    the job's last row, then claims the job (outcome timed_out) and exits 0 within 2 s; the
    finalizer's own reading closes the series. Once the node sampler runs again it sees the claim:
    no late ``final`` row after the finalizer's reading, and it leaves with its last job."""
    import signal

    _site(tmp_path, sampler="node")
    nobody = pwd.getpwnam("nobody")
    env = _env("9115", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    assert _run_hook(_hook(tmp_path, "prolog"), env)[0] == 0
    spool = tmp_path / "spool" / "jobs" / "9115-r0"
    pid = _node_sampler_took_up(tmp_path, spool)
    time.sleep(1.0)
    os.kill(pid, signal.SIGSTOP)
    try:
        _epilog(tmp_path, env)
        (rec,) = _wait_final(tmp_path, "9115")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert json.loads((spool / "epilog-h1.done").read_text())["sampler"] == "timed_out"
    assert any("epilog: sampler timed_out" in e for e in rec.errors), rec.errors
    for _ in range(100):  # it sees the Epilog's claim, closes the job without a row and leaves
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if (Path("/proc") / str(pid) / "stat").read_text().split(")")[-1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the node sampler did not leave after its last job")
    rows = _rows(spool)
    assert rows[-1]["kind"] == "epilog" and not any(r["kind"] == "final" for r in rows)

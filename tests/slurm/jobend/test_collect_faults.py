"""collect / prune / install under faults: a store that is down, an unwritable results dir, records
left running, stale temp files, retention that never removes an unstored job (issue 10)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from slurm_energy.config import Paths, SiteConfig
from slurm_energy.model import Status
from slurm_energy.store import open_store
from slurm_energy.store.queue import drain
from tests.fakes.slurm_facts import FakeSlurmFacts
from tests.helpers.jobrecord_factory import finished, node_record


def _cfg(tmp: Path, store_url: str = "", results_dir: str = "") -> SiteConfig:
    return SiteConfig(paths=Paths(spool_dir=str(tmp / "spool"), spool_fallback_dir=str(tmp / "spool2"),
                                  store_url=store_url or f"sqlite:///{tmp}/jobs.db", results_dir=results_dir))


def test_store_down_queues_the_record_and_collect_drains_it(tmp_path):
    from slurm_energy.slurm.jobend.publish import store_and_report

    down = _cfg(tmp_path, store_url="postgresql+psycopg://se@127.0.0.1:9/none")  # nothing listens on port 9
    rec = finished(node_record(job_id="810"))
    store_and_report(down, rec)
    (q,) = list((tmp_path / "spool" / "queue").iterdir())
    assert q.name == "c1.810.r0.1000000.json" and oct(q.stat().st_mode & 0o777) == "0o600"
    good = open_store(f"sqlite:///{tmp_path}/jobs.db")
    n, problems = drain([str(tmp_path / "spool"), str(tmp_path / "spool2")], good.put)
    assert (n, problems) == (1, []) and not q.exists()
    (got,) = good.get_job("810")
    assert got.it_kwh == pytest.approx(1.1)  # 3.6e6 + 3.6e5 J = 3.96e6 J = 1.1 kWh, as queued


def test_locked_store_queues_after_its_retries(tmp_path, monkeypatch):
    import sqlite3

    from slurm_energy.outputs.sinks import QueueingStoreSink
    from slurm_energy.slurm.attempt import spool_dirs
    from slurm_energy.store import sqlstore

    cfg = _cfg(tmp_path)
    open_store(cfg.paths.store_url).close()
    real = sqlstore.open_store
    # the busy timeout shortened from 30 s (the real waiting is tested in test_store_locking.py)
    monkeypatch.setattr("slurm_energy.store.open_store", lambda url, **kw: real(url, busy_timeout_s=0.2, **kw))
    holder = sqlite3.connect(f"{tmp_path}/jobs.db")
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the lock for longer than we wait
    try:
        QueueingStoreSink(cfg.paths.store_url, spool_dirs(cfg)).publish(finished(node_record(job_id="811")))
    finally:
        holder.rollback()
        holder.close()
    assert [p.name for p in (tmp_path / "spool" / "queue").iterdir()] == ["c1.811.r0.1000000.json"]


def test_unwritable_results_dir_falls_back_and_the_record_is_stored(tmp_path):
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.publish import finish_node

    (tmp_path / "afile").write_text("x")  # results_dir under a regular file: ENOTDIR, as root too
    cfg = _cfg(tmp_path, results_dir=str(tmp_path / "afile" / "results"))
    rec = node_record(job_id="812")
    ctx = JobContext(job_id="812", uid=1001, gid=1001, node="n1", cluster="c1")
    out = finish_node(cfg, rec, ctx)
    # written to the fallback spool's results (then moved under stored/ once the job is stored)
    assert out is not None and list((tmp_path / "spool2" / "results" / "c1").rglob("n1.json"))
    (got,) = open_store(cfg.paths.store_url, readonly=True).get_job("812")
    assert any(f"results dir {tmp_path}/afile/results not written" in e for e in got.errors)


def test_nowhere_to_write_results_stores_the_node_view_directly(tmp_path):
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.publish import finish_node

    (tmp_path / "afile").write_text("x")
    cfg = SiteConfig(paths=Paths(spool_dir=str(tmp_path / "afile" / "s"), spool_fallback_dir=str(tmp_path / "afile" / "t"),
                                 store_url=f"sqlite:///{tmp_path}/jobs.db"))
    finish_node(cfg, node_record(job_id="813"), JobContext(job_id="813", uid=1001, gid=1001, node="n1", cluster="c1"))
    (got,) = open_store(cfg.paths.store_url, readonly=True).get_job("813")
    assert got.it_kwh == pytest.approx(1.1)


def test_collect_marks_running_records_of_ended_jobs_partial(tmp_path):
    from slurm_energy.slurm.jobend.recover import finish_running

    st = open_store(f"sqlite:///{tmp_path}/jobs.db")
    for jid in ("820", "821", "822"):
        r = finished(node_record(job_id=jid))
        r.status = Status.RUNNING
        st.put(r)
    # slurmctld: 820 ended (TIMEOUT), 821 runs, 822 ended (but its attempt is young: left to the journal's loop)
    slurm = FakeSlurmFacts(jobs={"820": {"job_state": "TIMEOUT", "end_time": 5000.0}, "821": {"job_state": "RUNNING"},
                                 "822": {"job_state": "COMPLETED"}})
    lines = finish_running(_cfg(tmp_path), st, young={("822", 0)}, facts=slurm)
    assert lines == ["marked c1/820 attempt 0: running -> partial (Slurm TIMEOUT)"]
    (a,) = st.get_job("820")
    assert a.status == Status.PARTIAL and a.job_state == "TIMEOUT" and a.end_time == 5000.0
    assert [r.status for r in st.get_job("821") + st.get_job("822")] == [Status.RUNNING, Status.RUNNING]


def test_stale_temp_files_are_removed_and_fresh_ones_kept(tmp_path):
    from slurm_energy.slurm.attempt import remove_stale_tmp

    d = tmp_path / "jobs" / "5-r0"
    d.mkdir(parents=True)
    old, new, keep = d / "epilog-n2.done.tmp4242", d / "context-n1.json.tmp77", d / "samples-n1.jsonl"
    for p in (old, new, keep):
        p.write_text("x")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    os.utime(keep, (time.time() - 3600, time.time() - 3600))
    assert remove_stale_tmp(str(d), time.time()) == [str(old)]
    assert sorted(p.name for p in d.iterdir()) == ["context-n1.json.tmp77", "samples-n1.jsonl"]


def test_prune_never_removes_a_job_not_yet_stored(tmp_path):
    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.jobend.prune import prune

    cfg = _cfg(tmp_path)
    st = open_store(cfg.paths.store_url)
    st.put(finished(node_record(job_id="830")))
    for jid in ("830", "831"):  # 830 is stored, 831 is not
        sp = Attempt(cfg.paths.spool_dir, jid, 0, "n1").ensure()
        Path(sp.context).write_text("{}")
        Path(sp.finalized).write_text("1")
        for f in Path(sp.dir).iterdir():
            os.utime(f, (time.time() - 20 * 86400,) * 2)
    lines = prune(st, [cfg.paths.spool_dir], [], 14 * 86400, time.time())
    assert lines == [f"removed {cfg.paths.spool_dir}/jobs/830-r0"]
    assert os.path.isdir(f"{cfg.paths.spool_dir}/jobs/831-r0")


def test_install_prints_the_collect_timer_and_cron_line(tmp_path, capsys):
    from slurm_energy.cli.main import main

    (tmp_path / "site.yaml").write_text("cluster_name: t\n")
    assert main(["install", "--hooks-dir", str(tmp_path / "hooks"), "--config", str(tmp_path / "site.yaml"),
                 "--marks-tmpfs", "none"]) == 0
    out = capsys.readouterr().out.splitlines()
    # the .deb's units, written for this Python by --units (tests/cli/test_install_cmd.py), or cron
    assert any(x.endswith(f"install --config {tmp_path}/site.yaml --units /etc/systemd/system") for x in out)
    assert any("systemctl enable --now slurm-energy-collect.timer slurm-energy-prune.timer" in x for x in out)
    cron = [x for x in out if x.startswith("# */5 * * * * ")]
    assert len(cron) == 1 and "collect --older-than 5" in cron[0] and f"SLURM_ENERGY_CONFIG={tmp_path}/site.yaml" in cron[0]
    weekly = [x for x in out if x.startswith("# 17 3 * * 0 ")]
    assert len(weekly) == 1 and "prune --older-than 14" in weekly[0]
    assert all(x.startswith("#") for x in out if "collect" in x)  # slurm.conf ignores them


def test_collect_never_replaces_a_stored_record_whose_marker_could_not_be_written(tmp_path):
    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.recover import finish_leftovers

    cfg = _cfg(tmp_path)
    st = open_store(cfg.paths.store_url)
    st.put(finished(node_record(job_id="840", start=1000.0)))  # the finalizer stored it ...
    sp = Attempt(cfg.paths.spool_dir, "840", 0, "n1").ensure()  # ... but its spool was full: no marker
    Path(sp.context).write_text(JobContext(job_id="840", uid=1001, gid=1001, node="n1", prolog_time=1000.0).to_json())
    lines, _ = finish_leftovers(cfg, [cfg.paths.spool_dir], time.time() + 600, 60.0, store=st,
                                facts=FakeSlurmFacts(every_job={"job_state": "COMPLETED"}))
    assert lines == [] and os.path.exists(sp.finalized)
    (got,) = st.get_job("840")
    assert got.status == Status.COMPLETE and got.it_kwh == pytest.approx(1.1)  # untouched


def test_a_job_with_nothing_left_on_any_node_gets_a_no_data_record_from_sacct(tmp_path):
    from slurm_energy.slurm.clients.sacct import parse_ended, parse_sacct_json
    from slurm_energy.slurm.jobend.recover import finish_unrecorded

    st = open_store(f"sqlite:///{tmp_path}/jobs.db")
    t = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 600))
    t_end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 597))
    t0 = time.mktime(time.strptime(t, "%Y-%m-%dT%H:%M:%S"))
    st.put(finished(node_record(job_id="851", start=t0 + 0.4, end=t0 + 3)))  # measured: Prolog time
    out = "\n".join([  # -o FIELDS: none a user writes
        f"850|849_3|COMPLETED|{t}|{t_end}|n1|alice|2001|2001|research|debug|0:0|lab",  # lost
        f"851|851|COMPLETED|{t}|{t_end}|n1|alice|2001|2001|research|debug|0:0|lab",  # has a record
        f"852|852|CANCELLED by 0|None|{t_end}|None assigned|bob|2002|2002|research|debug|0:0|lab",
    ]) + "\n"
    # sacct --json -j 850: 22.05's shape (tests/slurm/clients/data/slurm-22.05-sacct.json), the user's text in it
    doc = {"jobs": [{"job_id": 850, "name": "my|job", "working_directory": "/w/a|b", "time": {"start": int(t0)}}]}

    # what sacct said, through the pure parsers (their runners: tests/slurm/clients/test_sacct.py)
    slurm = FakeSlurmFacts(ended_jobs=parse_ended(out), text=parse_sacct_json(json.dumps(doc)))
    lines = finish_unrecorded(_cfg(tmp_path), st, time.time(), 86400, 60, facts=slurm)
    assert lines == ["stored lab/850 from sacct: no_data (COMPLETED, no record from the hooks)"]
    (r,) = st.get_job("850")
    assert (r.status, r.array_job_id, r.array_task_id, r.user, r.uid, r.job_name, r.work_dir) == \
        (Status.NO_DATA, "849", "3", "alice", 2001, "my|job", "/w/a|b")
    assert r.elapsed_s == 3.0 and r.it_kwh is None and "stored by slurm-energy collect from sacct" in r.errors[0]
    assert slurm.asked[-1] == ("user_text", ("850",))  # only the job to record: 851 has one, 852 never ran
    assert finish_unrecorded(_cfg(tmp_path), st, time.time(), 86400, 60, facts=slurm) == []  # idempotent


@pytest.mark.parametrize("text, expect", [
    (None, ["cannot read the site config (No such file or directory)"]),
    ("sampling:\n  interval_s: -1\n", ["sampling.interval_s: bad value -1", "Fix: sampling interval in seconds, > 0"]),
])
def test_install_refuses_a_missing_or_invalid_config_and_writes_nothing(tmp_path, capsys, text, expect):
    from slurm_energy.cli.main import main

    site = tmp_path / "site.yaml"
    if text is not None:
        site.write_text(text)
    assert main(["install", "--hooks-dir", str(tmp_path / "hooks"), "--config", str(site)]) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and not (tmp_path / "hooks").exists()  # no hooks, no slurm.conf lines to paste
    assert cap.err.startswith(f"slurm-energy install: --config {site} cannot be used; nothing was written:\n")
    for part in expect:
        assert part in cap.err, cap.err
    assert f"`slurm-energy check-config {site}` checks it" in cap.err


def test_install_cron_lines_log_to_the_sites_log_dir(tmp_path, capsys):
    import sys

    from slurm_energy.cli.main import main

    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\npaths:\n  log_dir: {tmp_path}/se-logs\n")
    assert main(["install", "--hooks-dir", str(tmp_path / "hooks"), "--config", str(site)]) == 0
    out = capsys.readouterr().out.splitlines()
    py = sys.executable
    # collect every 5 min, prune weekly: both append stdout and stderr to paths.log_dir (not a
    # hard-coded /var/log/slurm-energy), creating it root-only where no hook ran yet (the controller)
    assert f"# */5 * * * * mkdir -p -m 0700 {tmp_path}/se-logs && SLURM_ENERGY_CONFIG={site} {py} -I -m " \
           f"slurm_energy.cli.main collect --older-than 5 >>{tmp_path}/se-logs/collect.log 2>&1" in out
    assert f"# 17 3 * * 0 mkdir -p -m 0700 {tmp_path}/se-logs && SLURM_ENERGY_CONFIG={site} {py} -I -m " \
           f"slurm_energy.cli.main prune --older-than 14 >>{tmp_path}/se-logs/prune.log 2>&1" in out
    assert not any("/var/log/slurm-energy" in x for x in out)

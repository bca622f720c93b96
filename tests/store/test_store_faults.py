"""Store rules under faults: a ``no_data`` placeholder never hides a measured record, and readers
never create or modify the store (SQLite ``mode=ro``, PostgreSQL read-only sessions)."""

from __future__ import annotations

import os

import pytest

from slurm_energy.cli.jobenergy_format import FIELDS, long_rows, report_code
from slurm_energy.errors import StoreDbError
from slurm_energy.model import Status
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record, store_with
from tests.helpers.store_backends import store, store_url  # noqa: F401  (fixtures)


def _no_data(job_id: str, start: float = 1000.0):
    rec = finished(node_record(job_id=job_id, start=start, end=start + 60, cpu_j=None, ram_j=None,
                               status=Status.NO_DATA))
    rec.status = Status.NO_DATA
    rec.errors = ["spool unusable at the Epilog: [Errno 28] No space left on device"]
    return rec


def test_measured_record_replaces_no_data_and_no_data_never_replaces_measured(store):
    store.put(_no_data("700", start=1000.0))
    measured = finished(node_record(job_id="700", start=1002.5, end=1060.0, cpu_j=3.6e6))
    store.put(measured)  # collect finished it from the node's spool later: start time is the Prolog's
    (got,) = store.get_job("700")
    # 3.6e6 J CPU + 3.6e5 J RAM = 3.96e6 J = 1.1 kWh, status complete, the placeholder gone
    assert got.status == Status.COMPLETE and got.it_kwh == pytest.approx(1.1)
    store.put(_no_data("700", start=1000.0))  # a late spool-less finalizer: ignored
    assert [r.status for r in store.get_job("700")] == [Status.COMPLETE]


def test_running_record_after_no_data_is_ignored(store):
    store.put(_no_data("701"))
    running = finished(node_record(job_id="701", start=1001.0, end=1030.0))
    running.status = Status.RUNNING
    store.put(running)  # a sampler that outlived the Epilog must not make the job look running again
    assert [r.status for r in store.get_job("701")] == [Status.NO_DATA]


def test_report_error_is_shown_beside_the_status():
    rec = finished(node_record(job_id="702"))
    rec.report_error = "/home/a/w not writable by alice; make it writable or use sbatch --chdir"
    # the table keeps it short (a code); the full text is in -l's report row and -o ReportError
    assert FIELDS["status"](rec, {}) == "complete(estimated) (no report: permission_denied)"  # cpu, ram: TDP model
    assert FIELDS["reporterror"](rec, {}) == rec.report_error
    (row,) = [r for r in long_rows(rec, "702") if r[2] == "report"]
    assert row[3] == "not written" and row[-1] == ("permission_denied: /home/a/w not writable by alice; "
                                                   "make it writable or use sbatch --chdir")


@pytest.mark.parametrize("text, code", [
    ("/w not written as bob: [Errno 13] Permission denied: '/w/energy-1.html'; make it writable", "permission_denied"),
    ("/w not written as bob: [Errno 30] Read-only file system; the energy is in `jobenergy -l 1`", "read_only_fs"),
    ("/w not written as bob: [Errno 28] No space left on device; ...", "disk_full"),
    ("/w not written as bob: [Errno 2] No such file or directory; ...", "no_work_dir"),
    ("/w not written as bob: rendering failed: KeyError: 'x'; ...", "render_failed"),
    ("/w not written as bob: something else", "write_failed"),
    # root writes no report for a uid-0 job, nor into a directory its user does not own (ordinary users' attacks)
    ("/tmp not written: the job's user is root (uid 0); root writes no report as root; the energy is in "
     "`jobenergy -l 14`", "user_is_root"),
    ("/srv/x not written as bob: [Errno 1] the directory belongs to uid 0, not to the job's user (uid 1001): "
     "root writes a report only into a directory of the job's user", "not_users_dir"),
])
def test_report_reason_codes(text, code):
    assert report_code(text) == code


def test_jobenergy_table_stays_narrow_with_a_long_report_reason(tmp_path, site_config, monkeypatch, capsys):
    from slurm_energy.cli.jobenergy import main

    site_config.write(bare=True, cluster_name="c1")
    rec = finished(node_record(job_id="706"))
    rec.report_error = ("/home/alice/a/very/long/work/dir not written as alice: [Errno 13] Permission denied: "
                        "'/home/alice/a/very/long/work/dir/energy-706.html'; make it writable by alice or submit "
                        "from a writable directory (sbatch --chdir=DIR); the energy is in `jobenergy -l 706`")
    url = store_with(tmp_path, rec)
    assert main(["--store", url, "-j", "706", "-P", "-n", "-o", "JobID,Status"]) == 0
    assert capsys.readouterr().out.strip() == "706|complete(estimated) (no report: permission_denied)"
    assert main(["--store", url, "-j", "706", "-P", "-n", "-l"]) == 0
    assert rec.report_error in capsys.readouterr().out


def test_reader_never_creates_a_missing_or_empty_sqlite_store(tmp_path):
    missing = tmp_path / "typo" / "jobs.db"
    with pytest.raises(RuntimeError, match=f"store {missing} does not exist"):
        open_store(f"sqlite:///{missing}", readonly=True)
    assert not missing.parent.exists()  # not even the directory
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(RuntimeError, match=f"store {empty} is an empty file"):
        open_store(f"sqlite:///{empty}", readonly=True)
    assert empty.stat().st_size == 0


def test_a_new_sqlite_store_appears_with_its_schema_never_empty(tmp_path, monkeypatch):
    """The first job's finalizer creates the store while jobenergy (or a test) polls for it: the
    file appears at its path only once it has its schema (CI saw "store ... is an empty file")."""
    from slurm_energy.store import schema

    db = tmp_path / "jobs.db"
    seen: list[bool] = []
    real = schema.migrate
    monkeypatch.setattr(schema, "migrate", lambda conn: seen.append(db.exists()) or real(conn))
    open_store(f"sqlite:///{db}").close()
    assert seen[0] is False  # the schema was made before anything was at the store's path
    assert open_store(f"sqlite:///{db}", readonly=True).get_job("1") == []
    assert db.stat().st_mode & 0o777 == 0o644  # root writes, everyone reads
    # no temporary file left; the WAL files kept (empty) for read-only users (issue 22)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["jobs.db", "jobs.db-shm", "jobs.db-wal"]


def test_readonly_sqlite_store_is_not_modified(tmp_path):
    url = f"sqlite:///{tmp_path}/jobs.db"
    w = open_store(url)
    w.put(finished(node_record(job_id="703")))
    w.close()
    before = os.stat(tmp_path / "jobs.db")
    r = open_store(url, readonly=True)  # as root here too: mode=ro, not file permissions, protects it
    assert [x.job_id for x in r.get_job("703")] == ["703"]
    with pytest.raises(PermissionError):
        r.put(finished(node_record(job_id="704")))
    with pytest.raises(StoreDbError, match="readonly"):
        r.db.execute("DELETE FROM job_records")
    r.close()
    after = os.stat(tmp_path / "jobs.db")
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_readonly_store_session_refuses_writes(store_url):
    open_store(store_url).close()  # the schema exists (written by the hooks)
    r = open_store(store_url, readonly=True)
    with pytest.raises(StoreDbError, match="read-only|readonly"), r.db.transaction():
        r.db.execute("DELETE FROM job_records")
    r.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="writing a report as another user needs root")
def test_unwritable_work_dir_makes_the_status_say_no_report(tmp_path):
    from slurm_energy.config import Paths, SiteConfig
    from slurm_energy.slurm.jobend.publish import store_and_report

    wd = tmp_path / "work"  # root's 0755 directory: user nobody cannot create files in it
    wd.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    cfg = SiteConfig(paths=Paths(spool_dir=str(tmp_path / "spool"), store_url=f"sqlite:///{tmp_path}/jobs.db"))
    rec = finished(node_record(job_id="705", work_dir=str(wd), uid=65534, gid=65534, user="nobody"))
    store_and_report(cfg, rec)
    (got,) = open_store(cfg.paths.store_url, readonly=True).get_job("705")
    assert got.report_error.startswith(f"{wd} not written as nobody: ")
    assert "Permission denied" in got.report_error and "sbatch --chdir=DIR" in got.report_error
    assert FIELDS["status"](got, {}) == "complete(estimated) (no report: permission_denied)"
    assert not list(wd.iterdir())


def _leave_hot_journal(db: str) -> None:
    """A writer SIGKILLed mid-commit, as an interim flush cut off by its sampler's stop: a child
    changes enough pages that SQLite spills them (the old pages go to ``<db>-journal``) and is
    killed inside the transaction."""
    import signal
    import sqlite3
    import time

    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            c = sqlite3.connect(db)
            c.execute("PRAGMA cache_size=10")  # 10 pages: the change spills to the file, the journal is hot
            c.execute("BEGIN IMMEDIATE")
            c.execute("CREATE TABLE scratch(x)")
            c.executemany("INSERT INTO scratch VALUES (?)", [(i,) for i in range(50_000)])
            os.write(ready_w, b"x")
            time.sleep(60)
        finally:
            os._exit(1)
    os.read(ready_r, 1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert os.path.getsize(db + "-journal") > 0


def test_reader_waits_for_a_killed_writers_journal_then_reads(tmp_path, monkeypatch):
    """SQLite lets only a writer roll back a killed writer's journal; a ``mode=ro`` reader got
    "attempt to write a readonly database" until then (seen in e2e, once an interim flush could be
    SIGKILLed). The reader now waits for the next writer (here 0.5 s later) and reads the job;
    with no writer within the wait it is a StoreError saying what to run."""
    import threading

    from slurm_energy.errors import StoreError
    from slurm_energy.store import db as fast

    db = str(tmp_path / "jobs.db")
    url = f"sqlite:///{db}"
    st = open_store(url)
    st.put(finished(node_record(job_id="710", start=1000.0, end=1060.0, cpu_j=3.6e6)))
    st.close()
    import sqlite3

    c = sqlite3.connect(db)  # a store written before WAL (issue 22): rollback-journal mode
    c.execute("PRAGMA journal_mode=DELETE")
    c.close()
    _leave_hot_journal(db)
    monkeypatch.setattr(fast, "HOT_JOURNAL_WAIT_S", 0.5)
    with pytest.raises(StoreError, match="killed mid-write.*slurm-energy collect"):
        fast.check_readable_sqlite(db)

    def writer():  # the job's finalizer opening the store a moment later rolls the journal back
        w = open_store(url)
        w.close()

    t = threading.Timer(0.5, writer)
    t.start()
    monkeypatch.setattr(fast, "HOT_JOURNAL_WAIT_S", 20.0)
    ro = open_store(url, readonly=True)
    try:
        (got,) = ro.get_job("710")
    finally:
        ro.close()
        t.join()
    # 3.6e6 J CPU + 3.6e5 J RAM (node_record's default) = 3.96e6 J = 1.1 kWh: the committed record
    assert got.it_kwh == pytest.approx(1.1)


def test_long_rows_say_why_a_record_is_partial():
    # -l showed `partial` with no reason (the errors were only in --json, -o Errors and the report):
    # one `error` row per error, numbered, the full text in the last column
    rec = finished(node_record(job_id="703"))
    rec.status = Status.PARTIAL
    rec.errors = ["epilog: sampler not_running", "sampler gone without a final sample (killed ...)"]
    rows = [r for r in long_rows(rec, "703") if r[2] == "error"]
    assert [(r[3], r[-1]) for r in rows] == [("1", "epilog: sampler not_running"),
                                             ("2", "sampler gone without a final sample (killed ...)")]

"""A reader holding a transaction on the SQLite store must not delay a concurrent put (issue 22:
WAL mode); another writer holding the write lock is waited out and retried.

The reader is a separate process with its own read-only connection, as a user's ``sqlite3`` would
be: ``BEGIN; SELECT ...`` then hold its snapshot for 2 s. The blocking writer: ``BEGIN IMMEDIATE``.
"""

import subprocess
import sys
import time

import pytest

from slurm_energy.errors import StoreDbError
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record

HOLD_S = 2.0

_READER = """
import sqlite3, sys, time
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, isolation_level=None)
c.execute("BEGIN")
c.execute("SELECT count(*) FROM job_records").fetchone()
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
c.execute("COMMIT")
"""
_WRITER = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
c.execute("COMMIT")
"""


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "spool" / "jobs.db"
    s = open_store(f"sqlite:///{path}")
    s.put(finished(node_record(job_id="1")))
    s.close()
    return path


def _hold_reader(path, code=_READER):
    p = subprocess.Popen([sys.executable, "-c", code, str(path), str(HOLD_S)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "holding"
    return p, time.monotonic()


def test_a_reader_holding_a_transaction_does_not_delay_a_put(db):
    # issue 22: any user could hold `BEGIN; SELECT` on the world-readable store and stall every
    # finalizer (rollback-journal mode); in WAL mode the put commits at once beside the reader
    s = open_store(f"sqlite:///{db}", busy_timeout_s=0.2)
    s.put_attempts = 1  # no retry: a lock would fail it
    reader, t0 = _hold_reader(db)
    try:
        s.put(finished(node_record(job_id="2", cpu_j=7.2e6)))
        waited = time.monotonic() - t0
        assert reader.poll() is None  # the reader still holds its transaction
    finally:
        reader.wait()
    assert waited < HOLD_S / 2
    [r] = s.get_job("2")
    # 7.2e6 J CPU + 3.6e5 J RAM = 7.56e6 J = 2.1 kWh
    assert r.it_kwh == pytest.approx(2.1)
    assert s.db.execute("PRAGMA journal_mode") == [("wal",)]
    s.close()


def test_short_busy_timeout_without_retry_fails_locked(db):
    # the control: another writer's lock is real, so one 0.2 s attempt fails while it holds it
    s = open_store(f"sqlite:///{db}", busy_timeout_s=0.2)
    s.put_attempts = 1
    reader, _ = _hold_reader(db, _WRITER)
    try:
        with pytest.raises(StoreDbError, match="database is locked"):
            s.put(finished(node_record(job_id="3")))
    finally:
        reader.wait()
    assert s.get_job("3") == []
    s.close()


def test_put_retries_until_the_other_writer_is_gone(db):
    s = open_store(f"sqlite:///{db}", busy_timeout_s=0.2)
    s.put_attempts, s.retry_wait_s = 5, 0.5
    reader, _ = _hold_reader(db, _WRITER)
    try:
        # attempts end at about 0.2, 0.9, 2.1 s (0.2 s busy wait each, pauses 0.5 then 1.0 s):
        # the third or fourth (at about 4.3 s) comes after the 2 s reader has committed
        s.put(finished(node_record(job_id="4")))
    finally:
        reader.wait()
    [r] = s.get_job("4")
    # 3.6e6 J + 3.6e5 J = 3.96e6 J = 1.1 kWh
    assert r.it_kwh == pytest.approx(1.1)
    s.close()


def test_sqlite_first_open_racing_another_creator_is_retried(tmp_path):
    """Another process has created job_records but not yet its schema_version row (pysqlite runs DDL
    outside a transaction): the loser's CREATE fails "already exists", and is retried until the
    winner's version row is there (seen in the hook tests: finalizer and test opening one store)."""
    import sqlite3
    import threading

    from slurm_energy.store import schema
    from slurm_energy.store.db import connect

    db = tmp_path / "race.db"
    c = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    c.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for ddl in schema._v1_ddl("sqlite"):  # winner mid-migration: tables, no version row yet
        c.execute(ddl)

    t = threading.Timer(0.3, lambda: c.execute("INSERT INTO schema_version (version) VALUES (1)"))
    t.start()
    try:
        assert schema.migrate(connect(f"sqlite:///{db}")) == schema.SCHEMA_VERSION
    finally:
        t.join()
    assert schema.current_version(connect(f"sqlite:///{db}")) == schema.SCHEMA_VERSION  # the loser ran v1 -> v3


def test_put_retries_sqlite_locking_protocol(db, monkeypatch):
    # SQLITE_PROTOCOL ("locking protocol", sqlite.org/rescode.html#protocol) is WAL's transient
    # race on the wal-index: seen in the job-end fault burst, where it sent a record to collect's
    # queue instead of the store. The put is retried like "database is locked".
    s = open_store(f"sqlite:///{db}")
    s.put_attempts, s.retry_wait_s = 3, 0.01
    real, calls = s._put_once, []

    def racing_once(record, merge_running):
        calls.append(1)
        if len(calls) == 1:
            raise StoreDbError("store sqlite:///x: locking protocol")
        return real(record, merge_running)

    monkeypatch.setattr(s, "_put_once", racing_once)
    s.put(finished(node_record(job_id="5", cpu_j=3.6e6)))
    assert len(calls) == 2
    [r] = s.get_job("5")
    # 3.6e6 J CPU + 3.6e5 J RAM = 3.96e6 J = 1.1 kWh
    assert r.it_kwh == pytest.approx(1.1)
    s.close()


def test_open_retries_sqlite_locking_protocol_in_the_schema_check(db, monkeypatch):
    # every writer's open checks the schema in a write transaction; SQLITE_PROTOCOL there (the
    # same WAL race as in a put) is retried too, not turned into "store failed"
    from slurm_energy.store import schema

    open_store(f"sqlite:///{db}").close()  # the schema exists
    real, calls = schema._migrate_once, []

    def racing_once(d):
        calls.append(1)
        if len(calls) == 1:
            raise StoreDbError("store sqlite:///x: locking protocol")
        return real(d)

    monkeypatch.setattr(schema, "_migrate_once", racing_once)
    s = open_store(f"sqlite:///{db}")
    s.put(finished(node_record(job_id="6", cpu_j=7.2e6)))
    assert len(calls) == 2
    [r] = s.get_job("6")
    # 7.2e6 J CPU + 3.6e5 J RAM = 7.56e6 J = 2.1 kWh
    assert r.it_kwh == pytest.approx(2.1)
    s.close()

"""Issue 22: an ordinary user's reader cannot stall accounting, and can still read (WAL mode).

Real processes as the unprivileged ``nobody`` (uid 65534) against a root-owned store in a
root-owned 0755 directory, as on a site: the user's ``sqlite3`` holding ``BEGIN; SELECT`` does not
delay the finalizer's put; with no writer connected the user still reads (the writer leaves the
-wal/-shm files, empty, which a read-only connection needs); a writer SIGKILLed mid-transaction
loses nothing committed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the reader as nobody")

_READ = """
import sqlite3, sys, time
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro" + (sys.argv[3] if len(sys.argv) > 3 else ""), uri=True,
                    isolation_level=None)
c.execute("BEGIN")
n = c.execute("SELECT count(*) FROM job_records").fetchone()[0]
print(n, flush=True)
time.sleep(float(sys.argv[2]))
c.execute("COMMIT")
"""


def _as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


@pytest.fixture
def db():
    d = tempfile.mkdtemp(prefix="se-wal-", dir="/var/tmp")
    os.chmod(d, 0o755)
    path = os.path.join(d, "jobs.db")
    s = open_store(f"sqlite:///{path}")
    s.put(finished(node_record(job_id="1")))
    s.close()
    yield path
    shutil.rmtree(d, ignore_errors=True)


def _reader(path, hold_s, extra="&immutable=1"):
    """nobody's sqlite3 reader of ``path``: lock-free (``immutable=1``, what jobenergy opens as a
    user) unless ``extra`` is "" (a plain ``mode=ro`` reader, which needs the 0600 ``-shm``)."""
    p = subprocess.Popen([sys.executable, "-c", _READ, path, str(hold_s), extra], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_as_nobody)
    line = p.stdout.readline().strip()
    return p, line


@needs_root
def test_a_user_holding_a_read_transaction_does_not_stall_the_finalizers_put(db):
    reader, n = _reader(db, 3.0)
    assert n == "1", reader.stderr.read()  # nobody reads the root-owned store, no writer connected
    s = open_store(f"sqlite:///{db}", busy_timeout_s=0.5)
    s.put_attempts = 1
    t0 = time.monotonic()
    s.put(finished(node_record(job_id="2", cpu_j=7.2e6)))
    took = time.monotonic() - t0
    assert reader.poll() is None  # still holding its transaction
    reader.wait()
    assert took < 1.0
    # the victim's record is there: 7.2e6 J CPU + 3.6e5 J RAM = 7.56e6 J = 2.1 kWh
    assert s.get_job("2")[0].it_kwh == pytest.approx(2.1)
    s.close()
    # and the user still reads after the writer closed (files kept, root's, not readable by users)
    again, n = _reader(db, 0)
    again.wait()
    assert n == "2"
    for suffix in ("-wal", "-shm"):
        st = os.stat(db + suffix)
        assert st.st_uid == 0 and st.st_mode & 0o077 == 0
    # a reader that would lock (plain mode=ro) cannot open the store at all: it needs the -shm
    plain, n = _reader(db, 0, "")
    plain.wait()
    assert n == "" and "unable to open database file" in plain.stderr.read()


@needs_root
def test_a_writer_killed_mid_transaction_loses_nothing_committed_and_users_still_read(db):
    import sqlite3

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            c = sqlite3.connect(db, isolation_level=None)
            c.execute("BEGIN IMMEDIATE")
            c.execute("DELETE FROM job_records")
            os.write(w, b"x")
            time.sleep(60)
        finally:
            os._exit(1)
    os.read(r, 1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    reader, n = _reader(db, 0)
    reader.wait()
    assert n == "1", reader.stderr.read()
    s = open_store(f"sqlite:///{db}")
    assert [x.job_id for x in s.get_job("1")] == ["1"]
    s.close()


def test_no_wal_on_a_network_filesystem(tmp_path, monkeypatch):
    # SQLite's WAL index is shared memory of one host: a store on NFS stays in rollback-journal mode
    from slurm_energy.store import db as opening

    mounts = tmp_path / "mounts"
    mounts.write_text(f"server:/export {tmp_path} nfs4 rw,relatime 0 0\n/dev/sda1 / ext4 rw 0 0\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: real_open(mounts if p == "/proc/mounts" else p, *a, **k))
    assert opening.network_fs(str(tmp_path / "jobs.db")) == "nfs4"
    s = open_store(f"sqlite:///{tmp_path}/jobs.db")
    assert s.db.execute("PRAGMA journal_mode") == [("delete",)]
    s.close()
    assert opening.network_fs("/") == ""

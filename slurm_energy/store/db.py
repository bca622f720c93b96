"""The store's database connection: stdlib ``sqlite3`` or ``psycopg`` (3), SQL as text.

Every statement of the store is written once, as SQL text with ``:name`` parameters (sqlite3's
named style); for psycopg :func:`pg_sql` turns them into ``%(name)s``. :class:`Db` wraps one
connection of either driver with the same three calls (``execute``, ``executemany``,
``transaction``) and turns each driver's errors into :class:`slurm_energy.errors.StoreDbError`.

SQLite files: :func:`connect` creates a missing store atomically (:func:`create_sqlite_store`),
opens readers with ``mode=ro`` (a missing or empty file is an error, never a new database), and
switches writers to WAL (:func:`use_wal`), keeping the ``-wal``/``-shm`` files a reader needs
(:func:`keep_wal_files`). See :mod:`slurm_energy.store.sqlstore` (Locking) and docs/STORE.md.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from slurm_energy.errors import StoreDbError, StoreError

FIX = "check paths.store_url in site.yaml (or --store / $SLURM_ENERGY_STORE)"
#: SQLite busy timeout of every connection, s: how long one statement waits for a lock held by
#: another connection before "database is locked" (Python's ``sqlite3.connect(timeout=...)``).
BUSY_TIMEOUT_S = 30.0
#: how long a reader waits for a writer to roll back a killed writer's journal, s
HOT_JOURNAL_WAIT_S = 10.0

_NAME = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def pg_sql(sql: str) -> str:
    """``:name`` parameters as psycopg's ``%(name)s`` (a literal ``%`` doubled)."""
    return _NAME.sub(r"%(\1)s", sql.replace("%", "%%"))


class Db:
    """One connection (``dialect``: ``sqlite`` or ``postgresql``), in autocommit mode outside
    :meth:`transaction`. Every driver error is raised as StoreDbError (the driver's as its cause)."""

    def __init__(self, conn: Any, dialect: str, errors: tuple[type[BaseException], ...], name: str):
        self.conn, self.dialect, self.errors, self.name = conn, dialect, errors, name

    def _sql(self, sql: str) -> str:
        return pg_sql(sql) if self.dialect == "postgresql" else sql

    def _raise(self, e: BaseException) -> None:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise StoreDbError(f"store {self.name}: {first}") from e

    #: a lock-free SQLite reader (:func:`reader_uri`): it may catch the writer's checkpoint half
    #: done, which SQLite reports as a malformed image; the statement is run again then
    lockfree = False

    def execute(self, sql: str, params: dict | None = None) -> list[tuple]:
        """Run one statement; its rows (``[]`` for one that returns none)."""
        for attempt in range(4 if self.lockfree else 1):
            try:
                cur = self.conn.execute(self._sql(sql), params or {})
                return cur.fetchall() if cur.description else []
            except self.errors as e:
                if attempt < 3 and self.lockfree and "malformed" in str(e):
                    time.sleep(0.05)
                    continue
                self._raise(e)
                raise
        raise AssertionError("unreachable")

    def executemany(self, sql: str, seq: Sequence[dict]) -> None:
        """Run one statement per parameter dict (no rows)."""
        if not seq:
            return
        try:
            self.conn.cursor().executemany(self._sql(sql), seq)
        except self.errors as e:
            self._raise(e)

    def insert_returning(self, sql: str, seq: Sequence[dict]) -> list[int]:
        """``INSERT ... RETURNING id`` once per parameter dict; the ids in order."""
        try:
            if self.dialect == "postgresql":
                cur = self.conn.cursor()
                cur.executemany(self._sql(sql), seq, returning=True)
                ids = []
                while True:
                    ids.append(cur.fetchone()[0])
                    if not cur.nextset():
                        return ids
            return [self.conn.execute(sql, p).fetchone()[0] for p in seq]
        except self.errors as e:
            self._raise(e)
            raise

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[Db]:
        """One transaction; committed on leaving, rolled back on an exception. SQLite: a writer's
        is ``BEGIN IMMEDIATE`` (the write lock is taken, or waited for, up front)."""
        if self.dialect == "postgresql":
            try:
                with self.conn.transaction():
                    yield self
            except self.errors as e:
                self._raise(e)
            return
        self.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield self
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self.execute("COMMIT")
        if write:  # into the main file now: what users' lock-free readers (reader_uri) read
            try:
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except self.errors:
                pass

    def close(self) -> None:
        try:
            self.conn.close()
        except self.errors:
            pass


def sqlite_file(url: str) -> str:
    """The file of a ``sqlite:///<path>`` URL (``urls.check_store_url`` has checked it)."""
    return url.partition("://")[2][1:].partition("?")[0]


def _ro_uri(path: str) -> str:
    """SQLite's read-only URI of ``path``."""
    return "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=ro"


def connect(url: str, *, readonly: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S) -> Db:
    """A :class:`Db` on a checked store URL (``sqlite:////abs/path`` or ``postgresql[+psycopg]://``).

    Readers: SQLite ``mode=ro``, after :func:`check_readable_sqlite`; PostgreSQL sessions with
    ``default_transaction_read_only=on``. Every PostgreSQL session has JIT off (it compiles the
    store's short queries for longer than they run: 0.4 s measured on the month's rollup).

    Raises StoreError: a reader's SQLite file is missing or empty; StoreDbError: the database
    refuses the connection."""
    from slurm_energy.store.urls import shown_url

    name = shown_url(url)
    raw: Any
    if url.startswith("sqlite"):
        path = sqlite_file(url)
        try:
            if readonly:
                check_readable_sqlite(path)
                uri = reader_uri(path)
                raw = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None,
                                      check_same_thread=False)
            else:
                uri = ""
                raw = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreDbError(f"store {name}: {e}") from e
        db = Db(raw, "sqlite", (sqlite3.Error,), name)
        db.lockfree = uri.endswith("&immutable=1")
        return db
    import psycopg

    opts = "-c jit=off" + (" -c default_transaction_read_only=on" if readonly else "")
    try:
        raw = psycopg.connect("postgresql://" + url.partition("://")[2], autocommit=True, options=opts)
    except psycopg.Error as e:
        raise StoreDbError(f"store {name}: {(str(e).strip().splitlines() or [''])[0]}") from e
    return Db(raw, "postgresql", (psycopg.Error,), name)


# -- SQLite files ---------------------------------------------------------------------------


def check_readable_sqlite(path: str) -> None:
    """A reader never creates a store: a missing or empty file is a StoreError naming the path."""
    if not os.path.exists(path):
        raise StoreError(f"store {path} does not exist (no job recorded yet, or a mistyped path); {FIX}")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise StoreError(f"store {path} is an empty file, not a slurm-energy store; {FIX}")
    wait_for_hot_journal(path)


def wait_for_hot_journal(path: str, wait_s: float | None = None) -> None:
    """Wait while ``<path>-journal`` is a hot journal: a writer killed mid-commit (an interim flush
    cut off when its sampler stopped, a SIGKILLed finalizer) leaves one, and SQLite's rule is that
    only a connection that can write rolls it back; a ``mode=ro`` reader gets "attempt to write a
    readonly database" (SQLITE_READONLY_ROLLBACK) until the next writer (the job's finalizer,
    ``collect``) opens the store. One ``stat`` when there is no journal (the normal case).

    Raises StoreError after ``wait_s`` seconds (default :data:`HOT_JOURNAL_WAIT_S`) still hot,
    saying what to run."""
    deadline = time.monotonic() + (HOT_JOURNAL_WAIT_S if wait_s is None else wait_s)
    while True:
        try:
            if os.stat(path + "-journal").st_size == 0:
                return
        except OSError:
            return  # no journal
        try:
            conn = sqlite3.connect(_ro_uri(path), uri=True, timeout=1.0)
            try:
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
                return  # a live writer's journal: reads go on
            finally:
                conn.close()
        except sqlite3.OperationalError as e:
            if "readonly" not in str(e):
                return  # not ours to judge: the read itself reports it
        if time.monotonic() > deadline:
            raise StoreError(f"store {path} holds the journal of a writer killed mid-write; only a writer rolls it "
                             "back: run `slurm-energy collect` as root (or wait for the next job's finalizer)")
        time.sleep(0.2)


def create_sqlite_store(path: str, migrate: Callable[[Db], int]) -> None:
    """Create the store file ``path`` (its directory 0755 when missing) with its schema
    (``migrate``) under a temporary name in the same directory, then hard-link it into place, so
    that a reader (``jobenergy``, ``collect``) never sees an empty or half-made store while the first
    job's finalizer creates it. The mode is exact: root writes, everyone reads (docs/STORE.md). Two
    processes creating it at once: the first link wins, the other's file is dropped. Raises OSError
    (directory not writable) or StoreDbError from the migration."""
    d = os.path.dirname(path)
    if not os.path.exists(d):
        os.makedirs(d, mode=0o755)
    if os.path.exists(path):
        return
    tmp = os.path.join(d, f".{os.path.basename(path)}.{os.getpid()}.new")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    try:
        os.chmod(tmp, 0o644)
        db = connect("sqlite:///" + tmp)
        try:
            migrate(db)
        finally:
            db.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process's store is in place: use it
    finally:
        for f in (tmp, tmp + "-journal"):
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass


def keep_wal_files(db: str) -> None:
    """Make ``<db>-wal`` and ``<db>-shm`` exist (empty, **0600**, owned by the store's owner) where
    they are missing, and make existing ones of the owner's 0600: in WAL mode SQLite's last
    connection removes both on close and a new one would create them with the store's own mode
    (0644), and an ordinary user who can open ``-shm`` can take a POSIX lock on its write-lock byte
    (every write then fails) or hold a read snapshot (the WAL then grows until the disk fills).
    Users read through :func:`reader_uri` instead: ``immutable=1``, no lock taken, the main file
    only (the writer checkpoints after each commit, :meth:`Db.transaction`). Only the store's owner
    makes or changes them (O_EXCL / O_NOFOLLOW, no symlink followed). Never raises."""
    try:
        st = os.stat(db)
    except OSError:
        return
    if os.geteuid() not in (0, st.st_uid):
        return
    for suffix in ("-wal", "-shm"):
        try:
            fd = os.open(db + suffix, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            try:
                fd = os.open(db + suffix, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
        except OSError:  # the directory is not ours
            continue
        try:
            got = os.fstat(fd)
            if got.st_uid in (os.geteuid(), st.st_uid) and got.st_mode & 0o077:
                os.fchmod(fd, 0o600)  # the owner's only, whatever the umask or the store's mode
            if os.geteuid() == 0 and got.st_uid != st.st_uid:
                os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:
            pass
        finally:
            os.close(fd)


def reader_uri(path: str) -> str:
    """SQLite's URI for a reader of ``path``: ``mode=ro``, and ``immutable=1`` where the reader
    cannot open the WAL index (``-shm``, 0600: an ordinary user): such a reader takes no lock at
    all, so it can neither block the writer nor hold a snapshot that keeps the WAL growing, and
    reads what the writer's checkpoint after each commit put in the main file."""
    uri = _ro_uri(path)
    if os.path.exists(path + "-shm") and not os.access(path + "-shm", os.R_OK):
        uri += "&immutable=1"
    return uri


#: Filesystems WAL must not be used on: SQLite's WAL index is shared memory, which works only among
#: processes of one host ("WAL does not work over a network filesystem", sqlite.org/wal.html).
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "9p",
              "fuse", "afs", "ocfs2", "gfs2")


def network_fs(path: str) -> str:
    """The type of the filesystem holding ``path`` when it is one of :data:`NETWORK_FS` (``fuse.*``
    included), else '' (local, or /proc/mounts unreadable)."""
    real = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, kind = mnt, parts[2]
    except OSError:
        return ""
    return kind if kind.split(".")[0] in NETWORK_FS else ""


def use_wal(db: Db, path: str) -> None:
    """Switch the store to WAL (a persistent property of the file; once), then keep its files. Not
    on a network filesystem (:func:`network_fs`): there the store stays in rollback-journal mode
    (docs/STORE.md: use PostgreSQL for a store shared by hosts)."""
    if network_fs(path):
        return
    try:
        if str(db.execute("PRAGMA journal_mode")[0][0]).lower() != "wal":
            db.execute("PRAGMA journal_mode=WAL")
    except StoreDbError:  # a rollback-mode reader holds the file now: the next writer switches
        pass
    keep_wal_files(path)


def retried(fn: Callable[[], Any], attempts: int, wait_s: float, retry_if: Callable[[StoreDbError], bool],
            on_retry: Callable[[int, float], None] | None = None) -> Any:
    """``fn()``, run again after a StoreDbError that ``retry_if`` accepts, ``attempts`` runs in all,
    pausing ``wait_s`` s before the second, doubling (``on_retry(attempt, pause)`` before each pause).
    Raises the last StoreDbError, or the first that ``retry_if`` refuses."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except StoreDbError as e:
            if attempt == attempts or not retry_if(e):
                raise
            if on_retry is not None:
                on_retry(attempt, wait_s)
            time.sleep(wait_s)
            wait_s *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def chunks(items: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    """``items`` in slices of at most ``n``."""
    return (items[k:k + n] for k in range(0, len(items), n))

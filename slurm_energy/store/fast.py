"""The store's light read paths: ``jobenergy`` (summary table, ``-j``, ``-S/-E`` windows) and
``rollup`` (table/csv/json) without SQLAlchemy or pydantic, so the whole CLI run is faster than
``sacct -j`` answers.

SQLite through Python's ``sqlite3``; PostgreSQL through libpq with ctypes (:mod:`slurm_energy.store.libpq`:
importing psycopg alone costs more than sacct). Both run the SQL the SQLAlchemy path runs
(:mod:`slurm_energy.store.select`, :mod:`slurm_energy.store.rollup`) with the same parameters, in one
read-only transaction, and give the same rows (tests/store/test_fast_readers.py compares them).

:func:`read_rows` and :func:`rollup` return None when they cannot answer (a SQLite URL that is not
plain ``sqlite:////abs/path``, no libpq here, a server that refuses the connection, a schema this
reader does not know, any database error): the caller then takes the SQLAlchemy path, which names
the problem as :func:`slurm_energy.store.open_store` does.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from slurm_energy.errors import StoreError
from slurm_energy.store import select as Q

#: the store layout this reader knows (schema.SCHEMA_VERSION when it was written; a test keeps them equal)
READS_VERSION = 3
FIX = "check paths.store_url in site.yaml (or --store / $SLURM_ENERGY_STORE)"
VERSION_SQL = "SELECT max(version) FROM schema_version"


def check_readable_sqlite(path: str) -> None:
    """A reader never creates a store: a missing or empty file is a StoreError naming the path."""
    if not os.path.exists(path):
        raise StoreError(f"store {path} does not exist (no job recorded yet, or a mistyped path); {FIX}")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise StoreError(f"store {path} is an empty file, not a slurm-energy store; {FIX}")
    wait_for_hot_journal(path)


def _ro_uri(path: str) -> str:
    """SQLite's read-only URI of ``path`` (URI-escaped by hand: no urllib import)."""
    return "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=ro"


#: how long a reader waits for a writer to roll back a killed writer's journal, s
HOT_JOURNAL_WAIT_S = 10.0


def wait_for_hot_journal(path: str, wait_s: Optional[float] = None) -> None:
    """Wait while ``<path>-journal`` is a hot journal: a writer killed mid-commit (an interim flush
    cut off when its sampler stopped, a SIGKILLed finalizer) leaves one, and SQLite's rule is that
    only a connection that can write rolls it back; a ``mode=ro`` reader gets "attempt to write a
    readonly database" (SQLITE_READONLY_ROLLBACK) until the next writer (the job's finalizer,
    ``collect``) opens the store. One ``stat`` when there is no journal (the normal case).

    Raises StoreError after ``wait_s`` seconds (default :data:`HOT_JOURNAL_WAIT_S`) still hot,
    saying what to run."""
    import sqlite3
    import time

    deadline = time.monotonic() + (HOT_JOURNAL_WAIT_S if wait_s is None else wait_s)
    uri = _ro_uri(path)
    while True:
        try:
            if os.stat(path + "-journal").st_size == 0:
                return
        except OSError:
            return  # no journal
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=1.0)
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


def sqlite_path(url: str) -> Optional[str]:
    """The file of a plain ``sqlite:////abs/path`` URL (no driver, no query string), else None."""
    if not url.startswith("sqlite:////") or "?" in url:
        return None
    return url[len("sqlite:///"):]


class Reader:
    """A read-only connection: ``dialect`` (``sqlite`` / ``postgresql``) and ``execute(sql, params)
    -> rows`` with ``:name`` parameters; :meth:`close` ends it."""

    def __init__(self, dialect: str, execute: Callable[[str, dict], list], close: Callable[[], None],
                 errors: tuple[type[BaseException], ...]):
        self.dialect, self.execute, self.close, self.errors = dialect, execute, close, errors


def _sqlite(path: str) -> Optional[Reader]:
    import sqlite3

    check_readable_sqlite(path)
    conn = None
    try:
        conn = sqlite3.connect(_ro_uri(path), uri=True, timeout=30.0)
        conn.execute("BEGIN")  # one snapshot for every statement (as a SQLAlchemy connection's transaction)
        if conn.execute(VERSION_SQL).fetchone()[0] == READS_VERSION:
            c = conn
            return Reader("sqlite", lambda q, p: c.execute(q, p).fetchall(), c.close, (sqlite3.Error,))
    except sqlite3.Error:
        pass
    if conn is not None:
        conn.close()
    return None


def _postgresql(uri: str) -> Optional[Reader]:
    from slurm_energy.store import libpq

    try:
        # as open_store(readonly=True); JIT off: it compiles these short queries for longer than they run
        conn = libpq.Connection(uri, "-c default_transaction_read_only=on -c jit=off")
    except libpq.PgError:
        return None
    try:
        conn.execute("BEGIN")
        if conn.execute(VERSION_SQL)[0][0] == READS_VERSION:
            return Reader("postgresql", conn.execute, conn.close, (libpq.PgError,))
    except libpq.PgError:
        pass
    conn.close()
    return None


def connect(url: str) -> Optional[Reader]:
    """A :class:`Reader` on the store at ``url``, or None when this module cannot read it (see the
    module docstring). Raises StoreError: a plain SQLite URL whose file is missing or empty."""
    path = sqlite_path(url)
    if path is not None:
        return _sqlite(path)
    from slurm_energy.store.libpq import conninfo

    uri = conninfo(url)
    return _postgresql(uri) if uri is not None else None


def rollup(url: str, by: str, t0: float, t1: float) -> Optional[list[dict[str, Any]]]:
    """:func:`slurm_energy.store.rollup.rollup_rows` on the store at ``url`` (``rollup --month``
    without SQLAlchemy), or None when this reader cannot answer (see the module docstring).
    Raises StoreError (a missing or empty SQLite file), ValueError (another ``by``)."""
    from slurm_energy.store.rollup import rollup_rows

    r = connect(url)
    if r is None:
        return None
    try:
        return rollup_rows(r.execute, r.dialect, by, t0, t1)
    except r.errors:
        return None
    finally:
        r.close()


def top_gpu_idle(url: str, t0: float, t1: float, limit: int = 10) -> Optional[list[dict[str, Any]]]:
    """:func:`slurm_energy.store.rollup.top_gpu_idle` on the store at ``url``, or None when this
    reader cannot answer."""
    from slurm_energy.store.rollup import top_gpu_idle as top

    r = connect(url)
    if r is None:
        return None
    try:
        return top(r.execute, t0, t1, limit)
    except r.errors:
        return None
    finally:
        r.close()


def read_rows(url: str, *, full: bool = False, **filters: Any) -> Optional[list]:
    """The attempts matching ``filters`` (:func:`slurm_energy.store.select.where`'s names; ``specs``:
    parsed job ids), oldest first: :class:`~slurm_energy.store.select.JobRow` summaries, or with
    ``full`` the JobRecords (record JSON parsed: pydantic). None when this reader cannot answer
    (see the module docstring).

    Raises StoreError: a plain SQLite URL whose file is missing or empty (as ``open_store(readonly=True)``)."""
    r = connect(url)
    if r is None:
        return None
    try:
        longest = r.execute(Q.LONGEST_SQL, {})[0][0] if filters.get("start") is not None else None
        w = Q.where(**filters, longest=longest or 0.0)
        rows = [Q.JobRow(v) for v in r.execute(Q.rows_sql(w), w.params)]
        if not full:
            return rows
        from slurm_energy.model import JobRecord

        texts: dict[int, str] = {}
        ids = [row.id for row in rows]
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            marks = ", ".join(f":i{n}" for n in range(len(chunk)))
            texts.update(r.execute(f"SELECT id, record_json FROM job_json WHERE id IN ({marks})",
                                   {f"i{n}": i for n, i in enumerate(chunk)}))
        return [JobRecord.model_validate_json(texts[i]) for i in ids if i in texts]
    except r.errors:
        return None
    finally:
        r.close()

"""SQLAlchemy 2 store of JobRecords: SQLite (default, one file under the spool) or PostgreSQL.

One row per job *attempt*, key (cluster, job_id, start_time); requeued attempts are separate rows.
The full record JSON is stored; indexed copies of the query fields sit beside it (see schema.py).

Interim records (status ``running``, put by the sampler every minute while the job runs) are
special-cased so a job shows one row while running and one when done:

* a running record replaces the running row of the same (cluster, job_id, restart_count) whose
  start time is within :data:`SAME_ATTEMPT_S`; if that row came from another node, the two views
  are merged (``merge_records``) and re-totalled (``finalise_record``) with the record's carbon facts;
* a running record is ignored once a final row for that attempt exists (a late flush must not
  overwrite the Epilog's record);
* a final record deletes the attempt's running rows, then upserts on the key;
* a ``no_data`` record (the job ran but its spool was unusable: stored from the Epilog's environment
  and slurmctld) is ignored when a measured record of the attempt exists, and is replaced (with any
  running row) by a measured one that ``collect`` finishes later from the node's spool.

Access control: see docs/STORE.md. With SQLite the file is created 0644 root-owned in a 0755
directory: users can read the whole store with sqlite3 but cannot write it; jobenergy's filter to a
user's own jobs is a convenience there, not a confidentiality boundary. Use PostgreSQL roles (and
row-level security) where job energy per user must be private.

Locking (SQLite): any user may hold a read transaction on the world-readable file (``BEGIN;
SELECT ...`` in ``sqlite3``), and in SQLite's rollback-journal mode a writer cannot commit while a
reader holds its SHARED lock. Writers therefore wait up to :data:`BUSY_TIMEOUT_S` per attempt
(``sqlite3.connect(timeout=...)``, SQLite's busy handler) and :meth:`Store.put` retries a locked
database :data:`PUT_ATTEMPTS` times with a doubling pause (about 2 minutes in all), so the detached
finalizer outlasts such a reader; past that the node records stay in the results directory for
``slurm-energy collect``. WAL mode (readers never block the writer) was evaluated and *not* enabled:
a read-only (``mode=ro``) connection by an ordinary user to a WAL database in a root-owned 0755
directory fails ("attempt to write a readonly database") whenever no writer is connected, because
the last writer removes the -wal/-shm files on close and the user cannot create them (measured as
``nobody``, SQLite 3.40.1; see docs/STORE.md). ``immutable=1`` would read it but ignores locks.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from slurm_energy.errors import StoreError, StoreUrlError
from slurm_energy.model import JobRecord, Status
from slurm_energy.jobid import RUN_OVERLAP_SLACK_S, JobSpec, parse_jobid
from slurm_energy.store import schema
from slurm_energy.store.schema import jobs as T
from slurm_energy.store.urls import check_store_url, effective_url

log = logging.getLogger(__name__)

#: Interim node views whose start times differ by less than this are the same attempt, s.
#: (Prologs of one allocation start within seconds; a reused job id is months apart.)
SAME_ATTEMPT_S = 3600.0

#: ``merge_running(stored interim views, new view) -> record to store`` (see :meth:`Store.put`).
MergeRunning = Callable[[list[JobRecord], JobRecord], JobRecord]

#: SQLite busy timeout of every connection, s: how long one statement waits for a lock held by
#: another connection before "database is locked" (Python's ``sqlite3.connect(timeout=...)``).
BUSY_TIMEOUT_S = 30.0
#: :meth:`Store.put` tries a locked SQLite database this many times in all ...
PUT_ATTEMPTS = 4
#: ... pausing this long after the first failure, doubling each time (2 + 4 + 8 s), s.
PUT_RETRY_WAIT_S = 2.0

_INDEXED = (
    "cluster", "job_id", "array_job_id", "array_task_id", "het_job_id", "het_job_offset",
    "user", "uid", "account", "partition", "start_time", "end_time", "restart_count",
    "it_kwh", "facility_kwh", "co2e_kg",
)  # fmt: skip


def _row(record: JobRecord) -> dict:
    row = {k: getattr(record, k) for k in _INDEXED}
    row["status"] = record.status.value if isinstance(record.status, Status) else str(record.status)
    row["record_json"] = record.model_dump_json()
    row["updated_at"] = time.time()
    return row


def spec_condition(spec: JobSpec):
    """SQL condition for one job id form (same rule as :func:`slurm_energy.jobid.matches`)."""
    if spec.array_tasks is not None:
        return sa.and_(T.c.array_job_id == spec.job_id, T.c.array_task_id.in_(spec.array_tasks))
    if spec.het_offset is not None:
        return sa.and_(T.c.het_job_id == spec.job_id, T.c.het_job_offset == spec.het_offset)
    return sa.or_(T.c.job_id == spec.job_id, T.c.array_job_id == spec.job_id, T.c.het_job_id == spec.job_id)


class Store:
    """Job records in a SQL database. Build with :func:`open_store`."""

    def __init__(self, engine: sa.Engine, readonly: bool = False, *, put_attempts: int = PUT_ATTEMPTS,
                 retry_wait_s: float = PUT_RETRY_WAIT_S):
        self.engine = engine
        self.readonly = readonly
        self.put_attempts = max(1, int(put_attempts))
        self.retry_wait_s = retry_wait_s

    # -- writing ------------------------------------------------------------------------------
    def put(self, record: JobRecord, merge_running: Optional[MergeRunning] = None) -> None:
        """Insert or replace one attempt (key cluster, job_id, start_time); see module docstring
        for interim (``running``) records.

        ``merge_running(stored, new)`` combines a running attempt's stored interim views with a new
        one inside the write transaction (other nodes flush theirs at the same time); the store
        computes nothing itself (:func:`slurm_energy.accounting.merge.merge_interim` is the rule,
        passed by :class:`slurm_energy.outputs.store.StoreSink`). Without it the newest view
        replaces the stored ones.

        A SQLite database locked by another connection (e.g. a user's open read transaction) is
        waited for (busy timeout, :data:`BUSY_TIMEOUT_S` s) and the whole put retried up to
        ``put_attempts`` times, pausing ``retry_wait_s`` s, doubling (module docstring: Locking).

        Raises:
            PermissionError: the store was opened read-only.
            sqlalchemy.exc.OperationalError: still locked after every attempt.
            sqlalchemy.exc.SQLAlchemyError: other database errors (not retried).
        """
        if self.readonly:
            raise PermissionError("store opened read-only (jobenergy); only root's hooks write the store")
        wait = self.retry_wait_s
        for attempt in range(1, self.put_attempts + 1):
            try:
                return self._put_once(record, merge_running)
            except sa.exc.OperationalError as e:
                if attempt == self.put_attempts or not is_locked_error(e):
                    raise
                log.warning("store %s locked (attempt %d of %d): retrying in %.1f s", self.engine.url.database,
                            attempt, self.put_attempts, wait)
                time.sleep(wait)
                wait *= 2

    def _put_once(self, record: JobRecord, merge_running: Optional[MergeRunning]) -> None:
        with self.engine.begin() as conn:
            same_attempt = sa.and_(
                T.c.cluster == record.cluster,
                T.c.job_id == record.job_id,
                T.c.restart_count == record.restart_count,
                sa.func.abs(T.c.start_time - record.start_time) < SAME_ATTEMPT_S,
                # an older run of a reused job id ended before this one started: not this attempt
                T.c.end_time >= record.start_time - RUN_OVERLAP_SLACK_S,
                T.c.start_time <= record.end_time + RUN_OVERLAP_SLACK_S,
            )
            placeholders = (Status.RUNNING.value, Status.NO_DATA.value)
            if record.status in (Status.RUNNING, Status.NO_DATA):
                better = (T.c.status != Status.RUNNING.value if record.status == Status.RUNNING
                          else T.c.status.notin_(placeholders))
                done = conn.execute(sa.select(T.c.id).where(same_attempt, better).limit(1)).first()
                if done is not None:
                    log.info("ignoring %s record for %s: a measured record is already stored",
                             record.status.value, record.job_id)
                    return
            if record.status == Status.RUNNING:
                olds = conn.execute(
                    sa.select(T.c.id, T.c.record_json).where(same_attempt, T.c.status == Status.RUNNING.value)
                ).all()
                if olds:
                    if merge_running is not None:
                        record = merge_running([JobRecord.model_validate_json(o.record_json) for o in olds], record)
                    conn.execute(sa.delete(T).where(T.c.id.in_([o.id for o in olds])))
            else:  # a final record replaces the attempt's interim (and, when measured, no_data) rows
                conn.execute(sa.delete(T).where(same_attempt, T.c.status.in_(placeholders)))
            row = _row(record)
            ins = (pg_dialect.insert if conn.dialect.name == "postgresql" else sqlite_dialect.insert)(T)
            ins = ins.values(**row).on_conflict_do_update(
                index_elements=[T.c.cluster, T.c.job_id, T.c.start_time],
                set_={k: ins.excluded[k] for k in row if k not in ("cluster", "job_id", "start_time")},
            )
            conn.execute(ins)

    def put_many(self, records: Iterable[JobRecord], batch: int = 5000) -> int:
        """Bulk insert final records (benchmarks, imports); no interim handling, no upsert.

        Returns the number of rows inserted. Raises IntegrityError on a duplicate key.
        """
        if self.readonly:
            raise PermissionError("store opened read-only")
        n, buf = 0, []
        with self.engine.begin() as conn:
            for r in records:
                buf.append(_row(r))
                if len(buf) >= batch:
                    conn.execute(sa.insert(T), buf)
                    n += len(buf)
                    buf = []
            if buf:
                conn.execute(sa.insert(T), buf)
                n += len(buf)
        return n

    # -- reading ------------------------------------------------------------------------------
    def get_job(self, job_id: str, *, cluster: Optional[str] = None) -> list[JobRecord]:
        """All stored attempts matching one job id in any form (``715219``, ``715219_23``,
        ``1234+0``, ``X.batch``; see :mod:`slurm_energy.jobid`), oldest first.

        Raises ValueError for a malformed job id. Returns ``[]`` for an unknown one.
        """
        return self.query(jobs=[job_id], clusters=[cluster] if cluster else None)

    def query(
        self,
        *,
        jobs=None,
        users=None,
        accounts=None,
        partitions=None,
        states=None,
        start: Optional[float] = None,
        end: Optional[float] = None,
        clusters=None,
        uids=None,
        limit: Optional[int] = None,
    ) -> list[JobRecord]:
        """Records matching every given filter (each a list; None = no filter), oldest first.

        Args:
            jobs: job ids in any form (str or :class:`JobSpec`); a record matches any of them.
            users, accounts, partitions, clusters: exact names. uids: numeric user ids.
            states: record statuses (``running``, ``complete``, ``partial``, ``failed``).
            start, end: epoch s; like sacct, selects attempts that were running at some moment in
                [start, end] (``end_time >= start`` and ``start_time <= end``).
            limit: at most this many rows (the newest ones when set), still returned oldest first.
        Raises:
            ValueError: a malformed job id, or start > end (names both values).
        """
        if start is not None and end is not None and start > end:
            raise ValueError(f"start={start} is after end={end}; swap them or widen the window")
        q = sa.select(T.c.record_json)
        conds = []
        if jobs:
            specs = [j if isinstance(j, JobSpec) else parse_jobid(j) for j in jobs]
            conds.append(sa.or_(*[spec_condition(s) for s in specs]))
        for col, vals in ((T.c.user, users), (T.c.account, accounts), (T.c.partition, partitions),
                          (T.c.cluster, clusters), (T.c.uid, uids)):  # fmt: skip
            if vals:
                conds.append(col.in_(list(vals)))
        if states:
            conds.append(T.c.status.in_([str(getattr(s, "value", s)).lower() for s in states]))
        if start is not None:
            conds.append(T.c.end_time >= start)
        if end is not None:
            conds.append(T.c.start_time <= end)
        if conds:
            q = q.where(*conds)
        if limit is not None:
            q = q.order_by(T.c.start_time.desc(), T.c.id.desc()).limit(int(limit))
        else:
            q = q.order_by(T.c.start_time, T.c.id)
        with self.engine.connect() as conn:
            rows = conn.execute(q).scalars().all()
        out = [JobRecord.model_validate_json(r) for r in rows]
        if limit is not None:
            out.reverse()
        return out

    def tagged(self, limit: Optional[int] = None) -> list[JobRecord]:
        """Finished records (``complete`` or ``partial``) whose job declared tags (non-empty
        ``JobRecord.tags``: FLOPs, parameters, tokens), the newest ``limit`` (None = all), oldest first.

        For the prediction's calibration. Filters on the stored JSON text (``"tags":{"``, as
        ``model_dump_json`` writes a non-empty dict), so untagged records are never parsed.
        """
        q = sa.select(T.c.record_json).where(
            T.c.record_json.like('%"tags":{"%'), T.c.status.in_([Status.COMPLETE.value, Status.PARTIAL.value])
        )
        if limit is not None:
            q = q.order_by(T.c.start_time.desc(), T.c.id.desc()).limit(int(limit))
        with self.engine.connect() as conn:
            rows = conn.execute(q).scalars().all()
        out = [JobRecord.model_validate_json(r) for r in rows]
        return sorted(out, key=lambda r: r.start_time)

    def count(self) -> int:
        """Number of stored attempts."""
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(T)).scalar() or 0)

    def close(self) -> None:
        """Dispose the connection pool."""
        self.engine.dispose()


def is_locked_error(e: BaseException) -> bool:
    """True for SQLite's "database is locked" / "database table is locked" (SQLITE_BUSY/LOCKED)."""
    return "is locked" in str(getattr(e, "orig", e) or e)


def _prepare_sqlite_file(url: sa.URL, readonly: bool) -> None:
    db = url.database
    if not db or db == ":memory:" or readonly:
        return
    p = Path(db)
    if not p.parent.exists():
        p.parent.mkdir(parents=True, mode=0o755)
    if not p.exists():
        _create_sqlite_store(p)


def _create_sqlite_store(p: Path) -> None:
    """Create the store file ``p`` with its schema under a temporary name in the same directory,
    then hard-link it into place, so that a reader (``jobenergy``, ``collect``) never sees an empty
    or half-made store while the first job's finalizer creates it. The mode is exact: root writes,
    everyone reads (see the module docstring). Two processes creating it at once: the first link
    wins, the other's file is dropped. Raises OSError (directory not writable) or SQLAlchemy's
    errors from the migration."""
    tmp = p.with_name(f".{p.name}.{os.getpid()}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.close(fd)
    try:
        os.chmod(tmp, 0o644)
        engine = sa.create_engine(f"sqlite:///{tmp}")
        try:
            schema.migrate(engine)
        finally:
            engine.dispose()
        try:
            os.link(tmp, p)
        except FileExistsError:
            pass  # another process's store is in place: use it
    finally:
        for f in (tmp, tmp.with_name(tmp.name + "-journal")):
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass


def _check_readable_sqlite(path: str) -> None:
    """A reader never creates a store: a missing or empty file is an error naming the path."""
    p = Path(path)
    fix = "check paths.store_url in site.yaml (or --store / $SLURM_ENERGY_STORE)"
    if not p.exists():
        raise StoreError(f"store {path} does not exist (no job recorded yet, or a mistyped path); {fix}")
    if p.is_file() and p.stat().st_size == 0:
        raise StoreError(f"store {path} is an empty file, not a slurm-energy store; {fix}")


def open_store(url: str, *, readonly: bool = False, migrate: bool = True,
               busy_timeout_s: float = BUSY_TIMEOUT_S) -> Store:
    """Open (and create or migrate) the store at a SQLAlchemy URL.

    Args:
        url: ``sqlite:////var/spool/slurm-energy/store.db`` (default site layout; the file is created
            0644) or ``postgresql+psycopg://user:pw@host:5432/db``.
        readonly: open for reading only (jobenergy, rollup; also as root): SQLite is opened with
            ``mode=ro`` (a missing or empty file is an error, never a new database), PostgreSQL
            sessions with ``default_transaction_read_only=on``; no migration is attempted, and
            :meth:`Store.put` raises PermissionError.
        migrate: apply missing schema migrations (see :mod:`slurm_energy.store.schema`).
        busy_timeout_s: SQLite only: how long a statement waits for another connection's lock, s.

    Returns:
        A :class:`Store`.

    Raises:
        ValueError: :func:`slurm_energy.store.urls.check_store_url`'s message: the URL cannot be
            parsed, its backend or driver is unsupported or not installed, or a SQLite path is relative.
        RuntimeError: the schema is newer than this code; a read-only store is missing, empty, not
            a database, unreachable or has no schema (the message names it).
    """
    problem = check_store_url(url)
    if problem:
        raise StoreUrlError(problem)
    u = effective_url(sa.make_url(url))
    backend = u.get_backend_name()
    if backend == "sqlite":
        _prepare_sqlite_file(u, readonly)
        if readonly and u.database and u.database != ":memory:":
            _check_readable_sqlite(u.database)
            engine = sa.create_engine(
                f"sqlite:///file:{u.database}?mode=ro&uri=true", connect_args={"timeout": busy_timeout_s}
            )
        else:
            engine = sa.create_engine(u, connect_args={"timeout": busy_timeout_s})
    else:  # postgresql+psycopg (check_store_url allows nothing else)
        args = {"options": "-c default_transaction_read_only=on"} if readonly else {}
        engine = sa.create_engine(u, pool_pre_ping=True, connect_args=args)
    if readonly or not migrate:
        shown = u.render_as_string(hide_password=True)
        try:
            with engine.connect() as conn:
                v = schema.current_version(conn)
        except sa.exc.DatabaseError as e:  # "file is not a database", server down: name the store
            raise StoreError(f"store {shown} cannot be read: {str(e.orig or e).splitlines()[0]}; "
                               "check paths.store_url (or --store / $SLURM_ENERGY_STORE)") from None
        if v == 0:
            raise StoreError(f"store {shown} has no slurm-energy schema (no job recorded yet, or not a "
                               "slurm-energy store); check paths.store_url (or --store / $SLURM_ENERGY_STORE)")
        if v > schema.SCHEMA_VERSION:
            raise StoreError(f"store schema version {v} is newer than this slurm-energy ({schema.SCHEMA_VERSION})")
    else:
        schema.migrate(engine)
    return Store(engine, readonly=readonly)

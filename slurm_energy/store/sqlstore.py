"""SQLAlchemy 2 store of JobRecords: SQLite (default, one file under the spool) or PostgreSQL.

One row per job *attempt*, key (cluster, job_id, start_time); requeued attempts are separate rows.
Schema v2 (see schema.py): a summary row (``job_records``: what jobenergy's table and the rollup
read), the full record JSON apart (``job_json``: read for ``-l``, ``--json``, reports) and the job's
energy per UTC hour (``job_hours``: month splits in SQL, :mod:`slurm_energy.store.rollup`).

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
SELECT ...`` in ``sqlite3``). The store is in WAL mode (issue 22), where readers never block the
writer: a writer's first ``open_store`` switches it. A read-only user connection needs the -wal and
-shm files to exist (SQLite's last connection removes them on close, and users cannot create them
in the root-owned directory), so the writer leaves them in place, empty, on open and close
(:func:`slurm_energy.store.opening.keep_wal_files`). Writers still wait up to
:data:`BUSY_TIMEOUT_S` per attempt for another writer (``sqlite3.connect(timeout=...)``), and
:meth:`Store.put` retries a locked database :data:`PUT_ATTEMPTS` times with a doubling pause.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Optional

import sqlalchemy as sa

from slurm_energy.model import JobRecord, Status, text_safe
from slurm_energy.jobid import RUN_OVERLAP_SLACK_S, JobSpec, parse_jobid
from slurm_energy.store import select as Q
from slurm_energy.store.schema import job_hours as H
from slurm_energy.store.schema import job_json as J
from slurm_energy.store.schema import records as T
from slurm_energy.store.summary import hour_rows, site_hourly_ci, summary_columns

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


#: ``record -> {UTC hour key: gCO2e/kWh} | None``: the hourly intensity a record's CO2e used
HourlyCI = Callable[[JobRecord], Optional[dict]]


def _rows(record: JobRecord, hourly_ci: HourlyCI) -> tuple[dict, str, list[dict]]:
    """(job_records row, record JSON, job_hours rows without job_row_id) of one record. A record
    holding non-UTF-8 text is made safe first (:func:`slurm_energy.model.text_safe`)."""
    try:
        text = record.model_dump_json()
    except ValueError:  # a surrogate (a user's undecodable byte): storable once shown as \xNN
        text = text_safe(record).model_dump_json()
    row = {k: getattr(record, k) for k in _INDEXED}
    row["status"] = record.status.value if isinstance(record.status, Status) else str(record.status)
    row["updated_at"] = time.time()
    hours = hour_rows(record, hourly_ci(record))
    row.update(summary_columns(record, hours))
    return row, text, hours


def _delete_ids(conn: sa.Connection, ids: list[int]) -> None:
    """Remove attempts (summary row, JSON, hours) by job_records.id."""
    if ids:
        for t, col in ((T, T.c.id), (J, J.c.id), (H, H.c.job_row_id)):
            conn.execute(sa.delete(t).where(col.in_(ids)))


class Store:
    """Job records in a SQL database. Build with :func:`open_store`."""

    def __init__(self, engine: sa.Engine, readonly: bool = False, *, put_attempts: int = PUT_ATTEMPTS,
                 retry_wait_s: float = PUT_RETRY_WAIT_S, hourly_ci: Optional[HourlyCI] = None,
                 on_close: Optional[Callable[[], None]] = None):
        """``hourly_ci``: the hourly carbon intensity of a record whose CO2e was computed hourly, for its
        job_hours rows' CO2e (default :func:`slurm_energy.store.summary.site_hourly_ci`: the site's
        imported files, read only for such records)."""
        self.engine = engine
        self.hourly_ci = hourly_ci or site_hourly_ci()
        self.readonly = readonly
        self.put_attempts = max(1, int(put_attempts))
        self.retry_wait_s = retry_wait_s
        self._on_close = on_close
        if on_close is not None:  # a process that never calls close() (a finalizer) still leaves the files
            import atexit
            import weakref

            ref = weakref.ref(self)
            atexit.register(lambda: (lambda st: st.close() if st is not None else on_close())(ref()))

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
                    sa.select(T.c.id, J.c.record_json).join(J, J.c.id == T.c.id)
                    .where(same_attempt, T.c.status == Status.RUNNING.value)
                ).all()
                if olds:
                    if merge_running is not None:
                        record = merge_running([JobRecord.model_validate_json(o.record_json) for o in olds], record)
                    _delete_ids(conn, [o.id for o in olds])
            else:  # a final record replaces the attempt's interim (and, when measured, no_data) rows
                _delete_ids(conn, list(conn.execute(sa.select(T.c.id).where(
                    same_attempt, T.c.status.in_(placeholders))).scalars()))
            self._upsert(conn, record)

    def _upsert(self, conn: sa.Connection, record: JobRecord) -> None:
        """Insert or replace one attempt's summary row (key cluster, job_id, start_time), JSON and hours."""
        row, text, hours = _rows(record, self.hourly_ci)
        insert: Callable[..., Any]  # each dialect's INSERT ... ON CONFLICT, imported when used
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            insert = pg_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            insert = sqlite_insert
        ins = insert(T).values(**row)
        upsert = ins.on_conflict_do_update(
            index_elements=[T.c.cluster, T.c.job_id, T.c.start_time],
            set_={k: ins.excluded[k] for k in row if k not in ("cluster", "job_id", "start_time")},
        ).returning(T.c.id)
        rid = conn.execute(upsert).scalar_one()
        ij = insert(J).values(id=rid, record_json=text)
        conn.execute(ij.on_conflict_do_update(index_elements=[J.c.id], set_={"record_json": ij.excluded.record_json}))
        conn.execute(sa.delete(H).where(H.c.job_row_id == rid))
        if hours:
            conn.execute(sa.insert(H), [{"job_row_id": rid, **h} for h in hours])

    def put_many(self, records: Iterable[JobRecord], batch: int = 5000) -> int:
        """Bulk insert final records (benchmarks, imports); no interim handling, no upsert.

        Returns the number of rows inserted. Raises IntegrityError on a duplicate key.
        """
        if self.readonly:
            raise PermissionError("store opened read-only")
        n, buf = 0, []
        with self.engine.begin() as conn:
            for r in records:
                buf.append(_rows(r, self.hourly_ci))
                if len(buf) >= batch:
                    n += self._insert_many(conn, buf)
                    buf = []
            if buf:
                n += self._insert_many(conn, buf)
        return n

    @staticmethod
    def _insert_many(conn: sa.Connection, buf: list[tuple[dict, str, list[dict]]]) -> int:
        ids = conn.execute(sa.insert(T).returning(T.c.id, sort_by_parameter_order=True), [b[0] for b in buf]).scalars().all()
        conn.execute(sa.insert(J), [{"id": i, "record_json": b[1]} for i, b in zip(ids, buf)])
        hours = [{"job_row_id": i, **h} for i, b in zip(ids, buf) for h in b[2]]
        if hours:
            conn.execute(sa.insert(H), hours)
        return len(buf)

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
        with self.engine.connect() as conn:
            ids = self._ids(conn, jobs=jobs, users=users, accounts=accounts, partitions=partitions, states=states,
                            start=start, end=end, clusters=clusters, uids=uids, limit=limit)
            return self.records_by_id(ids, conn=conn)

    def rows(self, **filters) -> list[Q.JobRow]:
        """Summary rows (:class:`slurm_energy.store.select.JobRow`) of the attempts :meth:`query`
        would return (same filters, same order), without reading the record JSON."""
        with self.engine.connect() as conn:
            w = _where(conn, **{k: v for k, v in filters.items() if k != "limit"})
            return [Q.JobRow(r) for r in conn.execute(sa.text(Q.rows_sql(w, filters.get("limit"))), w.params)][
                ::(-1 if filters.get("limit") is not None else 1)]

    def _ids(self, conn: sa.Connection, *, limit: Optional[int] = None, **filters) -> list[int]:
        w = _where(conn, **filters)
        order = (f"ORDER BY start_time DESC, id DESC LIMIT {int(limit)}" if limit is not None
                 else "ORDER BY start_time, id")
        ids = list(conn.execute(sa.text(f"SELECT id FROM job_records{w.sql()} {order}"), w.params).scalars())
        return ids[::-1] if limit is not None else ids

    def records_by_id(self, ids: list[int], *, conn: Optional[sa.Connection] = None, progress_what: str = "")\
            -> list[JobRecord]:
        """The full records (job_json) of job_records ids, in the order given. With ``progress_what``,
        a progress bar on a terminal (:mod:`slurm_energy.store.progress`)."""
        from slurm_energy.store.progress import progress

        if conn is None:
            with self.engine.connect() as c:
                return self.records_by_id(ids, conn=c, progress_what=progress_what)
        by_id: dict[int, JobRecord] = {}
        with progress(len(ids) if progress_what else 0, progress_what) as advance:
            for k in range(0, len(ids), 5000):
                chunk = ids[k:k + 5000]
                for i, text in conn.execute(sa.select(J.c.id, J.c.record_json).where(J.c.id.in_(chunk))):
                    by_id[i] = JobRecord.model_validate_json(text)
                advance(len(chunk))
        return [by_id[i] for i in ids if i in by_id]

    def tagged(self, limit: Optional[int] = None) -> list[JobRecord]:
        """Finished records (``complete`` or ``partial``) whose job declared tags (non-empty
        ``JobRecord.tags``: FLOPs, parameters, tokens), the newest ``limit`` (None = all), oldest first.

        For the prediction's calibration. Filters on the stored JSON text (``"tags":{"``, as
        ``model_dump_json`` writes a non-empty dict), so untagged records are never parsed.
        """
        q = sa.select(J.c.record_json).join(T, T.c.id == J.c.id).where(
            J.c.record_json.like('%"tags":{"%'), T.c.status.in_([Status.COMPLETE.value, Status.PARTIAL.value])
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
        """Dispose the connection pool (SQLite writer: then keep the WAL files for readers)."""
        self.engine.dispose()
        if self._on_close is not None:
            self._on_close()


def _where(conn: sa.Connection, *, jobs=None, users=None, accounts=None, partitions=None, states=None,
           start: Optional[float] = None, end: Optional[float] = None, clusters=None, uids=None) -> Q.Where:
    """:func:`slurm_energy.store.select.where` for :meth:`Store.query`'s filters (job ids parsed,
    states lower-cased, the window's start bounded by the longest stored attempt).

    Raises ValueError: a malformed job id, or start > end (names both values)."""
    if start is not None and end is not None and start > end:
        raise ValueError(f"start={start} is after end={end}; swap them or widen the window")
    specs = [j if isinstance(j, JobSpec) else parse_jobid(j) for j in jobs] if jobs else None
    longest = conn.execute(sa.text(Q.LONGEST_SQL)).scalar() if start is not None else None
    return Q.where(specs=specs, users=users, accounts=accounts, partitions=partitions, clusters=clusters, uids=uids,
                   states=[str(getattr(s, "value", s)).lower() for s in states] if states else None,
                   start=start, end=end, longest=0.0 if longest is None else longest)


def is_locked_error(e: BaseException) -> bool:
    """True for SQLite's "database is locked" / "database table is locked" (SQLITE_BUSY/LOCKED)."""
    return "is locked" in str(getattr(e, "orig", e) or e)


def __getattr__(name: str):
    """``open_store`` lives in :mod:`slurm_energy.store.opening` (this module's length); still importable here."""
    if name == "open_store":
        from slurm_energy.store.opening import open_store

        return open_store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The store of JobRecords: SQLite (default, one file) or PostgreSQL, on each database's own driver
(stdlib ``sqlite3``, ``psycopg``), every statement SQL text (:mod:`slurm_energy.store.db`).

One row per job *attempt*, key (cluster, job_id, start_time); requeued attempts are separate rows.
Schema v2 (see schema.py): a summary row (``job_records``: what jobenergy's table and the rollup
read), the full record JSON apart (``job_json``: read for ``-l``, ``--json``, reports) and the job's
energy per UTC hour (``job_hours``: month splits in SQL, :mod:`slurm_energy.store.rollup`).

Interim records (status ``running``, put by the sampler every minute while the job runs) are
special-cased so a job shows one row while running and one when done:

* a running record replaces the running row of the same (cluster, job_id, restart_count) whose
  start time is within :data:`SAME_ATTEMPT_S`; if that row came from another node, the two views
  are merged by the caller's ``merge_running`` (inside the write transaction);
* a one-node running record (each node's sampler flush) writes only that node's row in
  ``running_nodes`` (and creates the attempt's running row in job_records from it if there is none
  yet); a running attempt read back (:meth:`Store.rows`, :meth:`Store.query`) is assembled from its
  node rows with :func:`slurm_energy.accounting.merge.merge_interim`, so a node's update costs the
  same at 2 nodes or 1,024;
* a running record is ignored once a final row for that attempt exists (a late flush must not
  overwrite the Epilog's record);
* a final record deletes the attempt's running rows and node rows, then upserts on the key;
* a ``no_data`` record (the job ran but its spool was unusable: stored from the Epilog's environment
  and slurmctld) is ignored when a measured record of the attempt exists, and is replaced (with any
  running row) by a measured one that ``collect`` finishes later from the node's spool.

Access control: see docs/STORE.md. With SQLite the file is created 0644 root-owned in a 0755
directory: users can read the whole store with sqlite3 but cannot write it; jobenergy's filter to a
user's own jobs is a convenience there, not a confidentiality boundary. Use PostgreSQL roles (and
row-level security) where job energy per user must be private.

Locking (SQLite): any user may hold a read transaction on the world-readable file (``BEGIN;
SELECT ...`` in ``sqlite3``). The store is in WAL mode, where readers never block the
writer: a writer's first ``open_store`` switches it. A read-only user connection needs the -wal and
-shm files to exist (SQLite's last connection removes them on close, and users cannot create them
in the root-owned directory), so the writer leaves them in place, empty, on open and close
(:func:`slurm_energy.store.db.keep_wal_files`). Writers take the write lock up front (``BEGIN
IMMEDIATE``), waiting up to :data:`~slurm_energy.store.db.BUSY_TIMEOUT_S` per attempt for another
writer, and :meth:`Store.put` retries a locked database :data:`PUT_ATTEMPTS` times with a doubling pause.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from slurm_energy.core import Status
from slurm_energy.errors import StoreDbError, StoreError, StoreUrlError
from slurm_energy.jobid import JobSpec, parse_jobid
from slurm_energy.jobmeta import RUN_OVERLAP_SLACK_S, RunKey, same_run
from slurm_energy.store import db as D
from slurm_energy.store import schema
from slurm_energy.store import select as Q
from slurm_energy.store.urls import check_store_url, shown_url

if TYPE_CHECKING:  # pydantic is imported when a record is parsed or written, not for jobenergy's table
    from slurm_energy.model import JobRecord



def _log() -> Any:
    """This module's logger (``logging`` imported only by a writer: not on jobenergy's start-up)."""
    import logging

    return logging.getLogger(__name__)


#: Interim node views whose start times differ by less than this are the same attempt, s.
#: (Prologs of one allocation start within seconds; a reused job id is months apart.)
SAME_ATTEMPT_S = 3600.0

#: ``merge_running(stored interim views, new view) -> record to store`` (see :meth:`Store.put`).
MergeRunning = Callable[[list["JobRecord"], "JobRecord"], "JobRecord"]

#: :meth:`Store.put` tries a locked SQLite database this many times in all ...
PUT_ATTEMPTS = 4
#: ... pausing this long after the first failure, doubling each time (2 + 4 + 8 s), s.
PUT_RETRY_WAIT_S = 2.0

#: ``record -> {UTC hour key: gCO2e/kWh} | None``: the hourly intensity a record's CO2e used
HourlyCI = Callable[["JobRecord"], dict | None]

#: the columns of a job_records row a put writes (its id is the database's)
_WRITTEN = tuple(c for c in schema.COLUMNS if c != "id")
_INSERT = ("INSERT INTO job_records (" + ", ".join(f'"{c}"' for c in _WRITTEN) + ") VALUES ("
           + ", ".join(f":{c}" for c in _WRITTEN) + ") RETURNING id")
_UPSERT = _INSERT.replace(" RETURNING id", " ON CONFLICT (cluster, job_id, start_time) DO UPDATE SET ") + ", ".join(
    f'"{c}" = excluded."{c}"' for c in _WRITTEN if c not in ("cluster", "job_id", "start_time")) + " RETURNING id"
_UPSERT_JSON = ("INSERT INTO job_json (id, record_json) VALUES (:id, :record_json) "
                "ON CONFLICT (id) DO UPDATE SET record_json = excluded.record_json")
#: the stored attempt a record belongs to (an older run of a reused job id that ended before this one
#: started is not it)
_SAME_ATTEMPT = ("cluster = :cluster AND job_id = :job_id AND restart_count = :restart_count AND "
                 "abs(start_time - :start_time) < :same AND end_time >= :start_time - :slack AND "
                 "start_time <= :end_time + :slack")

#: an attempt's node rows (running_nodes): same job and restart, start within SAME_ATTEMPT_S
_NODE_ROWS = ("cluster = :cluster AND job_id = :job_id AND restart_count = :restart_count AND "
              "abs(start_time - :start_time) < :same")
_UPSERT_NODE = ("INSERT INTO running_nodes (cluster, job_id, restart_count, node, start_time, updated_at, record_json) "
                "VALUES (:cluster, :job_id, :restart_count, :node, :start_time, :updated_at, :record_json) "
                "ON CONFLICT (cluster, job_id, restart_count, node) DO UPDATE SET start_time = excluded.start_time, "
                "updated_at = excluded.updated_at, record_json = excluded.record_json")


def _rows(record: JobRecord, hourly_ci: HourlyCI) -> tuple[dict, str, list[dict]]:
    """(job_records row, record JSON, job_hours rows without job_row_id) of one record. A record
    holding non-UTF-8 text is made safe first (:func:`slurm_energy.model.text_safe`)."""
    from slurm_energy.model import text_safe
    from slurm_energy.store.summary import hour_rows, summary_columns

    try:
        text = record.model_dump_json()
    except ValueError:  # a surrogate (a user's undecodable byte): storable once shown as \xNN
        text = text_safe(record).model_dump_json()
    hours = hour_rows(record, hourly_ci(record))
    row = {k: getattr(record, k) for k in schema.RECORD_COLUMNS}
    row["status"] = record.status.value if isinstance(record.status, Status) else str(record.status)
    row["updated_at"] = time.time()
    row.update(summary_columns(record, hours))
    return row, text, hours


def is_locked_error(e: BaseException) -> bool:
    """True for SQLite's transient lock races: "database is locked" / "database table is locked"
    (SQLITE_BUSY/LOCKED), and "locking protocol" (SQLITE_PROTOCOL: in WAL mode, another connection
    kept changing the wal-index while this one tried to read it, sqlite.org/rescode.html#protocol).
    Seen under a burst of finalizers on one node: a record was queued for collect instead of stored."""
    text = str(e)
    return "is locked" in text or "locking protocol" in text


class Store:
    """Job records in a SQL database (``db``: its connection). Build with :func:`open_store`."""

    def __init__(self, db: D.Db, readonly: bool = False, *, put_attempts: int = PUT_ATTEMPTS,
                 retry_wait_s: float = PUT_RETRY_WAIT_S, hourly_ci: HourlyCI | None = None,
                 on_close: Callable[[], None] | None = None):
        """``hourly_ci``: the hourly carbon intensity of a record whose CO2e was computed hourly, for its
        job_hours rows' CO2e (default :func:`slurm_energy.store.summary.site_hourly_ci`: the site's
        imported files, read only for such records)."""
        self.db = db
        self._hourly_ci = hourly_ci
        self.readonly = readonly
        self.put_attempts = max(1, int(put_attempts))
        self.retry_wait_s = retry_wait_s
        self._on_close = on_close
        if on_close is not None:  # a process that never calls close() (a finalizer) still leaves the files
            import atexit
            import weakref

            ref = weakref.ref(self)
            atexit.register(lambda: (lambda st: st.close() if st is not None else on_close())(ref()))

    @property
    def hourly_ci(self) -> HourlyCI:
        """The hourly carbon intensity a record's job_hours use (made at the first write)."""
        if self._hourly_ci is None:
            from slurm_energy.store.summary import site_hourly_ci

            self._hourly_ci = site_hourly_ci()
        return self._hourly_ci

    # -- writing ------------------------------------------------------------------------------
    def put(self, record: JobRecord, merge_running: MergeRunning | None = None) -> None:
        """Insert or replace one attempt (key cluster, job_id, start_time); see module docstring
        for interim (``running``) records.

        ``merge_running(stored, new)`` combines a running attempt's stored interim views with a new
        one inside the write transaction (other nodes flush theirs at the same time); the store
        computes nothing itself (:func:`slurm_energy.accounting.merge.merge_interim` is the rule,
        passed by :class:`slurm_energy.outputs.store.StoreSink`). Without it the newest view
        replaces the stored ones.

        A SQLite database locked by another connection (e.g. another writer) is waited for (busy
        timeout) and the whole put retried up to ``put_attempts`` times, pausing ``retry_wait_s``
        s, doubling (module docstring: Locking).

        Raises:
            PermissionError: the store was opened read-only.
            StoreDbError: still locked after every attempt, or another database error (not retried).
        """
        if self.readonly:
            raise PermissionError("store opened read-only (jobenergy); only root's hooks write the store")
        D.retried(lambda: self._put_once(record, merge_running), self.put_attempts, self.retry_wait_s, is_locked_error,
                  lambda n, wait: _log().warning("%s locked (attempt %d of %d): retrying in %.1f s", self.db.name, n,
                                                 self.put_attempts, wait))

    def _put_once(self, record: JobRecord, merge_running: MergeRunning | None) -> None:
        from slurm_energy.model import JobRecord

        key = {"cluster": record.cluster, "job_id": record.job_id, "restart_count": record.restart_count,
               "start_time": record.start_time, "end_time": record.end_time, "same": SAME_ATTEMPT_S,
               "slack": RUN_OVERLAP_SLACK_S, "running": Status.RUNNING.value, "no_data": Status.NO_DATA.value}
        with self.db.transaction() as db:
            if record.status in (Status.RUNNING, Status.NO_DATA):
                better = "status <> :running" if record.status == Status.RUNNING else "status NOT IN (:running, :no_data)"
                if db.execute(f"SELECT id FROM job_records WHERE {_SAME_ATTEMPT} AND {better} LIMIT 1", key):
                    _log().info("ignoring %s record for %s: a measured record is already stored",
                             record.status.value, record.job_id)
                    return
            if record.status == Status.RUNNING and len(record.nodes) == 1:
                self._put_node(db, record, key)
                return
            if record.status == Status.RUNNING:
                olds = db.execute("SELECT t.id, j.record_json FROM job_records t JOIN job_json j ON j.id = t.id "
                                  f"WHERE {_SAME_ATTEMPT} AND status = :running", key)
                if olds and merge_running is not None:
                    record = merge_running([JobRecord.model_validate_json(o[1]) for o in olds], record)
                _delete_ids(db, [o[0] for o in olds])
            else:  # a final record replaces the attempt's interim (and, when measured, no_data) rows
                _delete_ids(db, [r[0] for r in db.execute(
                    f"SELECT id FROM job_records WHERE {_SAME_ATTEMPT} AND status IN (:running, :no_data)", key)])
                db.execute(f"DELETE FROM running_nodes WHERE {_NODE_ROWS}", key)
            row, text, hours = _rows(record, self.hourly_ci)
            rid = db.execute(_UPSERT, row)[0][0]
            db.execute(_UPSERT_JSON, {"id": rid, "record_json": text})
            db.execute("DELETE FROM job_hours WHERE job_row_id = :id", {"id": rid})
            db.executemany(schema.INSERT_HOURS, [{"job_row_id": rid, **h} for h in hours])

    def _put_node(self, db: D.Db, record: JobRecord, key: dict) -> None:
        """A one-node running view: its own ``running_nodes`` row (upsert on attempt and node), and
        the attempt's job_records row made from it if there is none yet, else only that row's end and
        update times moved on. The cost is one node's, whatever the job's node count: the job's
        running view is assembled from the node rows when read (:meth:`records_by_id`)."""
        row, text, hours = _rows(record, self.hourly_ci)
        db.execute(_UPSERT_NODE, {**key, "node": record.nodes[0].node, "updated_at": row["updated_at"],
                                  "record_json": text})
        have = db.execute(f"SELECT id FROM job_records WHERE {_SAME_ATTEMPT} AND status = :running LIMIT 1", key)
        if have:
            db.execute("UPDATE job_records SET end_time = :end_time, updated_at = :updated_at, elapsed_s = "
                       ":end_time - start_time WHERE id = :id AND end_time < :end_time",
                       {"id": have[0][0], "end_time": record.end_time, "updated_at": row["updated_at"]})
            return
        rid = db.execute(_UPSERT, row)[0][0]
        db.execute(_UPSERT_JSON, {"id": rid, "record_json": text})
        db.execute("DELETE FROM job_hours WHERE job_row_id = :id", {"id": rid})
        db.executemany(schema.INSERT_HOURS, [{"job_row_id": rid, **h} for h in hours])

    def put_many(self, records: Iterable[JobRecord], batch: int = 5000) -> int:
        """Bulk insert final records (benchmarks, imports); no interim handling, no upsert.

        Returns the number of rows inserted. Raises StoreDbError on a duplicate key."""
        if self.readonly:
            raise PermissionError("store opened read-only")
        n, buf = 0, []
        with self.db.transaction():
            for r in records:
                buf.append(_rows(r, self.hourly_ci))
                if len(buf) >= batch:
                    n += self.insert_rows(buf)
                    buf = []
            n += self.insert_rows(buf)
        return n

    def insert_rows(self, buf: list[tuple[dict, str, list[dict]]]) -> int:
        """Insert prepared (row, record JSON, hour rows) in the open transaction; the count."""
        if not buf:
            return 0
        ids = self.db.insert_returning(_INSERT, [b[0] for b in buf])
        self.db.executemany("INSERT INTO job_json (id, record_json) VALUES (:id, :record_json)",
                            [{"id": i, "record_json": b[1]} for i, b in zip(ids, buf)])
        self.db.executemany(schema.INSERT_HOURS, [{"job_row_id": i, **h} for i, b in zip(ids, buf) for h in b[2]])
        return len(buf)

    # -- reading ------------------------------------------------------------------------------
    def get_job(self, job_id: str, *, cluster: str | None = None) -> list[JobRecord]:
        """All stored attempts matching one job id in any form (``715219``, ``715219_23``,
        ``1234+0``, ``X.batch``; see :mod:`slurm_energy.jobid`), oldest first.

        Raises ValueError for a malformed job id. Returns ``[]`` for an unknown one.
        """
        return self.query(jobs=[job_id], clusters=[cluster] if cluster else None)

    def query(self, **filters: Any) -> list[JobRecord]:
        """Records matching every given filter (each a list; None = no filter), oldest first:
        :meth:`rows`' attempts, their full records (job_json) parsed."""
        with self.db.transaction(write=False):
            return self.records_by_id([r.id for r in self.rows(**filters)])

    def rows(self, *, jobs: Any = None, users: Any = None, accounts: Any = None, partitions: Any = None,
             states: Any = None, start: float | None = None, end: float | None = None,
             clusters: Any = None, uids: Any = None, limit: int | None = None) -> list[Q.JobRow]:
        """Summary rows (:class:`slurm_energy.store.select.JobRow`, no record JSON read) matching
        every given filter (each a list; None = no filter), oldest first.

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
        specs = [j if isinstance(j, JobSpec) else parse_jobid(j) for j in jobs] if jobs else None
        longest = self.db.execute(Q.LONGEST_SQL)[0][0] if start is not None else None
        w = Q.where(specs=specs, users=users, accounts=accounts, partitions=partitions, clusters=clusters, uids=uids,
                    states=[str(getattr(s, "value", s)).lower() for s in states] if states else None,
                    start=start, end=end, longest=longest or 0.0)
        rows = [Q.JobRow(r) for r in self.db.execute(Q.rows_sql(w, limit), w.params)]
        running = [r.id for r in rows if r.status == Status.RUNNING.value]
        if running and self._has_node_rows():  # a running job's summary: from its nodes' rows
            views = self._records(running)
            rows = [r if r.id not in views else _job_row(r.id, views[r.id], self.hourly_ci) for r in rows]
        return rows[::-1] if limit is not None else rows

    def final_record(self, key: RunKey, *, measured: bool = False) -> JobRecord | None:
        """The stored final record (any status but ``running``; ``measured``: nor ``no_data``) of
        the run ``key`` names, by the one run rule (:func:`slurm_energy.jobmeta.same_run`: what the
        key does not know is not compared); the newest of several; None when none is stored.

        Raises:
            ValueError: the key names no job id.
        """
        if not key.job_id:
            raise ValueError(f"{key}: a run key without a job id; give the job's id")
        final = [s.value for s in Status if s != Status.RUNNING and not (measured and s == Status.NO_DATA)]
        with self.db.transaction(write=False):
            rows = self.rows(jobs=[key.job_id], clusters=[key.cluster] if key.cluster else None, states=final)
            ids = [r.id for r in rows if r.job_id == key.job_id and same_run(RunKey.of_record(r), key) is not False]
            return self.records_by_id(ids[-1:])[0] if ids else None

    def records_by_id(self, ids: list[int], *, progress_what: str = "") -> list[JobRecord]:
        """The full records (job_json) of job_records ids, in the order given. With ``progress_what``,
        a progress bar on a terminal (:mod:`slurm_energy.store.progress`)."""
        if not ids:
            return []  # nothing to parse: pydantic not imported (rollup's table/csv/json)
        by_id = self._records(ids, progress_what=progress_what)
        return [by_id[i] for i in ids if i in by_id]

    def _has_node_rows(self) -> bool:
        """Any running_nodes row (False on a store not yet at schema v6, opened read-only)."""
        return schema.has_table(self.db, "running_nodes") and bool(
            self.db.execute("SELECT 1 FROM running_nodes LIMIT 1"))

    def _records(self, ids: list[int], *, progress_what: str = "") -> dict[int, JobRecord]:
        """{job_records id: full record}; a running attempt's record is assembled from its node rows
        (:func:`slurm_energy.accounting.merge.merge_interim`: the nodes' views unioned and re-totalled,
        the newest node view's carbon facts) where it has any."""
        from slurm_energy.model import JobRecord
        from slurm_energy.store.progress import progress

        by_id: dict[int, JobRecord] = {}
        with progress(len(ids) if progress_what else 0, progress_what) as advance:
            for chunk in D.chunks(ids, 5000):
                w = Q.Where()
                for i, text in self.db.execute(f"SELECT id, record_json FROM job_json WHERE {w.isin('id', chunk)}",
                                               w.params):
                    by_id[i] = JobRecord.model_validate_json(text)
                advance(len(chunk))
        for i, rec in list(by_id.items()):
            if rec.status == Status.RUNNING and self._has_node_rows():
                by_id[i] = self._assembled(rec)
        return by_id

    def _assembled(self, rec: JobRecord) -> JobRecord:
        from slurm_energy.accounting.merge import merge_interim
        from slurm_energy.model import JobRecord

        key = {"cluster": rec.cluster, "job_id": rec.job_id, "restart_count": rec.restart_count,
               "start_time": rec.start_time, "same": SAME_ATTEMPT_S}
        views = sorted((JobRecord.model_validate_json(r[0]) for r in self.db.execute(
            f"SELECT record_json FROM running_nodes WHERE {_NODE_ROWS}", key)), key=lambda v: v.end_time)
        return merge_interim(views[:-1], views[-1]) if views else rec

    def tagged(self, limit: int | None = None) -> list[JobRecord]:
        """Finished records (``complete`` or ``partial``) whose job declared tags (non-empty
        ``JobRecord.tags``: FLOPs, parameters, tokens), the newest ``limit`` (None = all), oldest first.

        For the prediction's calibration. Filters on the stored JSON text (``"tags":{"``, as
        ``model_dump_json`` writes a non-empty dict), so untagged records are never parsed.
        """
        from slurm_energy.model import JobRecord

        q = ("SELECT j.record_json FROM job_json j JOIN job_records t ON t.id = j.id "
             "WHERE j.record_json LIKE :tags AND t.status IN (:complete, :partial)")
        if limit is not None:
            q += f" ORDER BY t.start_time DESC, t.id DESC LIMIT {int(limit)}"
        rows = self.db.execute(q, {"tags": '%"tags":{"%', "complete": Status.COMPLETE.value,
                                   "partial": Status.PARTIAL.value})
        return sorted((JobRecord.model_validate_json(r[0]) for r in rows), key=lambda r: r.start_time)

    def count(self) -> int:
        """Number of stored attempts."""
        return int(self.db.execute("SELECT count(*) FROM job_records")[0][0])

    def close(self) -> None:
        """Close the connection (SQLite writer: then keep the WAL files for readers)."""
        self.db.close()
        if self._on_close is not None:
            self._on_close()


def _job_row(rid: int, record: JobRecord, hourly_ci: HourlyCI) -> Q.JobRow:
    """The summary row of an assembled running record (as a put would store it)."""
    row = {**_rows(record, hourly_ci)[0], "id": rid}
    return Q.JobRow(row[c] for c in Q.ROW_COLUMNS)


def _delete_ids(db: D.Db, ids: list[int]) -> None:
    """Remove attempts (summary row, JSON, hours) by job_records.id."""
    for chunk in D.chunks(ids, 5000):
        for table, col in (("job_records", "id"), ("job_json", "id"), ("job_hours", "job_row_id")):
            w = Q.Where()
            db.execute(f"DELETE FROM {table} WHERE {w.isin(col, chunk)}", w.params)


def open_store(url: str, *, readonly: bool = False, migrate: bool = True,
               busy_timeout_s: float = D.BUSY_TIMEOUT_S) -> Store:
    """Open (and create or migrate) the store at a URL.

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
        StoreUrlError (a ValueError): :func:`slurm_energy.store.urls.check_store_url`'s message.
        StoreError (a RuntimeError): the schema is newer than this code; a read-only store is
            missing, empty, not a database, unreachable, has no schema or an older one (the
            message names it and the fix).
        StoreDbError: another database error while creating or migrating.
    """
    problem = check_store_url(url)
    if problem:
        raise StoreUrlError(problem)
    sqlite = url.startswith("sqlite")
    path = D.sqlite_file(url) if sqlite else ""
    if sqlite and not readonly:
        D.create_sqlite_store(path, schema.migrate)
        D.keep_wal_files(path)  # 0600 before SQLite would make them with the store's 0644
    try:
        db = D.connect(url, readonly=readonly, busy_timeout_s=busy_timeout_s)
        if readonly or not migrate:
            v = schema.current_version(db)
    except StoreDbError as e:  # "file is not a database", server down: name the store
        raise StoreError(f"store {shown_url(url)} cannot be read: {str(e).partition(': ')[2]}; {D.FIX}") from None
    if readonly or not migrate:
        if v == 0:
            db.close()
            raise StoreError(f"store {db.name} has no slurm-energy schema (no job recorded yet, or not a "
                             f"slurm-energy store); {D.FIX}")
        if v > schema.SCHEMA_VERSION:
            db.close()
            raise StoreError(f"store schema version {v} is newer than this slurm-energy ({schema.SCHEMA_VERSION})")
        if v < schema.SCHEMA_VERSION and readonly:
            db.close()
            raise StoreError(f"store {db.name} has schema version {v}, older than this slurm-energy's "
                             f"({schema.SCHEMA_VERSION}); a reader does not migrate it: run `slurm-energy collect` "
                             "as root once (or wait for the next job's finalizer), which migrates it in place")
    else:
        schema.migrate(db)
    if sqlite and not readonly:
        D.use_wal(db, path)
        return Store(db, readonly=readonly, on_close=lambda: D.keep_wal_files(path))
    return Store(db, readonly=readonly)

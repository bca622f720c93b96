"""Store schema and its migrations, as SQL text (SQLite and PostgreSQL).

Decision: a ``schema_version`` table plus an ordered list of migration functions, instead of
Alembic. Alembic needs an ini file, a script directory and Mako templates shipped with the package
and run by admins; our schema is three tables and a handful of indexes, and every migration must
run unattended from the first ``open_store`` on a compute node or the controller. Each entry of
:data:`MIGRATIONS` takes a :class:`slurm_energy.store.db.Db` and moves the schema from version ``i``
to ``i + 1``; :func:`migrate` applies the missing ones in one transaction (PostgreSQL: DDL is
transactional; SQLite: likewise for CREATE TABLE/INDEX and ALTER TABLE). Never edit a released
migration: append one. The DDL is the text SQLAlchemy emitted for versions 1-3 (stores made
before keep working unchanged).

Version 1: one table, ``job_records``: the full JobRecord JSON (``record_json``) beside indexed
copies of the fields ``jobenergy`` filters on. Version 2 (:func:`_m2_split`) splits it:

* ``job_records``: one summary row per attempt, everything ``jobenergy``'s default columns and the
  rollup need (energy per device class with its method, facility kWh, CO2e, elapsed, CPU time, GPU
  count, state/status), < 1 KB with its indexes; no JSON;
* ``job_json``: the full record (power trace, devices), read only for ``-l``, ``--json`` and reports;
* ``job_hours``: the job's IT energy per UTC hour (from the nodes' ``hourly_energy_j``), its facility
  kWh and CO2e, so a month's rollup is a SQL aggregate (:mod:`slurm_energy.store.rollup`).

Version 3 (:func:`_m3_gpu_idle`) adds the GPU-idle columns, version 4 (:func:`_m4_sluid`) the
run's SLUID as an indexed column, version 5 (:func:`_m5_carbon`) the location-based CO2e beside the
net one, the offset factor alpha, embodied CO2e and energy cost. Version 6
(:func:`_m6_running_nodes`) adds ``running_nodes``: a running job's progress, one row per node, so
a node's update writes its own row, not the job's whole record. Version 7 (:func:`_m7_node_hours`)
adds ``node_hours``: a node meter's energy per node and UTC hour, split into the jobs' part and the
part with no job, so the monthly rollup adds the nodes' idle energy per partition
(:mod:`slurm_energy.store.nodehours`, docs/NODE_METER.md).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from slurm_energy.jobmeta import IDENTITY
from slurm_energy.store.db import Db, retried

_D = "DOUBLE PRECISION"  # SQLite: REAL affinity


def _v1_ddl(dialect: str) -> list[str]:
    """Version 1's job_records with its indexes (frozen)."""
    rid = "SERIAL" if dialect == "postgresql" else "INTEGER"
    return [f"""CREATE TABLE job_records (
  id {rid} NOT NULL, cluster VARCHAR(128) NOT NULL, job_id VARCHAR(32) NOT NULL,
  start_time {_D} NOT NULL, end_time {_D} NOT NULL, restart_count INTEGER DEFAULT '0' NOT NULL,
  array_job_id VARCHAR(32), array_task_id VARCHAR(32), het_job_id VARCHAR(32), het_job_offset VARCHAR(16),
  "user" VARCHAR(128) DEFAULT '' NOT NULL, uid INTEGER, account VARCHAR(128) DEFAULT '' NOT NULL,
  "partition" VARCHAR(128) DEFAULT '' NOT NULL, status VARCHAR(16) NOT NULL,
  it_kwh {_D}, facility_kwh {_D}, co2e_kg {_D}, record_json TEXT NOT NULL, updated_at {_D} NOT NULL,
  PRIMARY KEY (id), CONSTRAINT uq_job_attempt UNIQUE (cluster, job_id, start_time))"""] + [
        f"CREATE INDEX {name} ON job_records ({cols})" for name, cols in (
            ("ix_job_id", "job_id"), ("ix_array", "array_job_id, array_task_id"),
            ("ix_het", "het_job_id, het_job_offset"), ("ix_user_start", '"user", start_time'),
            ("ix_account_start", "account, start_time"), ("ix_partition", '"partition"'),
            ("ix_start", "start_time"), ("ix_end", "end_time"), ("ix_status", "status"))]


#: Columns version 2 adds to job_records (all nullable: ALTER TABLE ADD COLUMN on a v1 store). Units
#: in the names; NULL energy = unmeasured (never 0); a class absent from ``classes`` had no device on
#: the job (jobenergy's ``-``). Filled by :func:`slurm_energy.store.summary.summary_columns`.
SUMMARY_COLUMNS = (
    ("job_name", "VARCHAR(256)"),
    ("job_state", "VARCHAR(24)"),  # Slurm's final state, else derived from exit_code, else ""
    ("exit_code", "VARCHAR(16)"),
    ("n_nodes", "INTEGER"),  # expected nodes (else nodes that reported)
    ("elapsed_s", _D),  # end_time - start_time (>= 0); max() bounds a time window's scan
    ("cpu_time_s", _D),  # summed over nodes; NULL = unknown
    ("n_gpus", "INTEGER"),
    ("cpu_kwh", _D), ("gpu_kwh", _D), ("ram_kwh", _D),  # the job's IT share
    ("classes", "VARCHAR(32)"),  # device classes in energy_it_j, e.g. "cpu,ram"
    ("methods", "VARCHAR(160)"),  # JobRecord.method_summary, e.g. "cpu=counter,ram=tdp_estimate"
    ("measured_it_kwh", _D),  # classes from a counter or integrated power
    ("estimated_it_kwh", _D),  # classes from the TDP model
    ("coverage_complete", "BOOLEAN"),
    ("report_error", "TEXT"),
    ("pue", _D), ("ci_g_per_kwh", _D),
    ("hourly_it_kwh", _D),  # sum of the job's job_hours.it_kwh (0 / NULL: no hourly energy)
    ("hourly_co2e_kg", _D),  # sum of the job's job_hours.co2e_kg
    ("hours_outside", "BOOLEAN"),  # an hour's energy is stamped outside the job's times
)  # fmt: skip

#: Columns version 3 adds: GPUs allocated but idle (JobRecord.gpu_idle_*); NULL = no GPU or none judged
IDLE_COLUMNS = (
    ("gpu_idle_s", _D),  # GPU-seconds allocated but idle, summed over the job's GPUs
    ("gpu_idle_kwh", _D),  # the job's GPU energy in those seconds
    ("gpu_idle_method", "VARCHAR(24)"),  # counter / power_integration (measured) / tdp_estimate
)

#: Columns version 4 adds: the run's SLUID (JobRecord.sluid; '' = Slurm gave none)
SLUID_COLUMNS = (("sluid", "VARCHAR(64)"),)

#: Columns version 5 adds (docs/CARBON.md): the location-based CO2e (E x CI, offsets excluded;
#: ``co2e_kg`` stays the net E x CI x alpha), alpha, embodied CO2e (SCI's M) and the energy cost in
#: its currency; NULL = not computed (never 0)
CARBON_COLUMNS = (("co2e_gross_kg", _D), ("alpha", _D), ("embodied_kg", _D), ("cost", _D),
                  ("cost_currency", "VARCHAR(8)"))

#: Columns version 8 adds (docs/NODE_METER.md): the job's share of its nodes' rest (node meter minus
#: components, kWh; JobRecord.rest_of_node_j, part of it_kwh) and how it was obtained
#: (``node_meter:<source>``: measured; ``estimate:site_w``: estimated; "+"-joined over the nodes);
#: NULL = not metered (never 0)
REST_COLUMNS = (("rest_of_node_kwh", _D), ("rest_of_node_method", "VARCHAR(128)"))

#: identity fields kept only in the record JSON (job_json), not as columns of job_records
IDENTITY_IN_JSON_ONLY = ("gid", "work_dir", "slurm_start_time")
#: the job's identity as job_records stores it (indexed, filtered on): every field of
#: :class:`slurm_energy.jobmeta.JobIdentity` but :data:`IDENTITY_IN_JSON_ONLY` (a new identity field
#: is a column once a migration adds it here)
IDENTITY_COLUMNS = tuple(f for f in IDENTITY if f not in IDENTITY_IN_JSON_ONLY)
#: job_records' columns copied from the record's own fields (identity, times, totals)
RECORD_COLUMNS = IDENTITY_COLUMNS + ("start_time", "end_time", "it_kwh", "facility_kwh", "co2e_kg", "co2e_gross_kg",
                                     "embodied_kg", "cost", "cost_currency")
#: every column of job_records (version 8)
COLUMNS = ("id", *RECORD_COLUMNS, "status", "updated_at",
           *(c for c, _ in SUMMARY_COLUMNS + IDLE_COLUMNS + SLUID_COLUMNS + CARBON_COLUMNS + REST_COLUMNS
             if c not in RECORD_COLUMNS))

#: the full record of each job_records row (same id), and the job's energy per UTC hour
_V2_TABLES = (
    "CREATE TABLE job_json (id INTEGER NOT NULL, record_json TEXT NOT NULL, PRIMARY KEY (id))",
    f"""CREATE TABLE job_hours (job_row_id INTEGER NOT NULL, hour_start BIGINT NOT NULL, it_kwh {_D} NOT NULL,
  facility_kwh {_D} NOT NULL, co2e_kg {_D}, PRIMARY KEY (job_row_id, hour_start))""",
    "CREATE INDEX ix_elapsed ON job_records (elapsed_s)",
)

#: rows parsed and written per round trip by the v1 -> v2 backfill
BATCH = 2000


def columns(db: Db, table: str) -> set[str]:
    """The column names of ``table``."""
    if db.dialect == "sqlite":
        return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    return {r[0] for r in db.execute("SELECT column_name FROM information_schema.columns WHERE table_name = :t "
                                     "AND table_schema = current_schema()", {"t": table})}


def _add_columns(db: Db, cols: tuple[tuple[str, str], ...]) -> None:
    have = columns(db, "job_records")
    for name, kind in cols:
        if name not in have:
            db.execute(f'ALTER TABLE job_records ADD COLUMN "{name}" {kind}')


def _m1_create(db: Db) -> None:
    """v0 -> v1: the job_records table with its query indexes."""
    for ddl in _v1_ddl(db.dialect):
        db.execute(ddl)


def _m2_split(db: Db) -> None:
    """v1 -> v2: summary columns, ``job_json`` and ``job_hours``, backfilled from record_json (in
    batches of :data:`BATCH` rows, a progress bar on a terminal), then ``record_json`` dropped from
    ``job_records`` (``ALTER TABLE ... DROP COLUMN``: SQLite >= 3.35, or PostgreSQL). A stored
    record_json that is not a JobRecord raises pydantic's ValidationError (nothing is changed then)."""
    from slurm_energy.model import JobRecord
    from slurm_energy.store.progress import progress
    from slurm_energy.store.summary import hour_rows, site_hourly_ci, summary_columns

    _add_columns(db, SUMMARY_COLUMNS)
    for ddl in _V2_TABLES:
        db.execute(ddl)
    ci = site_hourly_ci()
    sets = ", ".join(f'"{c}" = :{c}' for c, _ in SUMMARY_COLUMNS)
    total = db.execute("SELECT count(*) FROM job_records")[0][0]
    last = -1
    with progress(total, "store v1 -> v2: summary columns and hourly energy") as advance:
        while True:
            rows = db.execute("SELECT id, record_json FROM job_records WHERE id > :last ORDER BY id LIMIT :n",
                              {"last": last, "n": BATCH})
            if not rows:
                break
            summaries, jsons, hours = [], [], []
            for rid, text in rows:
                rec = JobRecord.model_validate_json(text)
                hs = hour_rows(rec, ci(rec))
                summaries.append({"_id": rid, **summary_columns(rec, hs)})
                jsons.append({"id": rid, "record_json": text})
                hours += [{"job_row_id": rid, **h} for h in hs]
            db.executemany(f"UPDATE job_records SET {sets} WHERE id = :_id", summaries)
            db.executemany("INSERT INTO job_json (id, record_json) VALUES (:id, :record_json)", jsons)
            db.executemany(INSERT_HOURS, hours)
            last = rows[-1][0]
            advance(len(rows))
    if db.dialect == "sqlite" and sqlite3.sqlite_version_info < (3, 35, 0):
        raise RuntimeError(f"store migration to v2 needs SQLite >= 3.35 (ALTER TABLE DROP COLUMN); this Python "
                           f"has {sqlite3.sqlite_version}: run slurm-energy with a newer Python")
    db.execute("ALTER TABLE job_records DROP COLUMN record_json")


def _m3_gpu_idle(db: Db) -> None:
    """v2 -> v3: the GPU-idle columns (:data:`IDLE_COLUMNS`). Not backfilled: records stored before
    carry no idle figures (NULL = unknown, never 0)."""
    _add_columns(db, IDLE_COLUMNS)


def _m4_sluid(db: Db) -> None:
    """v3 -> v4: the run's SLUID as an indexed column (``jobenergy -j <SLUID>`` an index look-up,
    not a scan of the record JSON), backfilled from each record's JSON in one statement (SQLite's
    json_extract, PostgreSQL's ->>; '' where the record has none)."""
    _add_columns(db, SLUID_COLUMNS)
    db.execute("CREATE INDEX ix_sluid ON job_records (sluid)")
    got = ("json_extract(j.record_json, '$.sluid')" if db.dialect == "sqlite"
           else "CAST(j.record_json AS json) ->> 'sluid'")
    db.execute(f"UPDATE job_records SET sluid = coalesce((SELECT {got} FROM job_json j "
               "WHERE j.id = job_records.id), '')")


def _m5_carbon(db: Db) -> None:
    """v4 -> v5: :data:`CARBON_COLUMNS`. ``alpha`` is backfilled from each record's JSON (1.0 where
    it has none: the default), and the location-based CO2e as ``co2e_kg / alpha`` (exact: alpha is
    one constant per record; NULL where alpha is 0: not recoverable). Embodied CO2e and cost are not
    backfilled (NULL: not computed for records stored before)."""
    _add_columns(db, CARBON_COLUMNS)
    got = ("json_extract(j.record_json, '$.carbon.alpha')" if db.dialect == "sqlite"
           else "CAST(CAST(j.record_json AS json) -> 'carbon' ->> 'alpha' AS DOUBLE PRECISION)")
    db.execute(f"UPDATE job_records SET alpha = coalesce((SELECT {got} FROM job_json j "
               "WHERE j.id = job_records.id), 1.0)")
    db.execute("UPDATE job_records SET co2e_gross_kg = co2e_kg / alpha WHERE alpha > 0")


#: a running attempt's progress, one row per node: that node's interim view (a one-node JobRecord's
#: JSON, status running), keyed by attempt and node; ``start_time``: the node's view's (the attempt's
#: job_records row is matched by :data:`slurm_energy.store.sqlstore.SAME_ATTEMPT_S`)
_V6_TABLE = f"""CREATE TABLE IF NOT EXISTS running_nodes (cluster VARCHAR(128) NOT NULL, job_id VARCHAR(32) NOT NULL,
  restart_count INTEGER NOT NULL, node VARCHAR(128) NOT NULL, start_time {_D} NOT NULL, updated_at {_D} NOT NULL,
  record_json TEXT NOT NULL, PRIMARY KEY (cluster, job_id, restart_count, node))"""


def _m6_running_nodes(db: Db) -> None:
    """v5 -> v6: the ``running_nodes`` table (:data:`_V6_TABLE`). Running rows stored before stay
    whole records (read as they are until their job's nodes flush again or its final record comes)."""
    db.execute(_V6_TABLE)


#: version 7: per node and UTC hour, what its meter measured (kWh; ``metered_s`` the seconds of the
#: hour a believed reading covered), the jobs' attributed part and the part with no job, and the
#: partition the idle part is charged to (``partition_from``: ``jobs`` = the jobs stored on the node
#: name it, ``given`` = the admin named it)
NODE_HOURS_DDL = (
    f"""CREATE TABLE node_hours (cluster VARCHAR(128) NOT NULL, node VARCHAR(128) NOT NULL, hour_start BIGINT NOT NULL,
  "partition" VARCHAR(128) NOT NULL, partition_from VARCHAR(16) NOT NULL, source VARCHAR(64) NOT NULL,
  metered_kwh {_D} NOT NULL, jobs_kwh {_D} NOT NULL, idle_kwh {_D} NOT NULL, metered_s {_D} NOT NULL,
  updated_at {_D} NOT NULL, PRIMARY KEY (cluster, node, hour_start))""",
    "CREATE INDEX ix_node_hours_hour ON node_hours (hour_start)",
)


def _m7_node_hours(db: Db) -> None:
    """v6 -> v7: the ``node_hours`` table (:data:`NODE_HOURS_DDL`), empty: ``slurm-energy reconcile
    --save`` fills it from the node meter files."""
    for ddl in NODE_HOURS_DDL:
        db.execute(ddl)


def _m8_rest_of_node(db: Db) -> None:
    """v7 -> v8: :data:`REST_COLUMNS`, backfilled from each record's JSON, and the rest of the node
    counted in the measured/estimated split it was missing from (a tester's month: IT 0.0621 kWh,
    measured 0.0514 + estimated 0.0058): metered on every node -> measured, the site's estimate on
    every node -> estimated; a job with both kinds of node stays out of both (its split per node is
    in the record; records stored from v8 on split it exactly)."""
    _add_columns(db, REST_COLUMNS)
    if db.dialect == "sqlite":
        j, m = "json_extract(j.record_json, '$.rest_of_node_j')", "json_extract(j.record_json, '$.rest_of_node_method')"
    else:
        j = "CAST(CAST(j.record_json AS json) ->> 'rest_of_node_j' AS DOUBLE PRECISION)"
        m = "CAST(j.record_json AS json) ->> 'rest_of_node_method'"
    db.execute(f"UPDATE job_records SET rest_of_node_kwh = (SELECT {j} FROM job_json j WHERE j.id = job_records.id) "
               f"/ 3600000.0, rest_of_node_method = nullif((SELECT {m} FROM job_json j WHERE j.id = job_records.id), '')")
    for col, kind, other in (("measured_it_kwh", "node_meter:%", "%estimate:%"),
                             ("estimated_it_kwh", "estimate:%", "%node_meter:%")):
        db.execute(f"UPDATE job_records SET {col} = coalesce({col}, 0) + rest_of_node_kwh WHERE rest_of_node_kwh "
                   f"IS NOT NULL AND rest_of_node_method LIKE '{kind}' AND rest_of_node_method NOT LIKE '{other}'")


INSERT_HOURS = ("INSERT INTO job_hours (job_row_id, hour_start, it_kwh, facility_kwh, co2e_kg) "
                "VALUES (:job_row_id, :hour_start, :it_kwh, :facility_kwh, :co2e_kg)")

#: Ordered migrations; MIGRATIONS[i] upgrades from version i to i + 1.
MIGRATIONS: list[Callable[[Db], None]] = [_m1_create, _m2_split, _m3_gpu_idle, _m4_sluid, _m5_carbon,
                                             _m6_running_nodes, _m7_node_hours, _m8_rest_of_node]
SCHEMA_VERSION = len(MIGRATIONS)
#: the store's tables, for a test or benchmark that empties a database
TABLES = ("node_hours", "running_nodes", "job_hours", "job_json", "job_records", "schema_version")


def has_table(db: Db, table: str) -> bool:
    if db.dialect == "sqlite":
        return bool(db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :t", {"t": table}))
    return db.execute("SELECT to_regclass(:t) IS NOT NULL", {"t": table})[0][0]


def current_version(db: Db) -> int:
    """Schema version recorded in the database (0 for an empty database)."""
    if not has_table(db, "schema_version"):
        return 0
    return int(db.execute("SELECT max(version) FROM schema_version")[0][0] or 0)


#: SQLite: a concurrent first open (another process creating the schema) is retried this many
#: times, pausing 0.2, 0.4, 0.8 ... s (its tables can be visible before its schema_version row when
#: it created them outside a transaction: "table ... already exists").
SQLITE_CREATE_RETRIES = 6


def migrate(db: Db) -> int:
    """Apply missing migrations; return the resulting version.

    Two processes opening a new store at once (a Prolog's detached finalizer and a reader): on
    PostgreSQL an advisory lock serialises them; on SQLite the write transaction (``BEGIN
    IMMEDIATE``) does, and a loser's "already exists" is retried after the winner finishes
    (:data:`SQLITE_CREATE_RETRIES`), re-reading the version.

    Raises:
        RuntimeError: the database is newer than this code (downgrade refused; upgrade slurm-energy).
        StoreDbError: any other database error, or SQLite still racing after every retry.
    """
    # also SQLite's "locking protocol" (SQLITE_PROTOCOL, WAL's transient wal-index race): seen under
    # the job-end fault burst, where it sent a finalizer's record to collect's queue from here
    return retried(lambda: _migrate_once(db), SQLITE_CREATE_RETRIES + 1, 0.2,
                   lambda e: db.dialect == "sqlite" and ("already exists" in str(e) or "locking protocol" in str(e)))


def _migrate_once(db: Db) -> int:
    with db.transaction():
        if db.dialect == "postgresql":
            # serialise concurrent first opens (two Epilogs creating the schema at once)
            db.execute("SELECT pg_advisory_xact_lock(827364501)")
        v = current_version(db)
        if v > SCHEMA_VERSION:
            raise RuntimeError(
                f"store schema version {v} is newer than this slurm-energy ({SCHEMA_VERSION}); "
                "upgrade slurm-energy on this host"
            )
        if v == 0 and not has_table(db, "schema_version"):
            db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for i in range(v, SCHEMA_VERSION):
            MIGRATIONS[i](db)
            db.execute("INSERT INTO schema_version (version) VALUES (:v)", {"v": i + 1})
    return SCHEMA_VERSION

"""Store schema and its migrations.

Decision: a ``schema_version`` table plus an ordered list of migration functions, instead of
Alembic. Alembic needs an ini file, a script directory and Mako templates shipped with the package
and run by admins; our schema is one table and a handful of indexes, and every migration must run
unattended from the first ``open_store`` on a compute node or the controller. Each entry of
:data:`MIGRATIONS` takes a SQLAlchemy ``Connection`` and moves the schema from version ``i`` to
``i + 1``; :func:`migrate` applies the missing ones in one transaction (PostgreSQL: DDL is
transactional; SQLite: likewise for CREATE TABLE/INDEX). Never edit a released migration: append one.

Version 1: one table, ``job_records``: the full JobRecord JSON (``record_json``) beside indexed copies
of the fields ``jobenergy`` filters on. Version 2 (:mod:`slurm_energy.store.migrate_v2`) splits it:

* ``job_records``: one summary row per attempt, everything ``jobenergy``'s default columns and the
  rollup need (energy per device class with its method, facility kWh, CO2e, elapsed, CPU time, GPU
  count, state/status), < 1 KB with its indexes; no JSON;
* ``job_json``: the full record (power trace, devices), read only for ``-l``, ``--json`` and reports;
* ``job_hours``: the job's IT energy per UTC hour (from the nodes' ``hourly_energy_j``), its facility
  kWh and CO2e, so a month's rollup is a SQL aggregate (:mod:`slurm_energy.store.rollup`).
"""

from __future__ import annotations

import time
from typing import Callable

import sqlalchemy as sa

#: version 1's tables, frozen: :func:`_m1_create` builds them (a fresh store then migrates to v2)
v1_metadata = sa.MetaData()

jobs = sa.Table(
    "job_records",
    v1_metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("cluster", sa.String(128), nullable=False),
    sa.Column("job_id", sa.String(32), nullable=False),  # Slurm's raw job id
    sa.Column("start_time", sa.Double, nullable=False),  # epoch s; DOUBLE PRECISION on PostgreSQL
    sa.Column("end_time", sa.Double, nullable=False),
    sa.Column("restart_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("array_job_id", sa.String(32)),
    sa.Column("array_task_id", sa.String(32)),
    sa.Column("het_job_id", sa.String(32)),
    sa.Column("het_job_offset", sa.String(16)),
    sa.Column("user", sa.String(128), nullable=False, server_default=""),
    sa.Column("uid", sa.Integer),
    sa.Column("account", sa.String(128), nullable=False, server_default=""),
    sa.Column("partition", sa.String(128), nullable=False, server_default=""),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("it_kwh", sa.Double),  # NULL = unmeasured, never 0
    sa.Column("facility_kwh", sa.Double),
    sa.Column("co2e_kg", sa.Double),
    sa.Column("record_json", sa.Text, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.UniqueConstraint("cluster", "job_id", "start_time", name="uq_job_attempt"),
    sa.Index("ix_job_id", "job_id"),
    sa.Index("ix_array", "array_job_id", "array_task_id"),
    sa.Index("ix_het", "het_job_id", "het_job_offset"),
    sa.Index("ix_user_start", "user", "start_time"),
    sa.Index("ix_account_start", "account", "start_time"),
    sa.Index("ix_partition", "partition"),
    sa.Index("ix_start", "start_time"),
    sa.Index("ix_end", "end_time"),
    sa.Index("ix_status", "status"),
)

#: the current schema (version 2): summary rows, full records apart, hourly energy
metadata = sa.MetaData()


def _summary_columns() -> list[sa.Column]:
    """Columns version 2 adds to job_records (all nullable: ALTER TABLE ADD COLUMN on a v1 store).

    Units in the names; NULL energy = unmeasured (never 0); a class absent from ``classes`` had no
    device on the job (jobenergy's ``-``)."""
    D = sa.Double
    return [
        sa.Column("job_name", sa.String(256)),
        sa.Column("job_state", sa.String(24)),  # Slurm's final state, else derived from exit_code, else ""
        sa.Column("exit_code", sa.String(16)),
        sa.Column("n_nodes", sa.Integer),  # expected nodes (else nodes that reported)
        sa.Column("elapsed_s", D),  # end_time - start_time (>= 0); max() bounds a time window's scan
        sa.Column("cpu_time_s", D),  # summed over nodes; NULL = unknown
        sa.Column("n_gpus", sa.Integer),
        sa.Column("cpu_kwh", D), sa.Column("gpu_kwh", D), sa.Column("ram_kwh", D),  # the job's IT share
        sa.Column("classes", sa.String(32)),  # device classes in energy_it_j, e.g. "cpu,ram"
        sa.Column("methods", sa.String(160)),  # JobRecord.method_summary, e.g. "cpu=counter,ram=tdp_estimate"
        sa.Column("measured_it_kwh", D),  # classes from a counter or integrated power
        sa.Column("estimated_it_kwh", D),  # classes from the TDP model
        sa.Column("coverage_complete", sa.Boolean),
        sa.Column("report_error", sa.Text),
        sa.Column("pue", D), sa.Column("ci_g_per_kwh", D),
        sa.Column("hourly_it_kwh", D),  # sum of the job's job_hours.it_kwh (0 / NULL: no hourly energy)
        sa.Column("hourly_co2e_kg", D),  # sum of the job's job_hours.co2e_kg
        sa.Column("hours_outside", sa.Boolean),  # an hour's energy is stamped outside the job's times
        *_idle_columns(),
    ]  # fmt: skip


def _idle_columns() -> list[sa.Column]:
    """Columns version 3 adds (:func:`_m3_gpu_idle`): GPUs allocated but idle (JobRecord.gpu_idle_*);
    NULL = no GPU or none judged, never 0."""
    return [
        sa.Column("gpu_idle_s", sa.Double),  # GPU-seconds allocated but idle, summed over the job's GPUs
        sa.Column("gpu_idle_kwh", sa.Double),  # the job's GPU energy in those seconds
        sa.Column("gpu_idle_method", sa.String(24)),  # counter / power_integration (measured) / tdp_estimate
    ]


#: version 2's job_records: version 1's columns less record_json, plus the summary columns
records = sa.Table(
    "job_records",
    metadata,
    *[c._copy() for c in jobs.columns if c.name != "record_json"],
    *_summary_columns(),
    sa.UniqueConstraint("cluster", "job_id", "start_time", name="uq_job_attempt"),
    *[sa.Index(ix.name, *[c.name for c in ix.columns]) for ix in jobs.indexes],
    sa.Index("ix_elapsed", "elapsed_s"),
)

#: the full record of each job_records row (same id), read only for -l, --json and reports
job_json = sa.Table(
    "job_json",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("record_json", sa.Text, nullable=False),
)

#: the job's energy per UTC hour: one row per (job_records.id, hour); month splits sum these
job_hours = sa.Table(
    "job_hours",
    metadata,
    sa.Column("job_row_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("hour_start", sa.BigInteger, primary_key=True, autoincrement=False),  # epoch s, UTC hour
    sa.Column("it_kwh", sa.Double, nullable=False),
    sa.Column("facility_kwh", sa.Double, nullable=False),
    sa.Column("co2e_kg", sa.Double),
    sqlite_with_rowid=False,
)

version_table = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, nullable=False),
)


def _m1_create(conn: sa.Connection) -> None:
    """v0 -> v1: the job_records table with its query indexes.

    When a v2 changes ``jobs``, first freeze the v1 definition inside this function (a copy of the
    Table on a private MetaData), so a fresh database still goes v0 -> v1 -> v2 step by step.
    """
    jobs.create(conn)


def _m2_split(conn: sa.Connection) -> None:
    """v1 -> v2: summary columns, ``job_json`` and ``job_hours``, backfilled from record_json
    (:func:`slurm_energy.store.migrate_v2.upgrade`, with a progress bar)."""
    from slurm_energy.store.migrate_v2 import upgrade

    upgrade(conn)


def _m3_gpu_idle(conn: sa.Connection) -> None:
    """v2 -> v3: the GPU-idle columns (:func:`_idle_columns`), added where missing (a v1 store's
    v2 step already adds every current column). Not backfilled: records stored before carry no
    idle figures (NULL = unknown, never 0)."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("job_records")}
    q = conn.dialect.identifier_preparer.quote
    for col in _idle_columns():
        if col.name not in have:
            conn.execute(sa.text(f"ALTER TABLE job_records ADD COLUMN {q(col.name)} {col.type.compile(conn.dialect)}"))


#: Ordered migrations; MIGRATIONS[i] upgrades from version i to i + 1.
MIGRATIONS: list[Callable[[sa.Connection], None]] = [_m1_create, _m2_split, _m3_gpu_idle]
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: sa.Connection) -> int:
    """Schema version recorded in the database (0 for an empty database)."""
    insp = sa.inspect(conn)
    if not insp.has_table("schema_version"):
        return 0
    v = conn.execute(sa.select(sa.func.max(version_table.c.version))).scalar()
    return int(v or 0)


#: SQLite: a concurrent first open (another process creating the schema) is retried this many
#: times, pausing 0.2, 0.4, 0.8 ... s (pysqlite runs DDL outside a transaction, so the other
#: process's tables can be visible before its schema_version row: "table ... already exists").
SQLITE_CREATE_RETRIES = 6


def migrate(engine: sa.Engine) -> int:
    """Apply missing migrations; return the resulting version.

    Two processes opening a new store at once (a Prolog's detached finalizer and a reader): on
    PostgreSQL an advisory lock serialises them; on SQLite the loser's "already exists" is retried
    after the winner finishes (:data:`SQLITE_CREATE_RETRIES`), re-reading the version.

    Raises:
        RuntimeError: the database is newer than this code (downgrade refused; upgrade slurm-energy).
        sqlalchemy.exc.OperationalError: any other database error, or SQLite still racing after
            every retry.
    """
    wait = 0.2
    for attempt in range(SQLITE_CREATE_RETRIES + 1):
        try:
            return _migrate_once(engine)
        except sa.exc.OperationalError as e:
            if engine.dialect.name != "sqlite" or "already exists" not in str(e) or attempt == SQLITE_CREATE_RETRIES:
                raise
            time.sleep(wait)
            wait *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def _migrate_once(engine: sa.Engine) -> int:
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # serialise concurrent first opens (two Epilogs creating the schema at once)
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(827364501)"))
        v = current_version(conn)
        if conn.dialect.name == "sqlite" and 0 < v < SCHEMA_VERSION:
            # take SQLite's write lock, then read the version again (pysqlite opens the transaction at
            # this first write): a second process migrating at once waits, then sees the new version
            conn.execute(sa.text("DELETE FROM schema_version WHERE 0 = 1"))
            v = current_version(conn)
        if v > SCHEMA_VERSION:
            raise RuntimeError(
                f"store schema version {v} is newer than this slurm-energy ({SCHEMA_VERSION}); "
                "upgrade slurm-energy on this host"
            )
        if v == 0 and not sa.inspect(conn).has_table("schema_version"):
            version_table.create(conn)
        for i in range(v, SCHEMA_VERSION):
            MIGRATIONS[i](conn)
            conn.execute(version_table.insert().values(version=i + 1))
    return SCHEMA_VERSION

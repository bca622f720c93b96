"""Store schema v1 -> v2, in place (:data:`slurm_energy.store.schema.MIGRATIONS`).

Adds the summary columns to ``job_records``, creates ``job_json`` and ``job_hours``, backfills all
three from each row's ``record_json`` (batches of :data:`BATCH` rows, a progress bar on a terminal),
then drops ``record_json`` from ``job_records`` (``ALTER TABLE ... DROP COLUMN``: SQLite >= 3.35, or
PostgreSQL). Runs inside :func:`slurm_energy.store.schema.migrate`'s transaction: a failure
leaves the v1 store as it was.
"""

from __future__ import annotations

import sqlite3

import sqlalchemy as sa

from slurm_energy.store import schema as S
from slurm_energy.store.progress import progress

#: rows parsed and written per round trip
BATCH = 2000


def _add_columns(conn: sa.Connection) -> None:
    q = conn.dialect.identifier_preparer.quote
    for col in S.records.columns:
        if col.name in {c.name for c in S.jobs.columns}:
            continue
        conn.execute(sa.text(f"ALTER TABLE job_records ADD COLUMN {q(col.name)} {col.type.compile(conn.dialect)}"))
    for ix in S.records.indexes:
        if ix.name not in {i.name for i in S.jobs.indexes}:
            ix.create(conn)
    S.job_json.create(conn)
    S.job_hours.create(conn)


def _backfill(conn: sa.Connection) -> None:
    from slurm_energy.model import JobRecord
    from slurm_energy.store.summary import hour_rows, site_hourly_ci, summary_columns

    ci = site_hourly_ci()
    old = S.jobs.c
    total = int(conn.execute(sa.select(sa.func.count()).select_from(S.jobs)).scalar() or 0)
    upd = S.records.update().where(S.records.c.id == sa.bindparam("_id"))
    last = -1
    with progress(total, "store v1 -> v2: summary columns and hourly energy") as advance:
        while True:
            rows = conn.execute(sa.select(old.id, old.record_json).where(old.id > last).order_by(old.id)
                                .limit(BATCH)).all()
            if not rows:
                return
            summaries, jsons, hours = [], [], []
            for rid, text in rows:
                rec = JobRecord.model_validate_json(text)
                hs = hour_rows(rec, ci(rec))
                summaries.append({"_id": rid, **summary_columns(rec, hs)})
                jsons.append({"id": rid, "record_json": text})
                hours += [{"job_row_id": rid, **h} for h in hs]
            conn.execute(upd, summaries)
            conn.execute(sa.insert(S.job_json), jsons)
            if hours:
                conn.execute(sa.insert(S.job_hours), hours)
            last = rows[-1][0]
            advance(len(rows))


def upgrade(conn: sa.Connection) -> None:
    """v1 -> v2 on ``conn`` (see the module docstring). Raises pydantic's ValidationError for a
    stored record_json that is not a JobRecord (nothing is changed then)."""
    _add_columns(conn)
    _backfill(conn)
    if conn.dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 35, 0):
        raise RuntimeError(f"store migration to v2 needs SQLite >= 3.35 (ALTER TABLE DROP COLUMN); this Python "
                           f"has {sqlite3.sqlite_version}: run slurm-energy with a newer Python")
    conn.execute(sa.text("ALTER TABLE job_records DROP COLUMN record_json"))

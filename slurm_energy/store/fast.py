"""``jobenergy``'s read path on a SQLite store with Python's ``sqlite3`` only: no SQLAlchemy, no
pydantic for the summary table (a job's whole CLI run is then faster than ``sacct -j``).

:func:`read_sqlite` answers the same filters as :meth:`slurm_energy.store.sqlstore.Store.rows` /
``query`` (same SQL: :mod:`slurm_energy.store.select`), or None when it cannot (not a plain SQLite
URL, a schema it does not know, any SQLite error): the caller then takes the SQLAlchemy path, which
names the problem as :func:`slurm_energy.store.open_store` does.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from slurm_energy.errors import StoreError
from slurm_energy.store import select as Q

#: the store layout this reader knows (schema.SCHEMA_VERSION when it was written; a test keeps them equal)
READS_VERSION = 2
FIX = "check paths.store_url in site.yaml (or --store / $SLURM_ENERGY_STORE)"


def check_readable_sqlite(path: str) -> None:
    """A reader never creates a store: a missing or empty file is a StoreError naming the path."""
    if not os.path.exists(path):
        raise StoreError(f"store {path} does not exist (no job recorded yet, or a mistyped path); {FIX}")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise StoreError(f"store {path} is an empty file, not a slurm-energy store; {FIX}")


def sqlite_path(url: str) -> Optional[str]:
    """The file of a plain ``sqlite:////abs/path`` URL (no driver, no query string), else None."""
    if not url.startswith("sqlite:////") or "?" in url:
        return None
    return url[len("sqlite:///"):]


def _connect(url: str):
    """A read-only sqlite3 connection to a v2 store at a plain SQLite URL, else None (see module)."""
    import sqlite3

    path = sqlite_path(url)
    if path is None:
        return None
    check_readable_sqlite(path)
    conn = None
    try:
        uri_path = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")  # URI-escaped (no urllib)
        conn = sqlite3.connect(f"file:{uri_path}?mode=ro", uri=True, timeout=30.0)
        if conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] == READS_VERSION:
            return conn
    except sqlite3.Error:
        pass
    if conn is not None:
        conn.close()
    return None


def rollup_sqlite(url: str, by: str, t0: float, t1: float) -> Optional[list[dict[str, Any]]]:
    """:func:`slurm_energy.store.rollup.rollup_rows` on a SQLite store through ``sqlite3`` (``rollup
    --month`` without importing SQLAlchemy), or None when this reader cannot answer (see module).
    Raises StoreError (missing or empty file), ValueError (another ``by``)."""
    import sqlite3

    from slurm_energy.store.rollup import rollup_rows

    conn = _connect(url)
    if conn is None:
        return None
    try:
        return rollup_rows(lambda q, p: conn.execute(q, p).fetchall(), "sqlite", by, t0, t1)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def read_sqlite(url: str, *, full: bool = False, **filters: Any) -> Optional[list]:
    """The attempts matching ``filters`` (:func:`slurm_energy.store.select.where`'s names; ``specs``:
    parsed job ids), oldest first: :class:`~slurm_energy.store.select.JobRow` summaries, or with
    ``full`` the JobRecords (record JSON parsed). None when this reader cannot answer (see module).

    Raises StoreError: the file is missing or empty (as ``open_store(readonly=True)``)."""
    import sqlite3

    conn = _connect(url)
    if conn is None:
        return None
    try:
        longest = conn.execute(Q.LONGEST_SQL).fetchone()[0] if filters.get("start") is not None else None
        w = Q.where(**filters, longest=longest or 0.0)
        rows = [Q.JobRow(r) for r in conn.execute(Q.rows_sql(w), w.params)]
        if not full:
            return rows
        from slurm_energy.model import JobRecord

        texts: dict[int, str] = {}
        ids = [r.id for r in rows]
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            marks = ",".join("?" * len(chunk))
            texts.update(conn.execute(f"SELECT id, record_json FROM job_json WHERE id IN ({marks})", chunk))
        return [JobRecord.model_validate_json(texts[i]) for i in ids if i in texts]
    except sqlite3.Error:
        return None
    finally:
        conn.close()

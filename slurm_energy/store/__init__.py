"""Job record store (SQLite by default, PostgreSQL for clusters), on each database's own driver.

Public API: :func:`open_store`, :class:`Store` (``put``, ``get_job``, ``query``, ``rows``) and
:func:`check_store_url` (is a URL usable here, without connecting). Importing it loads neither
pydantic nor psycopg (jobenergy's start-up): records are parsed, and psycopg imported, when used.
"""

from __future__ import annotations

from slurm_energy.store.sqlstore import Store, open_store
from slurm_energy.store.urls import check_store_url

__all__ = ["Store", "check_store_url", "open_store"]

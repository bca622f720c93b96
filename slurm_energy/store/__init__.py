"""Job record store (SQLAlchemy 2: SQLite by default, PostgreSQL for clusters).

Public API: :func:`open_store`, :class:`Store` (``put``, ``get_job``, ``query``) and
:func:`check_store_url` (is a URL usable here, without connecting).
"""

from slurm_energy.store.sqlstore import Store, open_store
from slurm_energy.store.urls import check_store_url

__all__ = ["Store", "check_store_url", "open_store"]

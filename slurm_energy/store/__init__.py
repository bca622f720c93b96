"""Job record store (SQLAlchemy 2: SQLite by default, PostgreSQL for clusters).

Public API: :func:`open_store` and :class:`Store` (``put``, ``get_job``, ``query``).
"""

from slurm_energy.store.sqlstore import Store, open_store

__all__ = ["Store", "open_store"]
